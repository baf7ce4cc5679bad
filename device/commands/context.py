"""What every command needs from the global options: settings, the model store, threads."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engines.store.model_store import ModelStore

from device.settings import Settings, load_settings


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings, read once per command."""
    if getattr(args, "_settings", None) is None:
        args._settings = load_settings(args.config)
    return args._settings


def store_of(args: argparse.Namespace) -> ModelStore:
    configured = settings_of(args).models.store
    return ModelStore(args.store or (Path(configured) if configured else None))


def threads_of(args: argparse.Namespace) -> int:
    return args.threads or settings_of(args).cpu.threads


def print_json(data: object) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")

"""What the commands share: JSON output, checks of output paths."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from engines.errors import InputError


def print_json(data: object) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def check_wav_out(path: Path) -> None:
    """Before any work: the place a WAV file is to be written."""
    if path.suffix.lower() != ".wav":
        raise InputError(f"--out {path}: the file is written as WAV; give a name ending in .wav")
    if path.is_dir() or not path.parent.is_dir() or not os.access(path.parent, os.W_OK):
        raise InputError(f"--out {path}: cannot write there (no such directory, a directory, or not writable)")

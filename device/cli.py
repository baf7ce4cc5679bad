"""The `orin-avatar` command: argument parsing and dispatch, errors turned into exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from engines.errors import OrinAvatarError

from device.commands import calibrate, conversation, debug, devices, engines, models, service
from device.bench import io as bench_io
from device.bench import models as bench_models
from device.bench import render as bench_render
from device.bench import turn as bench_turn


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="orin-avatar", description="Talking-avatar kiosk runtime for Jetson AGX Orin.")
    parser.add_argument("--config", type=Path, help="settings TOML (default: /etc/orin-avatar/orin-avatar.toml if present)")
    parser.add_argument("--store", type=Path, help="model store directory (overrides [models] store)")
    parser.add_argument("--threads", type=int, help="CPU threads per model (overrides [cpu] threads)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    service.register(commands)
    conversation.register(commands)
    models.register(commands)
    engines.register(commands)
    devices.register(commands)
    calibrate.register(commands)
    debug.register(commands)
    bench = commands.add_parser("bench", help="measure speed and memory")
    bench_kinds = bench.add_subparsers(dest="bench", required=True, metavar="WHAT")
    bench_models.register(bench_kinds)
    bench_turn.register(bench_kinds)
    bench_render.register(bench_kinds)
    bench_io.register(bench_kinds)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.run(args) or 0
    except OrinAvatarError as exc:
        print(f"orin-avatar: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("orin-avatar: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

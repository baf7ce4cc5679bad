"""The `orin-avatar` command: argument parsing and dispatch, errors turned into exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from engines.errors import OrinAvatarError

from device.app import App
from device.commands import avatar, bench, calibrate, conversation, debug, devices, engines, knowledge, models, service


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orin-avatar", description="Talking-avatar kiosk runtime for Jetson AGX Orin."
    )
    parser.add_argument(
        "--config", type=Path, help="settings TOML (default: /etc/orin-avatar/orin-avatar.toml if present)"
    )
    parser.add_argument("--store", type=Path, help="model store directory (overrides [models] store)")
    parser.add_argument("--threads", type=int, help="CPU threads per model (overrides [cpu] threads)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (service, conversation, knowledge, avatar, models, engines, devices, calibrate, debug, bench):
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        app = App(args.config, args.store, args.threads, args.verbose)
        return args.run(app, args) or 0
    except OrinAvatarError as exc:
        print(f"orin-avatar: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file or folder the command needs (a read-only home, a full disk): one line, no traceback
        where = f" ({exc.filename})" if exc.filename else ""
        print(
            f"orin-avatar: error: {exc.strerror or exc}{where}; check that it exists and this user may write it",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print("orin-avatar: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

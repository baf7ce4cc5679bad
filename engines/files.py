"""Files that must never be half-written or written by two processes at once."""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _umask() -> int:
    """The process's umask, read without changing it (os.umask sets it, a race with other threads)."""
    try:
        line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("Umask:"))
        return int(line.split()[1], 8)
    except (OSError, StopIteration, ValueError):
        return 0o022


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file, fsync and rename, so readers see the old or the new file (and a
    symlink planted at `path` is replaced, never written through)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # as open() would make it (mkstemp's file is 0600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def file_lock(path: Path, blocking: bool = True) -> Iterator[bool]:
    """An exclusive advisory lock on `path`; yields False if `blocking` is off and it is taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW, no truncation: a symlink planted at `path` is an error, never a file written through
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True

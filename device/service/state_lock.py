"""One daemon per state directory: a second one would take the first one's status socket (and delete
it when it stops, leaving the first invisible to `status` and `doctor`) and write into the same files."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from engines.errors import OrinAvatarError


class StateLock:
    """An exclusive lock on `<state>/daemon.lock`, held for the process's life (the kernel drops it when
    the process ends, however it ends); the file says which process holds it."""

    def __init__(self, state: Path) -> None:
        self.path = state / "daemon.lock"
        try:  # O_NOFOLLOW: a symlink planted in its place is not followed
            state.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
        except OSError as exc:
            raise OrinAvatarError(
                f"cannot open the daemon's lock {self.path}: {exc.strerror}; "
                "make the state directory writable by the daemon's user"
            ) from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(self._fd)
            raise OrinAvatarError(
                f"another orin-avatar daemon (pid {holder}) runs on {state}; stop it first "
                "(systemctl stop orin-avatar), or give this one its own ORIN_AVATAR_HOME"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        os.close(self._fd)

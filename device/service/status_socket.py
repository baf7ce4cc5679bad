"""The running daemon's status, served as JSON on a local Unix socket (`orin-avatar status`)."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path
from typing import Callable

from engines.errors import OrinAvatarError
from engines.store.model_store import state_home

UNIT_RUNTIME = Path("/run/orin-avatar")  # the unit's RuntimeDirectory=orin-avatar


def socket_path() -> Path:
    """Where the daemon listens: its RUNTIME_DIRECTORY under the unit; `status` and `doctor`, started
    by a person without that variable, find the unit's directory when it exists."""
    runtime = os.environ.get("RUNTIME_DIRECTORY")  # systemd's RuntimeDirectory=
    if runtime:
        return Path(runtime.split(":")[0]) / "status.sock"
    if (UNIT_RUNTIME / "status.sock").exists():
        return UNIT_RUNTIME / "status.sock"
    return state_home() / "run" / "status.sock"


CLIENT_TIMEOUT_S = 1.0
LISTEN_BACKLOG = 64  # readers waiting to be answered (a console, `status`, `doctor` at once) are queued, not refused


class StatusServer:
    """Answers every connection with one JSON document and closes it."""

    def __init__(self, snapshot: Callable[[], dict], path: Path | None = None) -> None:
        self.path = path or socket_path()
        self.snapshot = snapshot
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.bind(str(self.path))
        os.chmod(self.path, 0o660)
        self._socket.listen(LISTEN_BACKLOG)
        self._socket.settimeout(0.5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="status", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._socket.accept()
            except (socket.timeout, OSError):
                continue
            with client:
                try:
                    client.settimeout(CLIENT_TIMEOUT_S)  # a client that never reads must not block the others
                    client.sendall(json.dumps(self.snapshot(), default=str).encode())
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._socket.close()
        self.path.unlink(missing_ok=True)


def read_status(path: Path | None = None, timeout: float = 3.0) -> dict:
    path = path or socket_path()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout)
            client.connect(str(path))
            chunks = []
            while chunk := client.recv(65536):
                chunks.append(chunk)
    except (FileNotFoundError, ConnectionRefusedError):
        raise OrinAvatarError(
            f"no orin-avatar daemon is running (no status socket at {path}); "
            "start it with 'systemctl start orin-avatar' or 'orin-avatar run'"
        ) from None
    except OSError as exc:
        raise OrinAvatarError(f"could not read the daemon's status from {path}: {exc}") from None
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        raise OrinAvatarError(
            f"the status socket {path} answered something that is not orin-avatar's status; "
            "is another program listening there?"
        ) from None

"""The running daemon's status, served as JSON on a local Unix socket (`orin-avatar status`)."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from pathlib import Path
from typing import Callable

from engines.errors import OrinAvatarError
from engines.store.model_store import state_home

log = logging.getLogger(__name__)
UNIT_RUNTIME = Path("/run/orin-avatar")  # the unit's RuntimeDirectory=orin-avatar


def served_path() -> Path:
    """Where a daemon listens: its RUNTIME_DIRECTORY under the unit, else its own state directory (never
    the unit's folder: a daemon run by hand beside the service must not take the service's socket)."""
    runtime = os.environ.get("RUNTIME_DIRECTORY")  # systemd's RuntimeDirectory=
    return Path(runtime.split(":")[0]) / "status.sock" if runtime else state_home() / "run" / "status.sock"


def socket_path() -> Path:
    """Where `status` and `doctor` look: where a daemon started like them listens, or the unit's socket
    when they are started by a person, without RUNTIME_DIRECTORY, and the unit's socket exists."""
    if not os.environ.get("RUNTIME_DIRECTORY") and (UNIT_RUNTIME / "status.sock").exists():
        return UNIT_RUNTIME / "status.sock"
    return served_path()


CLIENT_TIMEOUT_S = 1.0
STATUS_KEYS = {"state", "pid", "uptime_s", "models", "devices", "hung_stages", "knowledge", "tally", "turns"}
LISTEN_BACKLOG = 64  # readers waiting to be answered (a console, `status`, `doctor` at once) are queued, not refused


class StatusServer:
    """Answers every connection with one JSON document and closes it."""

    def __init__(self, snapshot: Callable[[], dict], path: Path | None = None) -> None:
        self.path = path or served_path()
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
                except Exception:  # a snapshot that fails must not end the thread: the next reader may be luckier
                    log.exception("the status could not be put together; this reader gets none")

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
        status = json.loads(b"".join(chunks))
        if not isinstance(status, dict) or not STATUS_KEYS <= status.keys():
            raise ValueError("not the daemon's shape")
        return status
    except ValueError:
        raise OrinAvatarError(
            f"the status socket {path} answered something that is not orin-avatar's status; "
            "is another program listening there?"
        ) from None

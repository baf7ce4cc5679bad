"""The sd_notify protocol: what the daemon tells systemd, through libsystemd (systemd-python).

Without NOTIFY_SOCKET (not started by systemd) every call does nothing, like gunicorn's.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


class Notifier:
    def __init__(self) -> None:
        self.enabled = bool(os.environ.get("NOTIFY_SOCKET"))
        self.last_status = ""

    def _send(self, message: str) -> None:
        if not self.enabled:
            return
        from systemd import daemon

        if not daemon.notify(message):
            log.debug("sd_notify(%r) was not delivered", message)

    def status(self, text: str) -> None:
        """A line a person reads in `systemctl status`."""
        self.last_status = text
        self._send(f"STATUS={text}")

    def ready(self, text: str) -> None:
        self.last_status = text
        self._send(f"READY=1\nSTATUS={text}")

    def extend_timeout(self, seconds: float) -> None:
        self._send(f"EXTEND_TIMEOUT_USEC={int(seconds * 1_000_000)}")

    def watchdog(self) -> None:
        self._send("WATCHDOG=1")

    def reloading(self) -> None:
        self._send("RELOADING=1\nSTATUS=reloading settings and knowledge base")

    def stopping(self) -> None:
        self._send("STOPPING=1\nSTATUS=stopping")


def watchdog_interval() -> float | None:
    """Half of WatchdogSec= (systemd passes WATCHDOG_USEC), or None when no watchdog is set."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2_000_000

"""Worker heartbeats, and the watchdog pings that are sent only while every worker is alive.

Each long-running thread beats at least every few seconds (an idle loop beats on its wait
timeout); a thread that stops beating for longer than its deadline is hung, the pings stop, and
systemd restarts the service after WatchdogSec.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)


class Heartbeats:
    def __init__(self) -> None:
        self._deadlines: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()
        self._reported: set[str] = set()

    def register(self, name: str, deadline_s: float) -> Callable[[], None]:
        """Add a worker; returns its `beat` function."""
        with self._lock:
            self._deadlines[name] = deadline_s
            self._last[name] = time.monotonic()
        return lambda: self.beat(name)

    def beat(self, name: str) -> None:
        self._last[name] = time.monotonic()

    def stale(self) -> list[str]:
        now = time.monotonic()
        with self._lock:
            return [n for n, deadline in self._deadlines.items() if now - self._last[n] > deadline]

    def ages(self) -> dict[str, float]:
        now = time.monotonic()
        return {n: round(now - t, 2) for n, t in self._last.items()}

    def run_watchdog(self, ping: Callable[[], None], interval_s: float, stop: threading.Event) -> None:
        """Ping every `interval_s` while no worker is stale; log a hang once, and its recovery."""
        while not stop.wait(interval_s):
            hung = set(self.stale())
            for name in hung - self._reported:
                log.error(
                    "stage %s has not reported for %.0f s: withholding the watchdog so systemd restarts us",
                    name,
                    self.ages()[name],
                )
            for name in self._reported - hung:
                log.warning("stage %s reports again", name)
            self._reported = hung
            if not hung:
                ping()

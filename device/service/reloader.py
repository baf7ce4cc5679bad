"""SIGHUP's work on a thread of its own: the knowledge base re-read and embedded, its answers given to
the speech cache. A large knowledge base takes minutes to embed on the CPU (3,000 intents: 79 s); done on
the display thread, the avatar froze and the watchdog stopped for as long. Here the conversation goes on
with the old knowledge until the new one is whole, the thread reports between batches (a reload is
work, not a hang), and a stop ends it at the next batch.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from engines.errors import OrinAvatarError

from device.conversation.turn_loop import Conversation
from device.service.notifier import Notifier
from device.settings import load_settings

log = logging.getLogger(__name__)
IDLE_BEAT_S = 1.0  # the thread beats this often while it waits for a reload


class ReloadStopped(Exception):
    """The daemon stops: the reload under way is left, the old knowledge base kept."""


class Reloader:
    """Owns the "reload" thread. Setting `wanted` (SIGHUP's handler does, even before the thread starts)
    asks for a reload; requests that come while one runs make one more reload after it, not one each."""

    def __init__(
        self,
        config: Path | None,
        conversation: Conversation,
        notifier: Notifier,
        summary: Callable[[], str],
        beat: Callable[[], None],
        wanted: threading.Event,
        stop: threading.Event,
    ) -> None:
        self.config = config
        self.conversation = conversation
        self.notifier = notifier
        self.summary = summary
        self.last = ""  # what the last reload did, for `status`
        self._beat = beat
        self._stop = stop
        self._wanted = wanted
        self._thread = threading.Thread(target=self._run, name="reload", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._beat()
            if self._wanted.wait(IDLE_BEAT_S) and not self._stop.is_set():
                self._wanted.clear()
                self._reload()

    def _between(self) -> None:
        """Between two batches of embeddings: alive, unless the daemon stops."""
        self._beat()
        if self._stop.is_set():
            raise ReloadStopped

    def _reload(self) -> None:
        self.notifier.reloading()
        try:
            settings = load_settings(self.config)
            knowledge = Path(settings.dialogue.knowledge) if settings.dialogue.knowledge else None
            count = self.conversation.dialogue.reload(knowledge, self._between)
            self.conversation.speech.prepare(
                [i.answer for i in self.conversation.dialogue.intents.values() if i.answer]
            )
            self.last = f"ok: {count} intents from {knowledge or 'the embedded example'}"
            log.info("reloaded the knowledge base: %s", self.last)
        except ReloadStopped:
            log.info("stopping: the reload under way is left, the previous knowledge base kept")
            return
        except OrinAvatarError as exc:
            self.last = f"failed, kept the previous knowledge base: {exc}"
            log.error("reload %s", self.last)
        except Exception as exc:  # a reload must never end the daemon: keep what works, say why
            self.last = f"failed, kept the previous knowledge base: {type(exc).__name__}: {exc}"
            log.exception("reload %s", self.last)
        self.notifier.ready(f"{self.summary()}; reload {self.last.split(':')[0]}")

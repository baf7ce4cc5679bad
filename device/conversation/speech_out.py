"""Speech out: a reply becomes sentence chunks with visemes, the first ready as soon as possible.

The first sentence is synthesized and handed on while the rest is still being made. Replies that
come back word for word (the knowledge base's answers) are cached, so a kiosk answers its common
questions without synthesizing at all; `prepare` fills the cache in the background at start.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Iterator

from device.messages import ReplyChunk
from device.conversation.visemes import viseme_timeline
from device.models.tts import SpeechChunk, SpeechSynthesizer

CACHE_SIZE = 64  # sentences
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str) -> list[str]:
    return [s for s in (part.strip() for part in _SENTENCE_END.split(text)) if s]


class SpeechOut:
    def __init__(self, tts: SpeechSynthesizer, cache: bool = True) -> None:
        self.tts = tts
        self.cache_enabled = cache
        self._cache: OrderedDict[str, SpeechChunk] = OrderedDict()
        self._lock = threading.Lock()
        self._tts_lock = threading.Lock()  # one synthesis at a time: the runner is not re-entrant
        self._preparing: threading.Thread | None = None

    def chunks(self, turn: int, text: str, cancelled: threading.Event) -> Iterator[ReplyChunk]:
        """Sentence chunks of `text`; stops early when `cancelled` is set."""
        sentences = split_sentences(text)
        start = 0
        for index, sentence in enumerate(sentences):
            if cancelled.is_set():
                return
            spoken = self._sentence(sentence)
            yield ReplyChunk(turn, index, sentence, spoken.audio, spoken.sample_rate, start,
                             viseme_timeline(spoken.phonemes, start), index == len(sentences) - 1)
            start += len(spoken.audio)

    def prepare(self, texts: list[str]) -> None:
        """Synthesize `texts` into the cache on a background thread."""
        def run() -> None:
            for text in texts:
                for sentence in split_sentences(text):
                    self._sentence(sentence)

        if self.cache_enabled:
            self._preparing = threading.Thread(target=run, name="speech-cache", daemon=True)
            self._preparing.start()

    def wait_prepared(self, timeout: float | None = None) -> None:
        if self._preparing is not None:
            self._preparing.join(timeout)

    def _sentence(self, sentence: str) -> SpeechChunk:
        key = sentence
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        with self._tts_lock:
            phonemes = [p for group in self.tts.sentences(sentence) for p in group]
            spoken = self.tts.synthesize_phonemes(phonemes, sentence)
        if self.cache_enabled:
            with self._lock:
                self._cache[key] = spoken
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
        return spoken

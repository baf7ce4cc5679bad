"""Speech out: a reply becomes chunks of sound with visemes, the first ready as soon as possible.

Each sentence's sound is handed on piece by piece as the vocoder makes it (device/models/tts.py),
while the rest is still being made. Replies that come back word for word (the knowledge base's
answers) are cached whole, so a kiosk answers its common questions without synthesizing at all;
`prepare` fills the cache in the background at start.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
from collections import OrderedDict
from typing import Iterable, Iterator

import numpy as np

from device.conversation.visemes import viseme_timeline
from device.messages import ReplyChunk
from device.models.tts import SpeechChunk, SpeechSynthesizer

log = logging.getLogger(__name__)

CACHE_SIZE = 64  # sentences
# One synthesis call's bounds: Piper's memory and time grow with the phonemes of a call (a 1,000-word
# sentence took 70 s and 9.7 GB), so longer sentences are cut at clause breaks, then at word breaks,
# and a "word" longer than any real one (a long number, CJK text without spaces) is said in parts.
MAX_WORDS_PER_CHUNK = 30
MAX_WORD_CHARS = 40
# ... and what a piece of text expands to: 30 "words" of 40 digits each were 144 s of audio, 2.2 GB, in one call.
# About 40 s of speech; a sentence that expands to more is said up to there, with a log line.
MAX_PHONEMES_PER_CALL = 500
# Said instead of a reply with no speakable word in it (only emoji or signs): silence would leave the visitor waiting.
NOTHING_TO_SAY = "Sorry, I have no words for that."
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CLAUSE_END = re.compile(r"(?<=[,;:])\s+")
_UNSPEAKABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # control characters (a NUL kills espeak)


def whole_sentences(text: str) -> list[str]:
    """The sentences of `text` that have a word in them."""
    return [s for s in (part.strip() for part in _SENTENCE_END.split(text)) if any(c.isalnum() for c in s)]


def split_sentences(text: str) -> list[str]:
    """Speakable pieces of `text`: sentences, long ones cut into clauses or runs of words of at most
    MAX_WORDS_PER_CHUNK, control characters removed, overlong "words" split into parts of MAX_WORD_CHARS."""
    text = _UNSPEAKABLE.sub(" ", text)
    pieces = []
    for sentence in whole_sentences(text):
        for clause in _CLAUSE_END.split(sentence) if len(sentence.split()) > MAX_WORDS_PER_CHUNK else [sentence]:
            words = [w[i : i + MAX_WORD_CHARS] for w in clause.split() for i in range(0, len(w), MAX_WORD_CHARS)]
            pieces += [" ".join(words[i : i + MAX_WORDS_PER_CHUNK]) for i in range(0, len(words), MAX_WORDS_PER_CHUNK)]
    return [p for p in pieces if any(c.isalnum() for c in p)]


def unsaid(chunks: list[ReplyChunk], played: int, text: str | None) -> str:
    """What a reply cut after `played` samples did not say: its sentences from the first not played
    whole. `text`: the whole answer's; None for an LLM's stream, whose sentences are those that came."""
    firsts = [c for c in chunks if c.text]  # each sentence's first chunk
    ends = [c.start for c in firsts[1:]] + [c.start for c in chunks[-1:] if c.last]  # where each sentence ends
    whole = sum(1 for end in ends if end <= played)
    sentences = split_sentences(text) if text is not None else [c.text for c in firsts]
    return " ".join(sentences[whole:])


class SpeechOut:
    def __init__(self, tts: SpeechSynthesizer, cache: bool = True) -> None:
        self.tts = tts
        self.cache_enabled = cache
        self._cache: OrderedDict[str, SpeechChunk] = OrderedDict()
        self._lock = threading.Lock()
        self._preparing: threading.Thread | None = None  # the speech-cache thread, once `prepare` is called
        self._to_prepare: queue.SimpleQueue[list[str] | None] = queue.SimpleQueue()  # its inbox: the newest list wins
        self._prepared = threading.Event()
        self._prepared.set()
        self._stop_preparing = threading.Event()
        self._keep: frozenset[str] = frozenset()  # the sentences worth caching: the knowledge base's answers

    def audio_of(self, text: str) -> np.ndarray:
        """All of an answer as the speaker would play it (the echo room's level reference)."""
        return np.concatenate([c.audio for c in self.chunks(0, [text], threading.Event())])

    def chunks(self, turn: int, texts: Iterable[str], cancelled: threading.Event) -> Iterator[ReplyChunk]:
        """Chunks of `texts` (a whole answer, or an LLM's sentences as they stream in), each sentence
        synthesized as soon as its text is there, its sound handed on as it is made; stops early
        when `cancelled` is set. A sentence's text and mouth shapes come with its first chunk. The
        reply's end is a chunk without audio (`last`), since a stream's last sentence is known only after it."""
        chunk = None
        unspeakable = ""  # a text with characters but no speakable word
        for text in texts:
            sentences = split_sentences(text)
            unspeakable = unspeakable or ("" if sentences else text.strip())
            for chunk in self._chunks_of(turn, sentences, chunk, cancelled):
                yield chunk
            if cancelled.is_set():
                return
        if chunk is None and unspeakable and not cancelled.is_set():
            log.warning("nothing in the reply %r can be spoken; saying %r instead", unspeakable[:80], NOTHING_TO_SAY)
            for chunk in self._chunks_of(turn, [NOTHING_TO_SAY], None, cancelled):
                yield chunk
        if chunk is not None and not cancelled.is_set():
            end = chunk.start + len(chunk.audio)
            yield ReplyChunk(turn, chunk.index + 1, "", np.zeros(0, np.float32), self.tts.sample_rate, end, (), True)

    def _chunks_of(
        self, turn: int, sentences: list[str], before: ReplyChunk | None, cancelled: threading.Event
    ) -> Iterator[ReplyChunk]:
        """The chunks of `sentences`, numbered and placed after the chunk `before` (None: the reply's first)."""
        index, start = (before.index + 1, before.start + len(before.audio)) if before is not None else (0, 0)
        for sentence in sentences:
            for number, spoken in enumerate(self._sound_of(sentence)):
                if cancelled.is_set():
                    return
                yield ReplyChunk(
                    turn,
                    index,
                    "" if number else sentence,
                    spoken.audio,
                    spoken.sample_rate,
                    start,
                    viseme_timeline(spoken.phonemes, start),
                    False,
                )
                index, start = index + 1, start + len(spoken.audio)

    def prepare(self, texts: list[str]) -> None:
        """Make `texts` (the knowledge base's answers) the cached ones and synthesize them on the speech-cache
        thread. Other replies (the time, an LLM's words) are not kept: they rarely come back word for
        word, and keeping them would grow memory for weeks. A later call (a reload) replaces the list the
        thread works through: one thread however often the knowledge base is reloaded."""
        keep = frozenset(s for text in texts for s in split_sentences(text))
        with self._lock:
            self._keep = keep
            for stale in [key for key in self._cache if key not in keep]:
                del self._cache[stale]
        if not self.cache_enabled or self._stop_preparing.is_set():
            return
        with self._lock:
            self._to_prepare.put([s for text in texts for s in split_sentences(text)])
            self._prepared.clear()
        if self._preparing is None:
            self._preparing = threading.Thread(target=self._fill_cache, name="speech-cache", daemon=True)
            self._preparing.start()

    def wait_prepared(self, timeout: float | None = None) -> bool:
        """Until the newest list given to `prepare` is synthesized (or the cache stopped filling)."""
        return self._prepared.wait(timeout)

    def stop_preparing(self) -> None:
        """Stop filling the cache after the sentence being synthesized (before the process exits: a
        synthesis still running then aborts the interpreter's shutdown)."""
        self._stop_preparing.set()
        self._to_prepare.put(None)
        if self._preparing is not None:
            self._preparing.join(30)

    def _fill_cache(self) -> None:
        """The speech-cache thread: synthesizes the newest list of sentences it was sent, one at a time."""
        sentences: list[str] = []
        try:
            while not self._stop_preparing.is_set():
                with self._lock:
                    if not sentences and self._to_prepare.empty():
                        self._prepared.set()
                newer = self._newest(wait=not sentences)
                if newer is None and self._stop_preparing.is_set():
                    return
                sentences = newer if newer is not None else sentences
                if sentences:
                    self._cache_one(sentences.pop(0))
        finally:
            self._prepared.set()

    def _newest(self, wait: bool) -> list[str] | None:
        """The newest list sent to the cache's inbox (older ones queued behind it are dropped), or None."""
        newest = None
        try:
            newest = self._to_prepare.get(block=wait)
            while newest is not None:
                newest = self._to_prepare.get_nowait()
        except queue.Empty:
            pass
        return newest

    def _cache_one(self, sentence: str) -> None:
        """Synthesize one answer's sentence into the cache; one that fails is left out, said in the log."""
        try:
            for _ in self._sound_of(sentence):
                pass
        except Exception:  # the cache's thread serves every reload to come: it must not end on one sentence
            log.exception(
                "the sentence %r could not be synthesized for the cache; it is made when asked", sentence[:80]
            )

    def _sound_of(self, sentence: str) -> Iterator[SpeechChunk]:
        """The sentence from the cache, whole; else piece by piece as it is made (and then cached
        whole, if it is one of the knowledge base's and was made to its end)."""
        with self._lock:
            cached = self._cache.get(sentence)
            if cached is not None:
                self._cache.move_to_end(sentence)
        if cached is not None:
            yield cached
            return
        phonemes = [p for group in self.tts.sentences(sentence) for p in group]
        if len(phonemes) > MAX_PHONEMES_PER_CALL:
            log.warning(
                "%r expands to %d sounds, more than one synthesis takes (%d): it is said up to there",
                sentence[:80],
                len(phonemes),
                MAX_PHONEMES_PER_CALL,
            )
            phonemes = phonemes[:MAX_PHONEMES_PER_CALL]
        pieces = []
        for piece in self.tts.pieces(phonemes, sentence):
            pieces.append(piece)
            yield piece
        if self.cache_enabled and sentence in self._keep:
            whole = SpeechChunk(
                sentence, np.concatenate([p.audio for p in pieces]), self.tts.sample_rate, pieces[0].phonemes
            )
            with self._lock:
                self._cache[sentence] = whole
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)

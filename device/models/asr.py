"""Moonshine base-en speech recognition: encoder once, then greedy decoding with a KV cache."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engines.model_specs import SPEECH_RATE
from engines.runner import Runner

BOS, EOS = 1, 2
TOKENS_PER_SECOND = 6.5  # Moonshine's own bound on output length; stops runaway repetition
# Moonshine invents words ("2020, lost items...") for audio that starts on the first syllable;
# the endpointer's pre-roll gives it silence in front, and this pad does for clips without one.
# It also covers the encoder's minimum input of about 0.1 s.
PAD = SPEECH_RATE // 4
MAX_SECONDS = 30  # longer audio is transcribed in windows of this length
SPACE = "\u2581"  # SentencePiece's word-boundary mark
# Moonshine sometimes prefers ending before the first word of a long utterance (seen on a
# resampled 10 s recording: EOS ahead by 0.5 logits); silence and noise put EOS ahead by 3 to 12.
# A transcript is left empty only when EOS wins the first step by this clear margin.
EMPTY_MARGIN = 2.0
HEADS, HEAD_DIM = 8, 52  # Moonshine base attention layout (the KV cache shape)


class RecognitionStopped(Exception):
    """A recognition stopped before its end: its words were no longer wanted."""


@dataclass(frozen=True)
class Transcript:
    text: str
    tokens: tuple[int, ...]
    audio_seconds: float


def read_vocabulary(path: Path) -> list[bytes]:
    """Moonshine's tokenizer.bin: token byte strings in id order, each prefixed by its length
    (one byte, or two in little-endian base-128 when 128 or longer)."""
    data = path.read_bytes()
    tokens, i = [], 0
    while i < len(data):
        length = data[i]
        i += 1
        if length >= 128:
            length = (length & 0x7F) | (data[i] << 7)
            i += 1
        tokens.append(data[i : i + length])
        i += length
    return tokens


class SpeechRecognizer:
    def __init__(self, encoder: Runner, decoder: Runner, vocabulary_path: Path) -> None:
        self.encoder = encoder
        self.decoder = decoder
        self.vocabulary = read_vocabulary(vocabulary_path)
        self._past_names = [n for n in decoder.input_names if n.startswith("past_key_values.")]

    def transcribe(self, audio: np.ndarray, stop: threading.Event | None = None) -> Transcript:
        """Text of 16 kHz mono float32 audio. Setting `stop` ends it between decoding steps with
        RecognitionStopped: a pause's recognition the visitor talked over would hold the one thread
        recognition has for as long again (about 60% of it is decoding)."""
        audio = np.asarray(audio, np.float32)
        window = MAX_SECONDS * SPEECH_RATE
        tokens: list[int] = []
        for start in range(0, max(len(audio), 1), window):
            tokens += self._decode(audio[start : start + window], stop)
        return Transcript(self.detokenize(tokens), tuple(tokens), len(audio) / SPEECH_RATE)

    def detokenize(self, tokens: list[int]) -> str:
        pieces = b"".join(self.vocabulary[t] for t in tokens if t < len(self.vocabulary) and t > EOS)
        return pieces.decode("utf-8", errors="replace").replace(SPACE, " ").strip()

    def _decode(self, audio: np.ndarray, stop: threading.Event | None) -> list[int]:
        audio = np.pad(audio, PAD)
        return self.decode(self.encode(audio), len(audio), stop)

    def encode(self, audio: np.ndarray) -> np.ndarray:
        """The encoder's hidden states of (padded) 16 kHz audio."""
        return self.encoder.infer({"input_values": audio[None, :]})["last_hidden_state"]

    def decode(self, hidden: np.ndarray, samples: int, stop: threading.Event | None = None) -> list[int]:
        """Greedy decoding of `hidden` (of `samples` samples of audio) with the KV cache."""
        past = {name: np.zeros((1, HEADS, 0, HEAD_DIM), np.float32) for name in self._past_names}
        tokens, last = [], BOS
        for step in range(max(int(samples / SPEECH_RATE * TOKENS_PER_SECOND), 8)):
            if stop is not None and stop.is_set():
                raise RecognitionStopped(f"stopped after {len(tokens)} token(s)")
            out = self.decoder.infer(
                {
                    "input_ids": np.array([[last]], np.int64),
                    "encoder_hidden_states": hidden,
                    "use_cache_branch": np.array([step > 0]),
                    **past,
                }
            )
            logits = out["logits"][0, -1]
            last = int(logits.argmax())
            if last == EOS and step == 0 and logits[EOS] - np.delete(logits, EOS).max() < EMPTY_MARGIN:
                last = int(np.delete(logits, EOS).argmax())
                last += last >= EOS  # index in the full vocabulary
            if last == EOS:
                break
            tokens.append(last)
            for name in self._past_names:
                # The cross-attention (encoder) cache is computed on the first step only.
                if step == 0 or ".decoder." in name:
                    past[name] = out[name.replace("past_key_values.", "present.")]
        return tokens


NUMBERS = {
    w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())
}


def words(text: str) -> list[str]:
    """A transcript as comparable words: lower case, no punctuation or hyphens ("to-morrow"), numbers
    as digits ("ten" and "10" are the same answer)."""
    return [NUMBERS.get(w, w) for w in re.findall(r"[a-z0-9']+", text.lower().replace("-", ""))]


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level edit distance over the reference's length."""
    ref, hyp = words(reference), words(hypothesis)
    distance = np.arange(len(hyp) + 1)
    for i, r in enumerate(ref, 1):
        previous, distance = distance, np.empty_like(distance)
        distance[0] = i
        for j, h in enumerate(hyp, 1):
            distance[j] = min(previous[j] + 1, distance[j - 1] + 1, previous[j - 1] + (r != h))
    return float(distance[-1]) / max(len(ref), 1)

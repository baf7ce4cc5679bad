"""Piper speech synthesis (en_US-joe-medium) with per-phoneme timings for lip-sync.

piper-tts supplies the espeak-ng phonemizer and the phoneme-id mapping; the voice model itself
runs through our Runner. The store's voice has its alignment tensor exposed as an output
(`models sync` patches it), which gives the number of audio samples each phoneme id produced.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from engines.errors import InputError
from engines.runner import Runner

_PHONEMIZER_LOCK = threading.Lock()  # espeak-ng keeps global state


@dataclass(frozen=True)
class PhonemeTiming:
    """A phoneme and where its sound lies in the chunk, in samples."""

    phoneme: str
    start: int
    length: int


@dataclass(frozen=True)
class SpeechChunk:
    """One synthesized sentence."""

    text: str
    audio: np.ndarray  # float32 mono in [-1, 1]
    sample_rate: int
    phonemes: tuple[PhonemeTiming, ...]

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.sample_rate


class SpeechSynthesizer:
    def __init__(self, runner: Runner, config_path: Path, length_scale: float = 1.0, variability: float = 1.0) -> None:
        """`variability` scales the voice's random variation (0 gives the same audio for the same
        text every time; 1 is the voice's trained setting); `length_scale` above 1 speaks slower."""
        from piper.phonemize_espeak import EspeakPhonemizer

        self.runner = runner
        config = json.loads(Path(config_path).read_text())
        self.sample_rate = int(config["audio"]["sample_rate"])
        self.voice = config["espeak"]["voice"]
        self.id_map: dict[str, list[int]] = config["phoneme_id_map"]
        self.hop = int(config.get("hop_length", 256))
        inference = config.get("inference", {})
        self.scales = np.array(
            [variability * inference.get("noise_scale", 0.667), length_scale * inference.get("length_scale", 1.0),
             variability * inference.get("noise_w", 0.8)], np.float32)
        with _PHONEMIZER_LOCK:
            self._phonemizer = EspeakPhonemizer()

    def sentences(self, text: str) -> list[list[str]]:
        """Phonemes of each sentence of `text`."""
        with _PHONEMIZER_LOCK:
            return [p for p in self._phonemizer.phonemize(self.voice, text) if p]

    def synthesize(self, text: str) -> Iterator[SpeechChunk]:
        """One chunk per sentence, yielded as soon as it is ready."""
        if not text.strip():
            raise InputError("nothing to say: the text is empty")
        sentences = [p for p in self.sentences(text) if any(x in self.id_map for x in p)]
        if not sentences:
            raise InputError(f"nothing to say: {text[:40]!r} has no speakable words")
        for phonemes in sentences:
            yield self.synthesize_phonemes(phonemes, text)

    def say(self, text: str) -> np.ndarray:
        """All of `text`, sentence after sentence, as one clip at the voice's rate."""
        return np.concatenate([chunk.audio for chunk in self.synthesize(text)])

    def synthesize_phonemes(self, phonemes: list[str], text: str = "") -> SpeechChunk:
        known = [p for p in phonemes if p in self.id_map]
        ids = self._ids(known)
        out = self.runner.infer({
            "input": np.array([ids], np.int64),
            "input_lengths": np.array([len(ids)], np.int64),
            "scales": self.scales,
        })
        names = list(out)
        audio = np.asarray(out[names[0]], np.float32).reshape(-1)
        peak = float(np.abs(audio).max()) if audio.size else 0.0
        audio = audio / peak if peak > 1e-8 else np.zeros_like(audio)
        samples_per_id = np.asarray(out[names[1]]).reshape(-1).astype(np.int64) * self.hop
        return SpeechChunk(text, audio, self.sample_rate, self._timings(known, samples_per_id))

    def _ids(self, phonemes: list[str]) -> list[int]:
        """BOS, PAD, then each phoneme's ids followed by PAD, then EOS (piper's layout)."""
        ids = self.id_map["^"] + self.id_map["_"]
        for p in phonemes:
            ids += self.id_map[p] + self.id_map["_"]
        return ids + self.id_map["$"]

    def _timings(self, phonemes: list[str], samples_per_id: np.ndarray) -> tuple[PhonemeTiming, ...]:
        """Group the per-id sample counts back into phonemes (each owning its trailing PAD)."""
        timings, index, start = [], 0, 0
        pad = len(self.id_map["_"])
        for phoneme in ["^", *phonemes, "$"]:
            width = len(self.id_map[phoneme]) + (pad if phoneme != "$" else 0)
            length = int(samples_per_id[index:index + width].sum())
            timings.append(PhonemeTiming(phoneme, start, length))
            index, start = index + width, start + length
        return tuple(timings)

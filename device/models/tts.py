"""Piper speech synthesis (en_US-joe-medium) with per-phoneme timings for lip-sync, sound in pieces.

piper-tts supplies the espeak-ng phonemizer and the phoneme-id mapping; the voice itself runs
through our Runners, cut in two by `models sync` (engines/store/recipes.py): its text side gives
the phonemes' durations (the lip-sync timings, known before any sound) and the sentence's latent
frames; its vocoder makes the sound of those frames piece by piece (engines.model_specs.VOCODER_PIECES),
so the first sound of a sentence comes after the text side and one small vocoder call instead of
after the whole sentence (a 3.7 s sentence: 419 ms whole, first piece after about 130 ms).
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from engines.errors import InputError
from engines.model_specs import VOCODER_CONTEXT, VOCODER_PIECES
from engines.runner import Runner

_PHONEMIZER_LOCK = threading.Lock()  # espeak-ng keeps global state
# The voice's samples times this: one gain for every sentence (a sentence's loudness cannot be
# known before its last piece is made, so no per-sentence normalisation), which puts the loudest
# of the bundled answers (peak 0.85) just under full scale; clipped to [-1, 1] all the same.
VOICE_GAIN = 1.15


@dataclass(frozen=True)
class PhonemeTiming:
    """A phoneme and where its sound lies in the chunk, in samples."""

    phoneme: str
    start: int
    length: int


@dataclass(frozen=True)
class SpeechChunk:
    """One synthesized sentence, or a piece of one (`SpeechSynthesizer.pieces`)."""

    text: str
    audio: np.ndarray  # float32 mono in [-1, 1]
    sample_rate: int
    phonemes: tuple[PhonemeTiming, ...]  # a piece's: the whole sentence's on its first piece, none on the others

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.sample_rate


class SpeechSynthesizer:
    def __init__(
        self,
        front: Runner,
        vocoder: Runner,
        config_path: Path,
        length_scale: float = 1.0,
        variability: float = 1.0,
        gain: float = VOICE_GAIN,
        in_pieces: bool = True,
    ) -> None:
        """`front`: the voice's text side, `vocoder` its sound side; `variability` scales the voice's
        random variation (0 gives the same audio for the same text every time; 1 is the voice's
        trained setting); `length_scale` above 1 speaks slower; `gain` scales its samples (1: as the
        voice makes them, within [-1, 1] already: its decoder ends in a tanh); `in_pieces` False: a
        sentence's sound in one vocoder call, the samples of the voice whole (the CPU only: a
        TensorRT engine takes at most VOCODER_FRAMES frames)."""
        from piper.phonemize_espeak import EspeakPhonemizer

        self.front = front
        self.vocoder = vocoder
        self.gain = gain
        self.in_pieces = in_pieces
        self._lock = threading.Lock()  # one model call at a time (a TensorRT runner is not re-entrant)
        config = json.loads(Path(config_path).read_text())
        self.sample_rate = int(config["audio"]["sample_rate"])
        self.voice = config["espeak"]["voice"]
        self.id_map: dict[str, list[int]] = config["phoneme_id_map"]
        self.hop = int(config.get("hop_length", 256))
        inference = config.get("inference", {})
        self.scales = np.array(
            [
                variability * inference.get("noise_scale", 0.667),
                length_scale * inference.get("length_scale", 1.0),
                variability * inference.get("noise_w", 0.8),
            ],
            np.float32,
        )
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
        """One sentence, whole."""
        pieces = list(self.pieces(phonemes, text))
        return SpeechChunk(text, np.concatenate([p.audio for p in pieces]), self.sample_rate, pieces[0].phonemes)

    def pieces(self, phonemes: list[str], text: str = "") -> Iterator[SpeechChunk]:
        """One sentence's sound, piece by piece as the vocoder makes it; the first piece carries the
        whole sentence's phoneme timings."""
        known = [p for p in phonemes if p in self.id_map]
        ids = self._ids(known)
        with self._lock:
            out = self.front.infer(
                {
                    "input": np.array([ids], np.int64),
                    "input_lengths": np.array([len(ids)], np.int64),
                    "scales": self.scales,
                }
            )
        latent, frames_per_id = (np.asarray(value) for value in out.values())
        timings = self._timings(known, frames_per_id.reshape(-1).astype(np.int64) * self.hop)
        for index, audio in enumerate(self._sound(latent)):
            yield SpeechChunk(text, audio, self.sample_rate, () if index else timings)

    def _sound(self, latent: np.ndarray) -> Iterator[np.ndarray]:
        """The samples of `latent`'s frames (1 x channels x frames), VOCODER_PIECES at a time, each
        made with VOCODER_CONTEXT frames on either side whose samples are dropped."""
        frames, start = latent.shape[2], 0
        sizes = itertools.chain(VOCODER_PIECES, itertools.repeat(VOCODER_PIECES[-1])) if self.in_pieces else (frames,)
        for size in sizes:
            if start >= frames:
                return
            end = min(frames, start + size)
            low, high = max(0, start - VOCODER_CONTEXT), min(frames, end + VOCODER_CONTEXT)
            with self._lock:
                out = self.vocoder.infer(
                    {
                        "latent": np.ascontiguousarray(latent[:, :, low:high], np.float32),
                        "mask": np.ones((1, 1, high - low), np.float32),
                    }
                )
            samples = np.asarray(next(iter(out.values())), np.float32).reshape(-1)
            yield np.clip(samples[(start - low) * self.hop : (end - low) * self.hop] * self.gain, -1.0, 1.0)
            start = end

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
            length = int(samples_per_id[index : index + width].sum())
            timings.append(PhonemeTiming(phoneme, start, length))
            index, start = index + width, start + length
        return tuple(timings)

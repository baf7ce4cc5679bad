"""Several speakers from the one pinned voice: speaking rate and a pitch shift.

The shift resamples the voice's audio, so it moves the formants too, as a different vocal tract
would. The end-of-turn evaluation and the speech calibration data both speak with these voices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.model_specs import SPEECH_RATE
from engines.store.model_store import ModelStore

from device.audio_file import resample
from device.models import catalog
from device.models.tts import SpeechChunk, SpeechSynthesizer


@dataclass(frozen=True)
class Voice:
    name: str
    length_scale: float  # above 1 speaks slower
    pitch: float  # above 1 higher (and a shorter vocal tract)


VOICES = (
    Voice("joe", 1.0, 1.0),
    Voice("joe-high-fast", 0.92, 1.14),
    Voice("joe-low-slow", 1.15, 0.88),
    Voice("joe-higher", 1.05, 1.26),
)


def load_voices(store: ModelStore, threads: int = 1) -> dict[str, SpeechSynthesizer]:
    """A synthesizer per voice (each with its speaking rate), noise off: the same text, the same audio.
    The voice's samples as it makes them, whole (`speak` sets their level): the evaluation and
    calibration sets stay the samples the shipped calibration tables were made and gated on (the
    vocoder in pieces differs by up to 6e-4 of full scale, and that moved the asr-encoder table's
    INT8 WER by one or two words, past its gate)."""
    return {
        v.name: catalog.load_tts(
            store, threads, variability=0.0, length_scale=v.length_scale, gain=1.0, in_pieces=False
        )
        for v in VOICES
    }


def speak(synthesizers: dict[str, SpeechSynthesizer], voice: Voice, text: str) -> tuple[np.ndarray, SpeechChunk, int]:
    """`text` as one chunk said by `voice`: (16 kHz audio, the chunk, the rate the chunk was played at).
    Its peak at full scale: the level the evaluation and calibration sets are made at (their noise
    and echo are mixed relative to it)."""
    (chunk,) = list(synthesizers[voice.name].synthesize(text))
    rate = round(chunk.sample_rate * voice.pitch)  # played faster (higher) or slower (lower)
    audio = chunk.audio / max(float(np.abs(chunk.audio).max()), 1e-8)
    return resample(audio, rate, SPEECH_RATE), chunk, rate

"""Phonemes to mouth shapes (visemes), timed in speaker samples for the avatar.

Piper's phonemes are espeak-ng IPA split into code points; marks carry no shape of their own. Piper
gives a stress mark (written before its vowel) a duration of its own, and that is where the vowel
sounds (measured on the synthesized audio: the loud part of "welcome"'s first vowel lies in its
stress mark's slot), so a stress mark takes the shape of the phoneme after it; a length mark
extends the one before.
"""

from __future__ import annotations

import numpy as np

from device.messages import Viseme
from device.models.tts import PhonemeTiming, SpeechSynthesizer

REST = "rest"
SHAPES = ("rest", "AI", "E", "I", "O", "U", "WQ", "MBP", "FV", "TH", "L", "S", "CONS")

_GROUPS = {
    "AI": "aɑæʌɐaɒ",
    "E": "eɛəɜɚɝ",
    "I": "iɪjy",
    "O": "oɔ",
    "U": "uʊ",
    "WQ": "wʍ",
    "MBP": "mbp",
    "FV": "fv",
    "TH": "θð",
    "L": "lɫ",
    "S": "szʃʒç",
    "CONS": "tdkgnŋhɹrɾxʔcɡʤʧ",
}
_SHAPE_OF = {ch: shape for shape, chars in _GROUPS.items() for ch in chars}
_SILENT = set("^$_ .,;:!?—-")
_STRESS = set("ˈˌ")


def shape_of(phoneme: str) -> str | None:
    """The viseme of one phoneme, REST for silence and punctuation, None for a modifier."""
    if phoneme in _SILENT:
        return REST
    return _SHAPE_OF.get(phoneme)


def viseme_timeline(phonemes: tuple[PhonemeTiming, ...], offset: int = 0) -> tuple[Viseme, ...]:
    """Shape changes of a chunk, at `offset` + the phoneme's first sample; ends at rest."""
    timeline: list[Viseme] = []
    stress_start: int | None = None
    for p in phonemes:
        shape = shape_of(p.phoneme)
        if p.phoneme in _STRESS and p.length:
            stress_start = p.start if stress_start is None else stress_start
        if shape is None or p.length == 0:
            continue
        start, stress_start = (p.start if stress_start is None else stress_start), None
        if not timeline or timeline[-1].shape != shape:
            timeline.append(Viseme(offset + start, shape))
    if phonemes:
        end = offset + phonemes[-1].start + phonemes[-1].length
        if not timeline or timeline[-1].shape != REST:
            timeline.append(Viseme(end, REST))
    return tuple(timeline)


def spoken_with_visemes(tts: SpeechSynthesizer, text: str) -> tuple[np.ndarray, tuple[Viseme, ...]]:
    """All of `text` synthesized, sentence after sentence, and its mouth shapes on the one timeline."""
    audio: list[np.ndarray] = []
    visemes: list[Viseme] = []
    for chunk in tts.synthesize(text):
        visemes += viseme_timeline(chunk.phonemes, sum(len(a) for a in audio))
        audio.append(chunk.audio)
    return (np.concatenate(audio) if audio else np.zeros(0, np.float32)), tuple(visemes)

"""Words the dialogue is unsure of, heard again from the visitor's speech alone.

An utterance's audio is cut for the endpointer's needs: the pre-roll before its first speech frame,
and after its last one the frames the VAD still called speech while the hangover ran (in a hall the
noise floor's margin hides a visitor's quiet last syllables, and those frames hold them:
docs/lab/hearing.md). In a hall that is also the talk around the question, and it costs recognition
some questions it would get from the speech alone; in others the speech alone loses a syllable the
longer cut had. Neither cut wins: what does is keeping whichever words the dialogue is surer of.
Only when the utterance as cut gives words the robot is not sure of (an ask-back, a request to
rephrase, nothing) is the speech alone recognised too, so a question answered with confidence, as
every question of a quiet room mostly is, costs no second recognition. Chosen on the tuning split
in five halls (docs/lab/hearing.md, "The speech alone, when unsure").
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from engines.model_specs import SPEECH_RATE

from device.conversation.dialogue import Dialogue
from device.messages import Utterance
from device.models.asr import words

SPEECH_PAD_MS = 128  # of the audio either side of the first and last speech frames (32, 64, 192 did less well)


def speech_alone(utterance: Utterance) -> np.ndarray:
    """`utterance`'s audio from its first to its last speech frame, SPEECH_PAD_MS either side (as far as
    its audio goes)."""
    pad = SPEECH_PAD_MS * SPEECH_RATE // 1000
    start = max(0, utterance.speech_start - pad - utterance.audio_start)
    return utterance.audio[start : max(start, utterance.speech_end + pad - utterance.audio_start)]


def surer_words(heard: str, utterance: Utterance, transcribe: Callable[[np.ndarray], str], dialogue: Dialogue) -> str:
    """`heard` (the words of `utterance` as cut) unless the dialogue is unsure of them: then the words of
    its speech alone if the dialogue places those better."""
    first = dialogue.decide(heard) if words(heard) else None
    if first is not None and dialogue.sure(first):
        return heard
    again = transcribe(speech_alone(utterance))
    if not words(again):
        return heard
    return again if first is None or dialogue.decide(again).score > first.score else heard

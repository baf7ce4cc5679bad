"""A visitor who goes on with a sentence the robot took for finished: the two utterances are one question.

The endpointer ends an utterance after its hangover; a visitor who hesitates longer mid-sentence ("Do
you have a map ... of the building?") is answered before they finish, and what they say next, alone,
is half a question. No rule on the pause itself tells all such pauses from a finished question (the
words before many make a sentence: docs/lab/end-of-turn.md). What comes after does: speech that starts
within `[endpoint] rejoin_within_ms` of the last utterance's end is heard with it when the words
together are the same question to the knowledge base as the new words alone, or one it places at
least as well ("of the building" alone is half a question; "Where are the restrooms?" after "What
are your opening hours?" is a question of its own). The turns stage then recognises the two
utterances' audio again as one (a recognition cut mid-phrase loses words), unless the robot would do
the same with the new words alone ("Hello," + "What time do you open?"): then that changes no answer
and only delays it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from engines.model_specs import SPEECH_RATE

from device.conversation.dialogue import Decision, Dialogue
from device.conversation.speech_alone import surer_words
from device.messages import Utterance
from device.models.asr import words


def resumes(previous_end: int, start: int, within_ms: int) -> bool:
    """Speech starting at sample `start` goes on with the utterance whose speech ended at `previous_end`."""
    return within_ms > 0 and 0 <= start - previous_end <= within_ms * SPEECH_RATE // 1000


@dataclass(frozen=True)
class Rejoined:
    """Two utterances' words as one question."""

    text: str
    same_answer: bool  # the robot does with it what it does with the new words alone (the same decision)


def rejoin(first: str, then: str, decide: Callable[[str], Decision]) -> Rejoined | None:
    """The question `first` and `then` make together, if it is the same question as `then` alone or
    one placed at least as well (None: `then` is a question of its own, or either has no words)."""
    if not words(first) or not words(then):
        return None
    whole = f"{first.rstrip(' .,?!')} {then}"
    together, alone = decide(whole), decide(then)
    if together.intent == alone.intent or together.score >= alone.score:
        return Rejoined(whole, same_answer=(together.kind, together.intent) == (alone.kind, alone.intent))
    return None


def joined(first: Utterance, then: Utterance, max_utterance_s: float) -> Utterance | None:
    """`then` heard with `first` as one utterance, from `first`'s start (its audio both's: a recognition
    cut mid-phrase loses words, "What time do you owe?" + "Barrier."); None if that is longer than an
    utterance may be, so a hall's talk heard as utterance after utterance never grows one recognition
    without end. Its audio is the two pieces end to end, without the silence between them, so it is
    not the stream from `audio_start` on: take a piece's speech alone (speech_alone.py) before joining."""
    whole = replace(
        then,
        speech_start=first.speech_start,
        audio=np.concatenate([first.audio, then.audio]),
        audio_start=first.audio_start,
    )
    return whole if whole.seconds <= max_utterance_s else None


Heard = tuple[Utterance, str]  # an utterance and its words


def heard_together(
    first: Heard,
    then: Heard,
    max_utterance_s: float,
    decide: Callable[[str], Decision],
    transcribe: Callable[[np.ndarray], str],
) -> Heard | None:
    """`then` heard with `first` as one question (None: they are not one, or together too long). Its
    words are recognised again from both's audio unless the robot would do the same with `then`'s alone."""
    whole = joined(first[0], then[0], max_utterance_s)
    question = None if whole is None else rejoin(first[1], then[1], decide)
    if question is None:
        return None
    return whole, question.text if question.same_answer else transcribe(whole.audio)


def heard_in_turns(
    utterances: list[Utterance],
    within_ms: int,
    max_utterance_s: float,
    dialogue: Dialogue,
    transcribe: Callable[[np.ndarray], str],
) -> list[Heard]:
    """The questions the conversation makes of `utterances` in order: each recognised (and its speech
    alone too when the dialogue is unsure of its words, device/conversation/speech_alone.py), and one
    that goes on within `within_ms` of the question before it heard with that question (as the turn
    loop rejoins a turn with the last). For the benches, which replay what the daemon hears offline."""
    questions: list[Heard] = []
    for utterance in utterances:
        heard = (utterance, surer_words(transcribe(utterance.audio), utterance, transcribe, dialogue))
        if questions and resumes(questions[-1][0].speech_end, utterance.speech_start, within_ms):
            together = heard_together(questions[-1], heard, max_utterance_s, dialogue.decide, transcribe)
            if together is not None:
                questions[-1] = together
                continue
        questions.append(heard)
    return questions

"""What the words before a pause say about it: the sentence goes on, or it is a question the robot
knows, or neither (the fixed hangover, or the end-of-turn model, decides).

Open words: a visitor who stops after "Where is the" or "Is it possible to" is looking for the next
word, whatever their voice did. The end-of-turn model judges a pause by its sound
(docs/lab/end-of-turn.md); the speculative recognition of the same pause gives its words, and when the
last one is an article, a possessive determiner, a conjunction or an infinitive's "to", the pause
waits `max_hangover_ms` (`[endpoint] wait_after_open_words`). Prepositions, pronouns and quantifiers
are not in the list: questions end on them ("What is this for?", "Can you repeat that?", "Do you
have any?"). Nor is a greeting ("Hello," is often a turn of its own), but "Excuse me" is: said
alone, it is a visitor getting the robot's attention before their question, and a slow speaker's
comma after it is longer than the fixed hangover.

A known question: words the knowledge base answers with confidence, their similarity at least
`known_question_threshold` (`[endpoint] end_on_known_question`), end the pause after
`min_hangover_ms`: what the robot would answer is already clear, and waiting the rest of the fixed
hangover only delays it. Built-in actions (the time, the date, stop, repeat) never count: their
examples are the starts of other questions ("What time ... do you open?").
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Callable

from device.models.asr import words
from device.settings import EndpointSettings

OPEN_WORDS = frozenset("a an the my your our their its every to and or but if because than whether".split())
OPENERS = frozenset({("excuse", "me")})  # words that, said alone, open a question
# Said over a reply, these keep it going: listeners' acknowledgements, not questions.
BACKCHANNELS = frozenset(
    "mm hm hmm mhm mmhmm mmhm uh huh uhhuh aha ah oh okay ok yeah yes yep right sure alright "
    "i see wow cool nice great".split()
)


class Words(enum.Enum):
    """What the speculative words before a pause are."""

    OPEN = "open"  # the sentence goes on ("Where is the")
    KNOWN_QUESTION = "known question"  # a question the knowledge base answers with confidence
    OTHER = "other"


@dataclass(frozen=True)
class WordsJudged:
    """The words before the pause after `speech_end` were judged (the endpointer's to act on)."""

    speech_end: int
    words: Words


def leaves_open(transcript: str) -> bool:
    """The transcript's last word leaves its sentence open, or it is only an opener (False with no words)."""
    said = words(transcript)
    return bool(said) and (said[-1] in OPEN_WORDS or tuple(said) in OPENERS)


def judges_words(settings: EndpointSettings) -> bool:
    """The settings ask the words before each pause to be judged (recognised, then `judge_words`)."""
    return settings.wait_after_open_words or settings.end_on_known_question


def judge_words(transcript: str, settings: EndpointSettings, knows: Callable[[str, float], bool]) -> Words:
    """The words before a pause, as the settings ask them judged; `knows(words, at_least)`: the
    dialogue is sure of its answer to them, with a similarity of at least `at_least`."""
    if settings.wait_after_open_words and leaves_open(transcript):
        return Words.OPEN
    if settings.end_on_known_question and words(transcript) and knows(transcript, settings.known_question_threshold):
        return Words.KNOWN_QUESTION
    return Words.OTHER


def backchannel(transcript: str) -> bool:
    """Nothing but acknowledgements ("mm-hm", "okay", "yeah") or no words at all (a cough)."""
    return all(word in BACKCHANNELS for word in spoken_words(transcript))


def spoken_words(transcript: str) -> list[str]:
    """The words of a transcript, lower case, a hyphen's halves apart ("mm-hm": "mm", "hm")."""
    return re.findall(r"[a-z]+", transcript.lower())

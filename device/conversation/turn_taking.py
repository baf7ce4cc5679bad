"""Turn-taking policies: how much silence ends the visitor's turn at a pause.

Each rule has a name and the setting that turns it on (`[endpoint] wait_after_open_words`,
`end_on_known_question`, `end_of_turn`; the fixed hangover is always last); the endpointer asks
them in order, and the first with an opinion on the pause sets its length (as pipecat's user-stop
strategies and LiveKit's endpointing are swappable). What each knows of the pause comes in as
messages to the endpointer's one owner, the feeding thread: the end-of-turn model's verdict, the
judgement of the words before it (device/conversation/pause_words.py).

- open words: the sentence goes on ("Where is the ..."): `max_hangover_ms`, whatever the model says;
- known question: words the robot answers with confidence: `min_hangover_ms`, unless the model
  judged the visitor unfinished;
- end-of-turn model: `min_hangover_ms` if finished, `max_hangover_ms` if not (with
  `wait_after_open_words`, a "finished" waits for the words);
- fixed hangover: `hangover_ms`, or `quiet_hangover_ms` in a quiet room.
A reply held by the visitor's speech asks at least `hold_hangover_ms` (device/conversation/listening.py),
so a question with a pause is heard whole. Going on with the question before after a longer pause
(rejoin) is the turns stage's rule: device/conversation/rejoin.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from device.conversation.pause_words import Words
from device.settings import EndpointSettings


@dataclass(frozen=True)
class Pause:
    """What is known of the current pause when its length is asked."""

    quiet: bool  # the room is quiet around the visitor's words
    complete: bool | None  # the end-of-turn model's verdict, once in
    words: Words | None  # what the words before it are, once judged


class Policy(Protocol):
    name: str

    def frames(self, pause: Pause) -> int | None:
        """Frames of silence that end `pause`; None: no opinion, the next policy decides."""


@dataclass(frozen=True)
class OpenWords:
    longest: int
    name: str = "open words"

    def frames(self, pause: Pause) -> int | None:
        return self.longest if pause.words is Words.OPEN else None


@dataclass(frozen=True)
class KnownQuestion:
    shortest: int
    name: str = "known question"

    def frames(self, pause: Pause) -> int | None:
        return self.shortest if pause.words is Words.KNOWN_QUESTION and pause.complete is not False else None


@dataclass(frozen=True)
class EndOfTurnModel:
    shortest: int
    longest: int
    waits_for_words: bool  # a "finished" verdict waits for the words (`wait_after_open_words`)
    name: str = "end-of-turn model"

    def frames(self, pause: Pause) -> int | None:
        if pause.complete is None or pause.complete and self.waits_for_words and pause.words is None:
            return None
        return self.shortest if pause.complete else self.longest


@dataclass(frozen=True)
class FixedHangover:
    hangover: int
    quiet_hangover: int
    name: str = "fixed hangover"

    def frames(self, pause: Pause) -> int | None:
        return self.quiet_hangover if pause.quiet else self.hangover


def pause_policies(settings: EndpointSettings, judged: bool) -> tuple[Policy, ...]:
    """The policies in the order they are asked; `judged`: an end-of-turn model gives verdicts."""
    hangover = settings.frames(settings.hangover_ms)
    quiet = settings.frames(settings.quiet_hangover_ms) if settings.quiet_hangover_ms else hangover
    shortest, longest = settings.frames(settings.min_hangover_ms), settings.frames(settings.max_hangover_ms)
    chosen: list[Policy] = []
    if settings.wait_after_open_words:
        chosen.append(OpenWords(longest))
    if settings.end_on_known_question:
        chosen.append(KnownQuestion(shortest))
    if judged:
        chosen.append(EndOfTurnModel(shortest, longest, settings.wait_after_open_words))
    return (*chosen, FixedHangover(hangover, quiet))


def pause_frames(policies: tuple[Policy, ...], pause: Pause) -> int:
    """The first opinion of `policies` on `pause` (the last policy always has one)."""
    return next(frames for policy in policies if (frames := policy.frames(pause)) is not None)

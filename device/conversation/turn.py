"""A turn (one visitor utterance and the robot's reply) and the book of turns the stages share.

The listening stage opens a turn when an utterance ends (a greeting opens one too), the turns stage
fills in its words and answer, the replying stage its sound; each stage writes only its own fields,
and `done` tells the others a turn is over. The book numbers turns in order whichever thread opens
them, keeps the last few for `status`, and counts how each ended.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field

import numpy as np

from device.conversation.dialogue import Answer
from device.conversation.pause_words import Words
from device.messages import EndOfTurnVerdict, ReplyChunk, TurnTimings, Utterance

KEEP_TURNS = 10  # turns kept (with their reply audio) for status, which shows them; None: every turn (demo, bench)


@dataclass
class Turn:
    """Everything about one visitor utterance and the robot's reply."""

    id: int
    utterance: Utterance
    timings: TurnTimings
    transcript: str = ""
    answer: Answer | None = None
    chunks: list[ReplyChunk] = field(default_factory=list)
    end_of_turn: EndOfTurnVerdict | None = None  # the verdict that ended it, if one did
    pause_words: Words | None = None  # what the words before the pause that ended it were, if judged
    ignored: str = ""  # why no reply was given, if none was
    interrupted: bool = False
    barged_in: bool = False  # heard over a reply, which it paused
    rejoined: bool = False  # it went on with the utterance before: `utterance` and its transcript are the whole
    played_s: float | None = None  # of the reply, when it was cut
    unsaid: str = ""  # the reply's text not (wholly) played when it was cut
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def reply_audio(self) -> np.ndarray:
        return np.concatenate([c.audio for c in self.chunks]) if self.chunks else np.zeros(0, np.float32)


class TurnBook:
    """The turns in order and how they ended; safe from any thread."""

    def __init__(self, keep: int | None = KEEP_TURNS) -> None:
        # The daemon keeps the last turns (for `status`), not every turn of weeks with its reply audio.
        self.turns: collections.deque[Turn] = collections.deque(maxlen=keep)
        self._count = 0
        self._tally: dict[str, int] = {}
        self._lock = threading.Lock()

    def open(self, utterance: Utterance, timings: TurnTimings, answer: Answer | None = None) -> Turn:
        """A new turn, numbered after the last one."""
        with self._lock:
            self._count += 1
            timings.turn = self._count
            turn = Turn(self._count, utterance, timings, answer=answer)
            self.turns.append(turn)
            return turn

    def finish(self, turn: Turn) -> None:
        """`turn` is over: counted by how it ended, and `done` for whoever waits on it."""
        self.count(f"ignored: {turn.ignored}" if turn.ignored else "interrupted" if turn.interrupted else "answered")
        turn.done.set()

    def count(self, key: str) -> None:
        with self._lock:
            self._tally[key] = self._tally.get(key, 0) + 1

    def tally(self) -> dict[str, int]:
        """Turns finished since the start: answered, and ignored by reason (for status and the soak bench)."""
        with self._lock:
            return dict(self._tally)

    def all_done(self) -> bool:
        return all(t.done.is_set() for t in list(self.turns))

"""What the robot is doing in the conversation, kept in one place.

The reply is what several threads act on: the turns thread starts one, the speech thread ends it, the
microphone's thread pauses it when the visitor talks over it, and the turns thread then resumes or
cuts it. Each asks this object, under its one lock, instead of reading and writing flags of its own;
a transition that no longer applies (a pause after the reply ended) is refused, not half done.
"""

from __future__ import annotations

import enum
import threading
from typing import Generic, TypeVar

T = TypeVar("T")


class Phase(enum.Enum):
    IDLE = "idle"
    LISTENING = "listening"  # a visitor's utterance is being heard
    THINKING = "thinking"  # an utterance is being recognised and answered
    SPEAKING = "speaking"  # a reply is being said: from its first sentence's synthesis until its last sample
    INTERRUPTED = "interrupted"  # the visitor talks over the reply: it is held until their words are known


class TurnState(Generic[T]):
    """The reply being spoken (its turn `T`) and whether the visitor's speech holds it."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._turn: T | None = None
        self._cancel = threading.Event()
        self._held = False

    @property
    def replying(self) -> bool:
        with self._changed:
            return self._turn is not None

    @property
    def speaking_turn(self) -> T | None:
        with self._changed:
            return self._turn

    def start(self, turn: T, cancel: threading.Event, speaker_busy: bool) -> bool:
        """`turn`'s reply starts, unless one is going or the speaker still plays (check and start are one
        step); `cancel` is what an interruption sets."""
        with self._changed:
            if self._turn is not None or speaker_busy:
                return False
            self._turn, self._cancel, self._held = turn, cancel, False
            return True

    def finished(self, turn: T) -> None:
        """The speech thread is done with `turn`'s reply (played, cut or failed)."""
        with self._changed:
            if self._turn is turn:
                self._turn, self._held = None, False
            self._changed.notify_all()

    def pause(self) -> T | None:
        """The visitor talks over the reply: its turn if this paused it (None: no reply, or held already)."""
        with self._changed:
            if self._turn is None or self._held:
                return None
            self._held = True
            return self._turn

    def resume(self) -> T | None:
        """What paused the reply was no question: it goes on (its turn, if one is still going)."""
        with self._changed:
            self._held = False
            return self._turn

    def cancel(self) -> None:
        """End the reply (an interruption): its speech thread stops at the next block."""
        with self._changed:
            self._cancel.set()

    def wait_finished(self, timeout: float) -> bool:
        """Wait until no reply is going; False if one still is after `timeout` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self._turn is None, timeout)

    def phase(self, hearing: bool, answering: bool) -> Phase:
        """The conversation's phase, given whether an utterance is being heard and whether one is being
        recognised or answered."""
        with self._changed:
            if self._turn is not None:
                return Phase.INTERRUPTED if self._held else Phase.SPEAKING
        return Phase.LISTENING if hearing else Phase.THINKING if answering else Phase.IDLE

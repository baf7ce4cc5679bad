"""The avatar's life: its state, idle motion, gaze and lip-sync, turned into a pose for each frame.

States are visibly distinct: idle (slow breathing, eyes wander), attentive (a visitor is there:
brows up, eyes on them), listening (a ring of light), thinking (brows down, eyes up and aside),
speaking (the mouth follows the reply). The mouth is scheduled on the speaker's playback clock,
never on wall time, and closes when the audio stops or is cancelled, at once when the visitor talks
over the reply (it opens again if the reply goes on).
"""

from __future__ import annotations

import enum
import math
import random
from typing import Callable

from device.avatar.mouths import REST, Mouth, blend, mouth_at
from device.avatar.renderer import Pose
from device.messages import (
    Interrupt,
    LookAt,
    Presence,
    ReplyChunk,
    ReplyPaused,
    ReplyResumed,
    SpeechStarted,
    Utterance,
    Viseme,
)

GAZE_SMOOTHING_S = 0.15  # time constant with which the eyes follow their target
BLINK_MEAN_S = 4.0  # people blink every 2-10 s
BLINK_S = 0.15


class State(enum.Enum):
    IDLE = "idle"
    ATTENTIVE = "attentive"
    LISTENING = "listening"
    THINKING = "thinking"
    SPEAKING = "speaking"


_BROWS = {State.IDLE: 0.0, State.ATTENTIVE: 0.6, State.LISTENING: 0.8, State.THINKING: -0.8, State.SPEAKING: 0.3}


class Avatar:
    def __init__(self, seed: int = 0) -> None:
        self.state = State.IDLE
        self._random = random.Random(seed)
        self._gaze = (0.0, 0.0)
        self._target: tuple[float, float] | None = None
        self._next_blink = self._random.expovariate(1 / BLINK_MEAN_S)
        self._saccade = (0.0, 0.0)
        self._next_saccade = 1.0
        self._visemes: tuple[Viseme, ...] = ()
        self._rate = 22050
        self._clock: Callable[[], int] | None = None
        self._mouth = REST
        self._last_t = 0.0

    def set_state(self, state: State) -> None:
        self.state = state

    def look_at(self, point: tuple[float, float] | None) -> None:
        """The visitor's face in camera coordinates, normalised to -1..1 (None: nobody there)."""
        self._target = point

    def speak(self, visemes: tuple[Viseme, ...], rate: int, clock: Callable[[], int]) -> None:
        """Follow a reply's viseme timeline; `clock` returns the samples played so far."""
        self._visemes, self._rate, self._clock = visemes, rate, clock
        self.state = State.SPEAKING

    def on_message(self, message: object, clock: Callable[[], int]) -> None:
        """Follow the conversation: listening while the visitor speaks, thinking until the reply,
        speaking along the reply's visemes on the speaker's clock, silent when interrupted; attentive
        while a visitor is there, looking at them. Called only by the thread that draws the avatar."""
        if isinstance(message, LookAt):
            self.look_at(message.point)
        elif isinstance(message, Presence):
            self.set_state(State.ATTENTIVE if message.engaged else State.IDLE)
        elif isinstance(message, SpeechStarted) and self.state != State.SPEAKING:
            self.set_state(State.LISTENING)  # over a reply, only a pause (barge-in) stops the mouth
        elif isinstance(message, ReplyPaused):
            self._mouth = REST  # closed on the next frame, as the sound fades
            self.set_state(State.LISTENING)
        elif isinstance(message, ReplyResumed) and self._visemes:
            self.set_state(State.SPEAKING)
        elif isinstance(message, Utterance) and self.state != State.SPEAKING:
            self.set_state(State.THINKING)
        elif isinstance(message, ReplyChunk):
            visemes = message.visemes if message.index == 0 else (*self._visemes, *message.visemes)
            self.speak(visemes, message.sample_rate, clock)
        elif isinstance(message, Interrupt):
            self.silence()

    def silence(self) -> None:
        """The audio stopped or was cancelled: close the mouth."""
        self._visemes, self._clock = (), None
        if self.state == State.SPEAKING:
            self.state = State.ATTENTIVE

    def pose(self, t: float) -> Pose:
        dt = max(0.0, t - self._last_t)
        self._last_t = t
        return Pose(
            mouth=self._mouth_now(dt),
            gaze=self._gaze_now(t, dt),
            lids=self._lids(t),
            brows=_BROWS[self.state],
            sway=self._sway(t),
            glow=1.0 if self.state == State.LISTENING else 0.0,
        )

    def _mouth_now(self, dt: float) -> Mouth:
        target = REST
        if self._clock and self._visemes and self.state == State.SPEAKING:
            played = self._clock()  # read once: the reply may end between two reads
            target = REST if played >= self._visemes[-1].sample else mouth_at(self._visemes, played, self._rate)
        self._mouth = blend(self._mouth, target, 1 - math.exp(-dt / 0.03)) if dt else target
        return self._mouth

    def _gaze_now(self, t: float, dt: float) -> tuple[float, float]:
        if t >= self._next_saccade:  # small random eye movements keep the face alive
            self._saccade = (self._random.uniform(-0.15, 0.15), self._random.uniform(-0.1, 0.1))
            self._next_saccade = t + self._random.uniform(0.8, 2.5)
        if self.state == State.THINKING:
            goal = (0.5, -0.6)
        elif self._target is not None:
            goal = self._target
        else:
            goal = (0.0, 0.0)
        goal = (goal[0] + self._saccade[0], goal[1] + self._saccade[1])
        k = 1 - math.exp(-dt / GAZE_SMOOTHING_S) if dt else 1.0
        self._gaze = (self._gaze[0] + (goal[0] - self._gaze[0]) * k, self._gaze[1] + (goal[1] - self._gaze[1]) * k)
        return self._gaze

    def _lids(self, t: float) -> float:
        if t >= self._next_blink + BLINK_S:
            self._next_blink = t + max(1.5, self._random.expovariate(1 / BLINK_MEAN_S))
        if self._next_blink <= t < self._next_blink + BLINK_S:
            return 1 - abs((t - self._next_blink) / BLINK_S * 2 - 1)
        return 0.0

    def _sway(self, t: float) -> tuple[float, float]:
        breathing = 0.004 * math.sin(2 * math.pi * t / 4.0)  # one breath every 4 s
        turn = 0.02 * self._gaze[0]  # the head turns a little with the eyes
        return (turn, breathing)

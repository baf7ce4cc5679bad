"""A sound starting on the echo-cancelled microphone, 10 ms at a time: the first sign that the visitor
talks over a reply.

Silero VAD judges 32 ms frames, and barge-in waits for `min_speech_ms` of them; through the echo
canceller in double talk its third speech frame came 250-550 ms (p50) after a visitor's onset
(offline, through the echo room, 0 to +12 dB of echo). What the canceller leaves of the robot's
voice peaked at -58 to -65 dBFS there, while a visitor's first syllable rose 15 dB over the room's
level within 80-125 ms (p50; docs/bargein.md has the tables). So three 10 ms blocks in a row that much louder than the level the
last 5 s stayed under 90% of the time hold the reply at once, and the VAD must then confirm it is
speech (turn_loop.py). The 90th percentile rather than a low one: a hall's talk has gaps, and a
floor taken in them let the talk's louder words through (with babble 20 dB under the visitor, 9-13
of 16 replies paused on the 10th percentile, 1-2 of 16 on the 90th); in louder talk it simply stays
quiet and the VAD's pause is the one left. The level is never taken below QUIETEST_FLOOR_DB: the
echo room is digitally silent between the canceller's residues, and a real microphone's own noise
sits about there.
"""

from __future__ import annotations

import numpy as np

from engines.model_specs import SPEECH_RATE

from device.conversation.noise_floor import NoiseFloor, level_db

BLOCK = SPEECH_RATE // 100  # 10 ms
# Loud blocks in a row: through the echo room at +12 dB, AEC3 let 20 ms of echo through where the
# reply's voice came back after a pause, twice in three runs of 16 replies (none over 30 ms).
RUN_BLOCKS = 3
FLOOR_BLOCKS, FLOOR_PERCENTILE = 500, 90  # the room's level: what the last 5 s stayed under 90% of the time
QUIETEST_FLOOR_DB = -75.0


class SoundOnset:
    """Feed the echo-cancelled frames (`push`); True on the frame in which a sound started."""

    def __init__(self, margin_db: float) -> None:
        self.margin_db = margin_db
        self._floor = NoiseFloor(FLOOR_BLOCKS, FLOOR_PERCENTILE)
        self._pending = np.zeros(0, np.float32)  # the samples of a block not yet whole
        self._run = 0

    def push(self, frame: np.ndarray, learn: bool) -> bool:
        """The frame's whole 10 ms blocks, each judged against the room's level; True if a run of
        RUN_BLOCKS loud blocks was reached in this frame. `learn`: the room's level is taken from this
        frame too; the caller says so only while a reply plays, the time the level is wanted for (the
        visitor's own question before it would make it deaf for seconds)."""
        audio = np.concatenate([self._pending, frame])
        whole = len(audio) // BLOCK * BLOCK
        self._pending = audio[whole:]
        started = False
        for block in audio[:whole].reshape(-1, BLOCK):
            level = level_db(block)
            floor = max(self._floor.update(level) if learn else self._floor.level, QUIETEST_FLOOR_DB)
            self._run = self._run + 1 if level > floor + self.margin_db else 0
            started = started or self._run == RUN_BLOCKS
        return started

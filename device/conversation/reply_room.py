"""The room as the echo-cancelled microphone hears it while a reply plays: what a visitor talking
over the robot must be louder than.

While the robot speaks, what the canceller leaves is its residue of the robot's voice plus the hall
(its talk, its noise). The level 10 ms blocks stayed under 90% of the last 5 s of replies is that
room's loud end: a hall's talk has gaps, and a level taken in them (a low percentile, as the
endpointer's noise floor is) lets the talk's louder words through. It is learnt only while a reply
plays (the visitor's own question before it would make the robot deaf to them for seconds) and never
taken below QUIETEST_FLOOR_DB: the echo room is digitally silent between the canceller's residues,
and a real microphone's own noise sits about there. Two judges use it (listening.py): a sound
starting (sound_onset.py) and the VAD's speech, which must also be this loud to pause a reply.
"""

from __future__ import annotations

import numpy as np

from engines.model_specs import SPEECH_RATE

from device.conversation.noise_floor import NoiseFloor, level_db

BLOCK = SPEECH_RATE // 100  # 10 ms
LEVEL_BLOCKS, LEVEL_PERCENTILE = 500, 90  # what the last 5 s of replies stayed under 90% of the time
QUIETEST_FLOOR_DB = -75.0


class ReplyRoom:
    """Feed every echo-cancelled frame (`hear`); `level_db` is the room's level during replies."""

    def __init__(self) -> None:
        self._levels = NoiseFloor(LEVEL_BLOCKS, LEVEL_PERCENTILE)
        self._pending = np.zeros(0, np.float32)  # the samples of a block not yet whole

    @property
    def level_db(self) -> float:
        return max(self._levels.level, QUIETEST_FLOOR_DB)

    def hear(self, heard: np.ndarray, learn: bool) -> list[tuple[float, float]]:
        """The whole 10 ms blocks of the echo-cancelled audio heard since the last call: each one's level
        and the room's level with it. `learn`: a reply plays (and is not held), so the blocks are the room's."""
        audio = np.concatenate([self._pending, heard])
        whole = len(audio) // BLOCK * BLOCK
        self._pending = audio[whole:]
        steady = None if learn else self.level_db  # not learning: one level for the whole frame
        judged = []
        for block in audio[:whole].reshape(-1, BLOCK):
            level = level_db(block)
            room = max(self._levels.update(level), QUIETEST_FLOOR_DB) if learn else steady
            judged.append((level, room))
        return judged

    def louder(self, frame: np.ndarray, margin_db: float) -> bool:
        """The frame is `margin_db` over the room's level."""
        return level_db(frame) > self.level_db + margin_db

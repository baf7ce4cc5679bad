"""The level of the sound around the robot when nobody near it speaks: the noise floor.

A low percentile of the last few seconds' frame levels (minimum statistics, after R. Martin, 2001):
a visitor's own speech has gaps between words often enough that it does not lift the floor, while
a hall's babble, which never stops, is what the floor becomes. The VAD hears babble as speech (it is
speech); what tells the visitor from the hall is that the visitor, close to the microphone, is
louder. Written here because it is a percentile over a ring of levels, not worth a dependency.
"""

from __future__ import annotations

import numpy as np

SILENT_DB = -100.0  # the level of digital silence, so that log10 of zero never happens


def level_db(frame: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(frame.astype(np.float64) ** 2) + 10 ** (SILENT_DB / 10)))


class NoiseFloor:
    def __init__(self, frames: int, percentile: float) -> None:
        self._levels = np.full(frames, SILENT_DB)
        self._next = 0
        self._seen = 0
        self.percentile = percentile

    def update(self, level: float) -> float:
        """Take one frame's level; the floor with it."""
        self._levels[self._next] = level
        self._next = (self._next + 1) % len(self._levels)
        self._seen = min(self._seen + 1, len(self._levels))
        return self.level

    @property
    def level(self) -> float:
        """The floor (digital silence before any level was taken)."""
        if not self._seen:
            return SILENT_DB
        return float(
            np.percentile(
                self._levels[: self._seen] if self._seen < len(self._levels) else self._levels, self.percentile
            )
        )

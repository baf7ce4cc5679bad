"""From faces to visitors: who is there, when they arrived and left, and where to look.

A face at least `min_face_px` wide seen for `arrive_s` is a visitor (greet them, listen); no such
face for `leave_s` means they left (say goodbye, go idle). The largest face is the one the avatar
looks at, in camera coordinates normalised to -1..1.
"""

from __future__ import annotations

from dataclasses import dataclass

from device.models.faces import Face
from device.settings import EngagementSettings


@dataclass(frozen=True)
class VisitorArrived:
    at: float


@dataclass(frozen=True)
class VisitorLeft:
    at: float


class Engagement:
    def __init__(self, settings: EngagementSettings) -> None:
        self.settings = settings
        self.engaged = False
        self.target: tuple[float, float] | None = None
        self._first_seen: float | None = None
        self._last_seen: float | None = None

    def update(self, faces: list[Face], at: float, width: int, height: int) -> list[object]:
        near = [f for f in faces if f.width >= self.settings.min_face_px]
        if near:
            face = max(near, key=lambda f: f.width)
            x, y = face.center
            self.target = (2 * x / width - 1, 2 * y / height - 1)
            self._last_seen = at
            if self._first_seen is None:
                self._first_seen = at
        else:
            self.target = None
            if self._last_seen is None or at - self._last_seen > self.settings.leave_s:
                self._first_seen = None
        if not self.engaged and self._first_seen is not None and at - self._first_seen >= self.settings.arrive_s:
            self.engaged = True
            return [VisitorArrived(at)]
        if self.engaged and self._last_seen is not None and at - self._last_seen > self.settings.leave_s:
            self.engaged, self._first_seen = False, None
            return [VisitorLeft(at)]
        return []

    def lost_camera(self, at: float) -> list[object]:
        """Without a camera nobody can be seen: a visitor being served is let go after `leave_s`."""
        return self.update([], at, 1, 1)

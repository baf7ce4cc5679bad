"""Drawing the avatar: head, eyes with pupils and eyelids, brows, mouth; anti-aliased, in any size.

Every length is a fraction of the frame height, so the same pose draws the same face at 720p or
4K; colours come from the settings so an operator can re-colour the robot.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import cv2
import numpy as np

from device.avatar.mouths import Mouth
from device.settings import AvatarSettings

SHIFT = 4  # sub-pixel precision of OpenCV's anti-aliased drawing (coordinates * 16)


@dataclass(frozen=True)
class Colours:
    background: tuple[int, int, int]
    skin: tuple[int, int, int]
    eyes: tuple[int, int, int]
    pupils: tuple[int, int, int]
    mouth: tuple[int, int, int]
    lines: tuple[int, int, int]

    @classmethod
    def of(cls, settings: AvatarSettings) -> "Colours":
        return cls(*(settings.colour(f.name) for f in fields(cls)))


@dataclass(frozen=True)
class Pose:
    """Everything that changes from frame to frame."""

    mouth: Mouth
    gaze: tuple[float, float] = (0.0, 0.0)  # -1..1, where the pupils look (x right, y down)
    lids: float = 0.0  # 0 open .. 1 closed (blinks)
    brows: float = 0.0  # -1 furrowed (thinking) .. 1 raised (attentive)
    sway: tuple[float, float] = (0.0, 0.0)  # head offset from breathing and the gaze, fraction of height
    glow: float = 0.0  # 0..1, a ring that shows the robot is listening


class Renderer:
    def __init__(self, width: int, height: int, colours: Colours) -> None:
        self.width, self.height, self.colours = width, height, colours
        self._background = np.empty((height, width, 3), np.uint8)
        self._background[:] = colours.background

    def render(self, pose: Pose) -> np.ndarray:
        frame = self._background.copy()
        unit = self.height
        cx = self.width / 2 + pose.sway[0] * unit
        cy = self.height * 0.52 + pose.sway[1] * unit
        c = self.colours
        if pose.glow > 0:
            self._ellipse(frame, (cx, cy), (0.33 * unit, 0.39 * unit), c.lines, thickness=max(1, int(0.012 * unit * pose.glow)))
        self._ellipse(frame, (cx, cy), (0.3 * unit, 0.36 * unit), c.skin, thickness=-1)
        for side in (-1, 1):
            self._eye(frame, (cx + side * 0.11 * unit, cy - 0.07 * unit), pose)
            brow_y = cy - (0.17 + 0.03 * pose.brows) * unit
            tilt = -side * 0.02 * unit * min(pose.brows, 0)  # furrowed brows slant to the nose
            inner = (cx + side * 0.06 * unit, brow_y + tilt)
            outer = (cx + side * 0.16 * unit, brow_y - 0.01 * unit)
            self._line(frame, inner, outer, c.lines, max(2, int(0.012 * unit)))
        self._mouth(frame, (cx, cy + 0.17 * unit), pose.mouth)
        return frame

    def _eye(self, frame: np.ndarray, centre: tuple[float, float], pose: Pose) -> None:
        unit, c = self.height, self.colours
        rx, ry = 0.05 * unit, 0.06 * unit
        self._ellipse(frame, centre, (rx, ry), c.eyes, thickness=-1)
        pupil = (centre[0] + pose.gaze[0] * rx * 0.5, centre[1] + pose.gaze[1] * ry * 0.45)
        self._ellipse(frame, pupil, (0.022 * unit, 0.022 * unit), c.pupils, thickness=-1)
        if pose.lids > 0:  # the upper lid comes down over the eye
            lid = np.zeros(frame.shape[:2], np.uint8)
            self._ellipse(lid, centre, (rx * 1.15, ry * 1.15), 255, thickness=-1)
            cut = int(centre[1] - ry * 1.2 + pose.lids * ry * 2.4)
            lid[cut:] = 0
            frame[lid > 0] = c.skin
        self._ellipse(frame, centre, (rx, ry), c.lines, thickness=max(1, int(0.006 * unit)))

    def _mouth(self, frame: np.ndarray, centre: tuple[float, float], mouth: Mouth) -> None:
        unit, c = self.height, self.colours
        half_width = 0.075 * unit * mouth.width * (1 - 0.35 * mouth.round)
        opening = 0.07 * unit * mouth.open
        if opening < 0.004 * unit:
            self._line(frame, (centre[0] - half_width, centre[1]), (centre[0] + half_width, centre[1]), c.lines,
                       max(2, int(0.01 * unit)))
            return
        self._ellipse(frame, centre, (half_width, opening), c.mouth, thickness=-1)
        if mouth.teeth > 0:
            teeth_h = 0.012 * unit * mouth.teeth
            self._ellipse(frame, (centre[0], centre[1] - opening + teeth_h), (half_width * 0.7, teeth_h), c.eyes, thickness=-1)
        self._ellipse(frame, centre, (half_width, opening), c.lines, thickness=max(2, int(0.008 * unit)))

    @staticmethod
    def _ellipse(frame, centre, axes, colour, thickness) -> None:
        cv2.ellipse(frame, (int(centre[0] * 16), int(centre[1] * 16)), (max(1, int(axes[0] * 16)), max(1, int(axes[1] * 16))),
                    0, 0, 360, colour, thickness, cv2.LINE_AA, SHIFT)

    @staticmethod
    def _line(frame, a, b, colour, thickness) -> None:
        cv2.line(frame, (int(a[0] * 16), int(a[1] * 16)), (int(b[0] * 16), int(b[1] * 16)), colour, thickness, cv2.LINE_AA, SHIFT)

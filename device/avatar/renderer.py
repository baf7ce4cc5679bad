"""Drawing the character: hair, ears, neck and shoulders, eyes with irises, highlights and lids, brows,
nose, cheeks, lips with teeth and tongue; anti-aliased, in any size.

Every length is a fraction of the frame height, so the same pose draws the same face at 720p or
4K; colours come from the settings so an operator can re-colour the character. Parts that must stay
inside another (an iris in its eye, teeth in the mouth) are drawn on a small patch and copied back
through the outer part's mask, so a frame costs a few small drawings, never a full-frame mask.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable

import cv2
import numpy as np

from device.avatar.mouths import Mouth
from device.settings import AvatarSettings

SHIFT = 4  # sub-pixel precision of OpenCV's anti-aliased drawing (coordinates * 16)
HEAD = (0.26, 0.32)  # half width and half height of the head
EYE = (0.05, 0.042)
EYE_SPACING, EYE_HEIGHT = 0.105, -0.03  # from the head's centre
MOUTH_HEIGHT = 0.165
TEETH, TONGUE = (236, 240, 244), (120, 110, 214)  # BGR


@dataclass(frozen=True)
class Colours:
    background: tuple[int, int, int]
    skin: tuple[int, int, int]
    hair: tuple[int, int, int]
    clothes: tuple[int, int, int]
    eyes: tuple[int, int, int]
    irises: tuple[int, int, int]
    pupils: tuple[int, int, int]
    mouth: tuple[int, int, int]
    lines: tuple[int, int, int]

    @classmethod
    def of(cls, settings: AvatarSettings) -> "Colours":
        return cls(*(settings.colour(f.name) for f in fields(cls)))


def _mix(a: tuple[int, int, int], b: tuple[int, int, int], share: float) -> tuple[int, int, int]:
    return tuple(int(round(x + (y - x) * share)) for x, y in zip(a, b))


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
        c = colours
        self._shade = _mix(c.skin, (0, 0, 0), 0.18)  # under the chin, inside the ears, the nose
        self._blush = _mix(c.skin, c.mouth, 0.22)
        self._cavity = _mix(c.mouth, (0, 0, 0), 0.7)
        self._lips = _mix(c.mouth, c.skin, 0.15)

    def render(self, pose: Pose) -> np.ndarray:
        frame = self._background.copy()
        u, c = self.height, self.colours
        cx = self.width / 2 + pose.sway[0] * u
        cy = self.height * 0.45 + pose.sway[1] * u
        if pose.glow > 0:
            self._ellipse(frame, (cx, cy), (0.36 * u, 0.41 * u), c.lines, thickness=max(1, int(0.012 * u * pose.glow)))
        self._body(frame, cx, cy, pose.sway[1] * u * 0.5)
        self._ellipse(frame, (cx, cy - 0.045 * u), (0.3 * u, 0.355 * u), c.hair, -1)  # the hair behind the head
        for side in (-1, 1):
            ear = (cx + side * 0.255 * u, cy + 0.01 * u)
            self._ellipse(frame, ear, (0.042 * u, 0.068 * u), c.skin, -1)
            self._ellipse(
                frame,
                (ear[0] + side * 0.008 * u, ear[1]),
                (0.02 * u, 0.04 * u),
                self._shade,
                max(1, int(0.006 * u)),
                arc=(90 - side * 70, 90 + side * 110),
            )
        self._ellipse(frame, (cx, cy), (HEAD[0] * u, HEAD[1] * u), c.skin, -1)
        self._fringe(frame, cx, cy)
        for side in (-1, 1):
            self._ellipse(frame, (cx + side * 0.15 * u, cy + 0.085 * u), (0.045 * u, 0.026 * u), self._blush, -1)
            self._eye(frame, (cx + side * EYE_SPACING * u, cy + EYE_HEIGHT * u), pose)
            self._brow(frame, cx, cy, side, pose.brows)
        self._ellipse(
            frame, (cx, cy + 0.055 * u), (0.024 * u, 0.016 * u), self._shade, max(1, int(0.007 * u)), arc=(20, 160)
        )
        self._mouth(frame, (cx, cy + MOUTH_HEIGHT * u), pose.mouth)
        return frame

    def _body(self, frame: np.ndarray, cx: float, cy: float, breath: float) -> None:
        u, c = self.height, self.colours
        neck = np.array(
            [
                (cx - 0.085 * u, cy + 0.2 * u),
                (cx + 0.085 * u, cy + 0.2 * u),
                (cx + 0.095 * u, cy + 0.48 * u),
                (cx - 0.095 * u, cy + 0.48 * u),
            ]
        )
        self._polygon(frame, neck, self._shade)
        self._ellipse(frame, (cx, cy + 0.72 * u + breath), (0.44 * u, 0.3 * u), c.clothes, -1)
        self._ellipse(
            frame, (cx, cy + 0.43 * u + breath), (0.1 * u, 0.06 * u), _mix(c.skin, self._shade, 0.5), -1, arc=(0, 180)
        )

    def _fringe(self, frame: np.ndarray, cx: float, cy: float) -> None:
        """Hair over the top of the head, parted on one side."""
        u = self.height
        crown = (
            cv2.ellipse2Poly(
                (int(cx * 16), int((cy - 0.02 * u) * 16)), (int(0.272 * u * 16), int(0.345 * u * 16)), 0, 185, 355, 5
            ).astype(float)
            / 16
        )
        edge = [
            (cx + 0.262 * u, cy - 0.08 * u),
            (cx + 0.2 * u, cy - 0.19 * u),
            (cx + 0.06 * u, cy - 0.215 * u),
            (cx - 0.06 * u, cy - 0.185 * u),
            (cx - 0.18 * u, cy - 0.2 * u),
            (cx - 0.262 * u, cy - 0.06 * u),
        ]
        self._polygon(frame, np.vstack([crown, edge]), self.colours.hair)

    def _eye(self, frame: np.ndarray, centre: tuple[float, float], pose: Pose) -> None:
        """White, iris, pupil and highlight clipped to the eye; the upper lid comes down over it."""
        u, c = self.height, self.colours
        rx, ry = EYE[0] * u, EYE[1] * u

        def inside(patch: np.ndarray, local: tuple[float, float]) -> None:
            iris = (local[0] + pose.gaze[0] * rx * 0.45, local[1] + pose.gaze[1] * ry * 0.35)
            self._ellipse(patch, iris, (0.03 * u, 0.03 * u), c.irises, -1)
            self._ellipse(patch, iris, (0.015 * u, 0.015 * u), c.pupils, -1)
            self._ellipse(patch, (iris[0] + 0.01 * u, iris[1] - 0.011 * u), (0.007 * u, 0.007 * u), c.eyes, -1)
            if pose.lids > 0:
                patch[: int(round(pose.lids * (2 * ry + 4)))] = c.skin

        self._clipped(frame, centre, (rx, ry), c.eyes, inside)
        lash = centre[1] - ry + pose.lids * 2 * ry  # the lid's edge, with its lashes
        self._ellipse(
            frame,
            (centre[0], lash + ry * (1 - pose.lids)),
            (rx * 1.02, ry * (1 - pose.lids) + 1),
            c.lines,
            max(2, int(0.008 * u)),
            arc=(195, 345),
        )

    def _brow(self, frame: np.ndarray, cx: float, cy: float, side: int, brows: float) -> None:
        """An arc over the eye: higher and rounder when raised, the inner end lower when furrowed."""
        u = self.height
        lift = 0.022 * u * brows
        inner = (cx + side * 0.05 * u, cy - 0.1 * u - lift + 0.018 * u * max(0.0, -brows))
        top = (cx + side * 0.105 * u, cy - 0.125 * u - lift * 1.2)
        outer = (cx + side * 0.155 * u, cy - 0.105 * u - lift * 0.8)
        t = np.linspace(0, 1, 12)[:, None]
        curve = (
            (1 - t) ** 2 * np.array(inner)
            + 2 * (1 - t) * t * (2 * np.array(top) - (np.array(inner) + np.array(outer)) / 2)
            + t**2 * np.array(outer)
        )
        cv2.polylines(
            frame,
            [np.round(curve * 16).astype(np.int32)],
            False,
            self.colours.lines,
            max(2, int(0.013 * u)),
            cv2.LINE_AA,
            SHIFT,
        )

    def _mouth(self, frame: np.ndarray, centre: tuple[float, float], mouth: Mouth) -> None:
        """Closed: a smiling line. Open: lips around a dark mouth with the upper teeth and the tongue."""
        u = self.height
        half_width = 0.07 * u * mouth.width * (1 - 0.35 * mouth.round)
        opening = 0.065 * u * mouth.open
        if opening < 0.006 * u and mouth.teeth == 0:
            self._ellipse(
                frame,
                (centre[0], centre[1] - 0.012 * u),
                (half_width, 0.02 * u),
                self._lips,
                max(2, int(0.009 * u)),
                arc=(20, 160),
            )
            return
        opening = max(opening, 0.012 * u)
        lip = 0.011 * u * (1 + 0.5 * mouth.round)
        self._ellipse(frame, centre, (half_width + lip, opening + lip), self._lips, -1)
        teeth = 0.014 * u * (1 + mouth.teeth)

        def inside(patch: np.ndarray, local: tuple[float, float]) -> None:
            self._ellipse(patch, (local[0], local[1] - opening), (half_width * 0.8, teeth), TEETH, -1)
            self._ellipse(patch, (local[0], local[1] + opening), (half_width * 0.6, opening * 0.55), TONGUE, -1)

        self._clipped(frame, centre, (half_width, opening), self._cavity, inside)

    def _clipped(
        self,
        frame: np.ndarray,
        centre: tuple[float, float],
        axes: tuple[float, float],
        fill: tuple,
        draw: Callable[[np.ndarray, tuple[float, float]], None],
    ) -> None:
        """An ellipse filled with `fill` and what `draw` puts on it, cut to the ellipse (on a patch the
        ellipse's size: an iris stays in its eye, teeth in the mouth)."""
        x0, y0 = int(centre[0] - axes[0]) - 2, int(centre[1] - axes[1]) - 2
        box = frame[y0 : int(centre[1] + axes[1]) + 3, x0 : int(centre[0] + axes[0]) + 3]
        local = (centre[0] - x0, centre[1] - y0)
        mask = np.zeros(box.shape[:2], np.uint8)
        self._ellipse(mask, local, axes, 255, -1)
        patch = np.empty_like(box)
        patch[:] = fill
        draw(patch, local)
        blend(box, patch, mask)

    @staticmethod
    def _ellipse(frame, centre, axes, colour, thickness, arc=(0, 360)) -> None:
        cv2.ellipse(
            frame,
            (int(centre[0] * 16), int(centre[1] * 16)),
            (max(1, int(axes[0] * 16)), max(1, int(axes[1] * 16))),
            0,
            arc[0],
            arc[1],
            colour,
            thickness,
            cv2.LINE_AA,
            SHIFT,
        )

    @staticmethod
    def _polygon(frame, points: np.ndarray, colour) -> None:
        cv2.fillPoly(frame, [np.round(np.asarray(points) * 16).astype(np.int32)], colour, cv2.LINE_AA, SHIFT)


def blend(box: np.ndarray, patch: np.ndarray, mask: np.ndarray) -> None:
    """`patch` over `box` in place where the 8-bit `mask` is set, its anti-aliased edge blended."""
    alpha = (mask.astype(np.float32) / 255)[..., None]
    box[:] = (box * (1 - alpha) + patch * alpha).astype(np.uint8)

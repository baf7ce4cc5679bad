"""How a photographed face moves: displacement fields for the jaw, lips, irises, brows and head.

Each motion is a displacement of the face mesh's landmarks at full strength (the jaw dropped, the
irises turned to one side). Blinks are not a warp: stretching the skin above an eye over it drags the
lashes' dark line down with it, so the portrait paints its lids (device/avatar/portrait.py).
Once, at start, each is spread over the pixels around the face by
piecewise-linear interpolation over the triangulated landmarks (scipy's griddata), as a backward map on
a coarse grid: where each output pixel takes its colour from, at full strength. Per frame a pose is a
weighted sum of these few fields, enlarged to the face's region and applied with one cv2.remap, which
is what lets a photo speak at 30 fps on one core.

Landmark indices are MediaPipe's canonical face mesh (face_mesh_connections: lips, eyes, brows, oval).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LIPS_OUTER_UPPER = (61, 185, 40, 39, 37, 0, 267, 269, 270, 409, 291)
LIPS_OUTER_LOWER = (61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291)
LIPS_INNER_UPPER = (78, 191, 80, 81, 82, 13, 312, 311, 310, 415, 308)
LIPS_INNER_LOWER = (78, 95, 88, 178, 87, 14, 317, 402, 318, 324, 308)
EYES_UPPER = ((33, 246, 161, 160, 159, 158, 157, 173, 133), (263, 466, 388, 387, 386, 385, 384, 398, 362))
EYES_LOWER = ((33, 7, 163, 144, 145, 153, 154, 155, 133), (263, 249, 390, 373, 374, 380, 381, 382, 362))
BROWS = ((70, 63, 105, 66, 107, 46, 53, 52, 65, 55), (300, 293, 334, 296, 336, 276, 283, 282, 295, 285))
CHIN, NOSE_TIP, FOREHEAD = 152, 1, 10
GRID_STEP = 2  # pixels of the face region per cell of the coarse fields: the eyes are 12-20 px tall in 720p
IRIS_RING = 8  # control points around each iris that move with it
IRIS_RING_SIZE = (1.25, 0.9)  # in iris radii: just outside its visible sides, inside the lids above and below

# Full-strength motions, as fractions of the face's height (forehead to chin).
JAW_DROP = 0.10  # the lower lip and chin at open = 1
UPPER_LIP_RISE = 0.012
SPREAD = 0.25  # at full spread the lips move out by this share of their distance from the middle
ROUND_NARROW = 0.35  # lips drawn to the middle when rounded (of their distance from it)
ROUND_POUT = 0.012  # rounded lips pushed out, seen as fuller lips
BROW_RISE = 0.035
GAZE_SHIFT = 0.7  # the iris's travel each way, in iris radii (the eye is about five radii wide)
HEAD_SHIFT = 0.01  # of the frame's height: the unit of the sway fields

MOTIONS = ("open", "spread", "round", "brows", "gaze_x", "gaze_y", "sway_x", "sway_y")


@dataclass(frozen=True)
class FaceRig:
    """A face's region in the frame and its motions' fields there: each coarse (h x w x 2), kept only
    over the cells it moves (most motions move a small part of the face), with where those cells lie."""

    region: tuple[int, int, int, int]  # x0, y0, x1, y1 in frame pixels
    grid: tuple[int, int]  # coarse cells: rows, columns
    fields: tuple[tuple[tuple[slice, slice], np.ndarray], ...]  # per motion of MOTIONS
    moves: np.ndarray  # per motion of MOTIONS, its displacement of every control point (for the lips' outline)
    rest: np.ndarray  # the control points (468 mesh points, then each iris's centre and ring) in frame pixels

    def point_offsets(self, weights: np.ndarray) -> np.ndarray:
        """Where the control points are for these motion weights, relative to rest."""
        return np.tensordot(weights, self.moves, axes=1)


def face_height(points: np.ndarray) -> float:
    return float(np.linalg.norm(points[CHIN] - points[FOREHEAD]))


def build_rig(
    points: np.ndarray, irises: np.ndarray, iris_radius: float, frame_height: int, frame_size: tuple[int, int]
) -> FaceRig:
    """The rig of a face whose landmarks (468 x 2), iris centres and radius are in frame pixels."""
    unit = face_height(points)
    rings = [
        centre + iris_radius * np.stack([IRIS_RING_SIZE[0] * np.cos(a), IRIS_RING_SIZE[1] * np.sin(a)], 1)
        for centre in irises
        for a in [np.linspace(0, 2 * np.pi, IRIS_RING, endpoint=False)]
    ]
    rest = np.vstack([points, irises[0], rings[0], irises[1], rings[1]])
    region = _region(points, unit, frame_size)
    moves = _moves(rest, points, unit, iris_radius, frame_height)
    fields = [_backward_field(rest, moves[m], region) for m in MOTIONS]
    return FaceRig(
        region, fields[0].shape[:2], tuple(_trimmed(f) for f in fields), np.stack([moves[m] for m in MOTIONS]), rest
    )


def _trimmed(field: np.ndarray) -> tuple[tuple[slice, slice], np.ndarray]:
    rows, columns = np.nonzero(np.abs(field).max(-1) > 1e-3)
    if not rows.size:
        return (slice(0, 0), slice(0, 0)), np.zeros((0, 0, 2), np.float32)
    cells = (slice(rows.min(), rows.max() + 1), slice(columns.min(), columns.max() + 1))
    return cells, np.ascontiguousarray(field[cells], np.float32)


def _region(points: np.ndarray, unit: float, frame_size: tuple[int, int]) -> tuple[int, int, int, int]:
    """The face with a margin wide enough that every motion fades out before the region's edge."""
    (x0, y0), (x1, y1) = points.min(0), points.max(0)
    margin = 0.25 * unit
    width, height = frame_size
    return (
        max(0, int(x0 - margin)),
        max(0, int(y0 - margin)),
        min(width, int(x1 + margin)),
        min(height, int(y1 + 1.2 * margin)),
    )


def _moves(
    rest: np.ndarray, points: np.ndarray, unit: float, iris_radius: float, frame_height: int
) -> dict[str, np.ndarray]:
    n = len(points)
    zero = np.zeros_like(rest)
    mouth = points[list(LIPS_OUTER_UPPER + LIPS_OUTER_LOWER)]
    centre, half_width = mouth.mean(0), (points[291, 0] - points[61, 0]) / 2
    moves = {m: zero.copy() for m in MOTIONS}
    # Jaw: everything below the mouth's line goes down, most in the middle, fading toward the ears.
    line = points[list(LIPS_INNER_UPPER)][:, 1].mean()
    jaw_half = (points[:, 0].max() - points[:, 0].min()) / 2
    below = points[:, 1] > line + 1e-6
    side = np.clip(1 - (np.abs(points[:, 0] - centre[0]) / jaw_half) ** 2, 0, 1)
    moves["open"][:n, 1] = np.where(below, JAW_DROP * unit * np.sqrt(side), 0)
    moves["open"][list(LIPS_INNER_LOWER[1:-1] + LIPS_OUTER_LOWER[1:-1]), 1] = JAW_DROP * unit
    moves["open"][list(LIPS_INNER_UPPER[1:-1] + LIPS_OUTER_UPPER[1:-1]), 1] = -UPPER_LIP_RISE * unit
    moves["open"][[61, 291, 78, 308], 1] = JAW_DROP * unit * 0.35  # the corners follow the jaw half way
    # Lips: spread and rounded move the lips and the skin around them toward or away from the middle.
    near = np.clip(1 - np.linalg.norm((points - centre) / (half_width * np.array([1.6, 1.2])), axis=1), 0, 1)
    lips = list(set(LIPS_OUTER_UPPER + LIPS_OUTER_LOWER + LIPS_INNER_UPPER + LIPS_INNER_LOWER))
    near[lips] = 1.0
    moves["spread"][:n, 0] = SPREAD * (points[:, 0] - centre[0]) * near
    moves["round"][:n, 0] = -ROUND_NARROW * (points[:, 0] - centre[0]) * near
    moves["round"][list(LIPS_OUTER_UPPER[1:-1]), 1] = -ROUND_POUT * unit
    moves["round"][list(LIPS_OUTER_LOWER[1:-1]), 1] = ROUND_POUT * unit
    moves["brows"][list(BROWS[0] + BROWS[1]), 1] = -BROW_RISE * unit
    moves["gaze_x"][n:, 0] = GAZE_SHIFT * iris_radius
    moves["gaze_y"][n:, 1] = 0.6 * GAZE_SHIFT * iris_radius  # the lids cover most of the iris's vertical travel
    moves["sway_x"][:, 0] = HEAD_SHIFT * frame_height
    moves["sway_y"][:, 1] = HEAD_SHIFT * frame_height
    return moves


def _backward_field(rest: np.ndarray, move: np.ndarray, region: tuple[int, int, int, int]) -> np.ndarray:
    """For each coarse cell of the region, the offset to the pixel it shows when the control points
    have moved by `move`: the displacement interpolated over the moved points' triangles, negated;
    fixed at the region's edge."""
    from scipy.interpolate import (
        griddata,
    )  # here: scipy.interpolate takes 0.7 s to import, and only a portrait needs it

    x0, y0, x1, y1 = region
    xs, ys = np.arange(x0, x1 + GRID_STEP, GRID_STEP), np.arange(y0, y1 + GRID_STEP, GRID_STEP)
    edge = np.vstack(
        [
            np.stack([xs, np.full_like(xs, y0)], 1),
            np.stack([xs, np.full_like(xs, ys[-1])], 1),
            np.stack([np.full_like(ys, x0), ys], 1),
            np.stack([np.full_like(ys, xs[-1]), ys], 1),
        ]
    ).astype(float)
    moved = np.vstack([rest + move, edge])
    shift = np.vstack([-move, np.zeros_like(edge)])
    grid = np.stack(np.meshgrid(xs, ys), -1).reshape(-1, 2).astype(float)
    field = np.stack([griddata(moved, shift[:, k], grid, method="linear", fill_value=0.0) for k in (0, 1)], -1)
    return field.reshape(len(ys), len(xs), 2)

"""The portrait avatar: the operator's photo, warped per frame to speak, blink, look and breathe.

Once, at start, the face is located (BlazeFace, then the face mesh and irises; cached in the state
directory) and the photo is scaled so the face fills the frame's middle; the rig spreads each motion
over the face (device/avatar/face_rig.py). Per frame the pose's weights blend the rig's fields, one
cv2.remap warps the face's region, and a mouth interior (shadow, upper teeth, tongue) is drawn inside
the opened inner lips, and the lids are painted over the eyes for blinks.
Faces are personal data: the cached landmarks stay in the state directory,
readable by the service's user only.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import cv2
import numpy as np

from engines.errors import InputError
from engines.store.model_store import ModelStore, state_home

from device.avatar.face_rig import (
    BROWS,
    EYES_LOWER,
    EYES_UPPER,
    HEAD_SHIFT,
    LIPS_INNER_LOWER,
    LIPS_INNER_UPPER,
    MOTIONS,
    FaceRig,
    build_rig,
    face_height,
)
from device.avatar.mouths import REST
from device.avatar.renderer import SHIFT, Pose, blend
from device.models import catalog
from device.models.face_mesh import FaceLandmarks

FACE_SHARE = 0.42  # of the frame's height, forehead to chin
FACE_CENTRE_Y = 0.47  # where the face's middle sits, of the frame's height
LOWER_LID_SHARE = 0.2  # of the eye's opening: where the lids meet, above the lower lid
LASHES = (52, 56, 70)  # BGR, dark brown
CAVITY, TEETH, TONGUE = (36, 30, 70), (212, 222, 230), (110, 110, 196)  # BGR
CACHE_VERSION = 1


def read_photo(path: Path) -> np.ndarray:
    """An 8-bit BGR photo, or a clear error naming the file."""
    if not path.is_file():
        raise InputError(f"portrait {path}: no such file; set [avatar] portrait to a photo (JPEG or PNG)")
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise InputError(f"portrait {path}: not an image OpenCV can read; use a JPEG or PNG photo")
    return image


def locate_face(photo: np.ndarray, store: ModelStore, threads: int = 1) -> FaceLandmarks:
    """The one face of a photo, or an InputError saying why not (none, several)."""
    faces = catalog.load_faces(store, threads).detect(photo)
    if len(faces) != 1:
        raise InputError(f"found {len(faces)} faces in the portrait; it needs exactly one")
    return catalog.load_face_mesh(store, threads).landmarks(photo, faces[0])


def cached_landmarks(
    photo: np.ndarray, store: ModelStore, threads: int = 1, cache_dir: Path | None = None
) -> FaceLandmarks:
    """The face's landmarks, from the state directory's cache when this photo (its pixels, whatever the
    file is called) was seen before."""
    cache_dir = cache_dir or state_home() / "portraits"
    key = hashlib.sha256(f"{photo.shape}".encode() + photo.tobytes()).hexdigest()[:32]
    cached = cache_dir / f"{key}.v{CACHE_VERSION}.npz"
    if cached.is_file():
        with np.load(cached) as saved:
            return FaceLandmarks(
                saved["points"], saved["irises"], float(saved["iris_radius"]), float(saved["presence"])
            )
    landmarks = locate_face(photo, store, threads)
    cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = cached.with_suffix(".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        np.savez(
            out,
            points=landmarks.points,
            irises=landmarks.irises,
            iris_radius=landmarks.iris_radius,
            presence=landmarks.presence,
        )
    partial.replace(cached)
    return landmarks


def _fit(points: np.ndarray, width: int, height: int) -> np.ndarray:
    """The 2x3 map that scales the photo so its face is FACE_SHARE of the frame's height, centred."""
    scale = FACE_SHARE * height / face_height(points)
    centre = points.mean(0)
    return np.array([[scale, 0, width / 2 - scale * centre[0]], [0, scale, FACE_CENTRE_Y * height - scale * centre[1]]])


def _lid_colour(frame: np.ndarray, points: np.ndarray, eye: int) -> tuple[int, int, int]:
    """The lit skin between an eye and its brow: the mean of its brighter half, so that lashes,
    brow hairs and the crease's shadow do not count."""
    band = np.vstack([points[list(EYES_UPPER[eye])], points[list(BROWS[eye][5:])][::-1]])
    mask = np.zeros(frame.shape[:2], np.uint8)
    cv2.fillPoly(mask, [np.round(band).astype(np.int32)], 1)
    pixels = frame[mask > 0].astype(np.float64)
    brightness = pixels.sum(1)
    return tuple(int(v) for v in pixels[brightness >= np.median(brightness)].mean(0))


class PortraitRenderer:
    def __init__(self, photo: np.ndarray, landmarks: FaceLandmarks, width: int, height: int) -> None:
        self.width, self.height = width, height
        fit = _fit(landmarks.points, width, height)
        self._frame = cv2.warpAffine(
            photo, fit, (width, height), flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_REPLICATE
        )
        points, irises = (p @ fit[:, :2].T + fit[:, 2] for p in (landmarks.points, landmarks.irises))
        self.rig: FaceRig = build_rig(points, irises, landmarks.iris_radius * fit[0, 0], height, (width, height))
        self._out = self._frame.copy()
        self._lid_colours = [_lid_colour(self._frame, self.rig.rest, eye) for eye in range(2)]

    def weights(self, pose: Pose) -> np.ndarray:
        """The rig's motions for a pose, in MOTIONS order."""
        mouth = pose.mouth
        spread = (
            mouth.width - REST.width
        )  # the mouths' widest (+0.2) spreads fully, their narrowest (-0.4) narrows as much
        values = {
            "open": mouth.open,
            "spread": spread / (0.2 if spread > 0 else 0.4),
            "round": mouth.round,
            "brows": pose.brows,
            "gaze_x": pose.gaze[0],
            "gaze_y": pose.gaze[1],
            "sway_x": pose.sway[0] / HEAD_SHIFT,
            "sway_y": pose.sway[1] / HEAD_SHIFT,
        }
        return np.array([values[m] for m in MOTIONS], np.float32)

    def render(self, pose: Pose) -> np.ndarray:
        """The frame for `pose`; valid until the next call (only the face's region is drawn again)."""
        weights = self.weights(pose)
        x0, y0, x1, y1 = self.rig.region
        coarse = np.zeros((*self.rig.grid, 2), np.float32)
        for weight, (cells, field) in zip(weights, self.rig.fields):
            if weight:
                coarse[cells] += weight * field
        offsets = cv2.resize(coarse, (x1 - x0, y1 - y0), interpolation=cv2.INTER_LINEAR)
        frame = self._out
        # WARP_RELATIVE_MAP (OpenCV 4.10): the map holds offsets from each pixel, not coordinates
        frame[y0:y1, x0:x1] = cv2.remap(
            self._frame[y0:y1, x0:x1],
            offsets,
            None,
            cv2.INTER_LINEAR | cv2.WARP_RELATIVE_MAP,
            borderMode=cv2.BORDER_REPLICATE,
        )
        points = self.rig.rest + self.rig.point_offsets(weights)
        self._mouth(frame, points, pose)
        if pose.lids > 0:
            for eye, colour in enumerate(self._lid_colours):
                self._lid(frame, points, eye, pose.lids, colour)
        return frame

    def _lid(self, frame: np.ndarray, points: np.ndarray, eye: int, closed: float, colour: tuple) -> None:
        """The upper lid lowered `closed` of the way to where it meets the lower one, in the skin's
        colour, its lashes a dark line along its edge."""
        upper, lower = points[list(EYES_UPPER[eye])], points[list(EYES_LOWER[eye])]
        edge = upper + closed * (lower + LOWER_LID_SHARE * (upper - lower) - upper)
        lid = np.vstack([upper - (0, 1), edge[::-1]])
        cv2.fillPoly(frame, [np.round(lid * (1 << SHIFT)).astype(np.int32)], colour, cv2.LINE_AA, SHIFT)
        cv2.polylines(
            frame,
            [np.round(edge * (1 << SHIFT)).astype(np.int32)],
            False,
            LASHES,
            max(1, round(self.height / 540)),
            cv2.LINE_AA,
            SHIFT,
        )

    def _mouth(self, frame: np.ndarray, points: np.ndarray, pose: Pose) -> None:
        """The inside of the mouth where the inner lips have parted: a shadow, the upper teeth under the
        upper lip (further down for F and V), the tongue low at the back."""
        upper, lower = points[list(LIPS_INNER_UPPER)], points[list(LIPS_INNER_LOWER)]
        gap = float(np.max(lower[:, 1] - upper[:, 1]))
        if gap < 1.0:
            return
        outline = np.vstack([upper, lower[::-1]])
        (bx0, by0), (bx1, by1) = np.floor(outline.min(0)).astype(int) - 2, np.ceil(outline.max(0)).astype(int) + 2
        box = frame[by0:by1, bx0:bx1]
        mask = np.zeros(box.shape[:2], np.uint8)
        cv2.fillPoly(mask, [np.round((outline - (bx0, by0)) * (1 << SHIFT)).astype(np.int32)], 255, cv2.LINE_AA, SHIFT)
        inside = np.empty_like(box)
        inside[:] = CAVITY
        width = upper[-1, 0] - upper[0, 0]
        teeth = 0.18 * width * (0.6 + 0.4 * pose.mouth.teeth)
        top = upper[:, 1].min() - by0
        cv2.ellipse(
            inside,
            (int((upper[:, 0].mean() - bx0) * 16), int(top * 16)),
            (int(width * 0.42 * 16), int(teeth * 16)),
            0,
            0,
            180,
            TEETH,
            -1,
            cv2.LINE_AA,
            SHIFT,
        )
        cv2.ellipse(
            inside,
            (int((lower[:, 0].mean() - bx0) * 16), int((lower[:, 1].max() - by0) * 16)),
            (int(width * 0.3 * 16), int(gap * 0.45 * 16)),
            0,
            180,
            360,
            TONGUE,
            -1,
            cv2.LINE_AA,
            SHIFT,
        )
        blend(box, inside, mask)

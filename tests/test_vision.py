"""The camera on video files made from real photos: a visitor arrives, stays and leaves; the
camera disappears and comes back."""

from __future__ import annotations

import logging
import shutil
import time

import cv2
import numpy as np
import pytest

from device.vision.camera import Camera
from device.vision.engagement import Engagement, EngagementSettings, VisitorArrived, VisitorLeft
from device.vision.perception import Perception
from tests.conftest import skimage_bgr

FPS = 10


def _clip(path, seconds_without: float, seconds_with: float, seconds_after: float) -> None:
    """1280x720: an empty hall (the coffee photo), then the astronaut in it, then the hall again."""
    hall = cv2.resize(skimage_bgr("coffee"), (1280, 720))
    visitor = hall.copy()
    visitor[150:662, 500:1012] = skimage_bgr("astronaut")  # a face of about 105 px
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), FPS, (1280, 720))
    for frame, seconds in ((hall, seconds_without), (visitor, seconds_with), (hall, seconds_after)):
        for _ in range(int(seconds * FPS)):
            writer.write(frame)
    writer.release()


def test_a_visitor_arrives_stays_and_leaves(faces, tmp_path):
    clip = tmp_path / "visit.avi"
    _clip(clip, 1.0, 3.0, 3.0)
    events, gazes = [], []
    camera = Camera(str(clip))
    started = time.monotonic()
    perception = Perception(camera, faces, Engagement(EngagementSettings(60, 0.5, 1.5)), 5.0,
                            lambda e: events.append((time.monotonic() - started, e)), gazes.append)
    time.sleep(6.5)
    perception.close()
    camera.close()
    kinds = [type(e) for _, e in events]
    assert kinds[:2] == [VisitorArrived, VisitorLeft], events
    arrived, left = events[0][0], events[1][0]
    assert 1.2 <= arrived <= 2.8  # the face appears at 1 s and must stay 0.5 s
    assert 5.2 <= left <= 6.5  # it leaves at 4 s; gone for 1.5 s
    targets = [g for g in gazes if g is not None]
    assert targets and all(0.0 < x < 0.6 and -0.8 < y < 0.0 for x, y in targets)  # right of centre, upper half
    assert perception.latency_ms and np.median(perception.latency_ms) < 500


def test_camera_disappears_and_comes_back(tmp_path, caplog):
    source = tmp_path / "camera.avi"
    _clip(tmp_path / "ready.avi", 0.0, 2.0, 0.0)
    with caplog.at_level(logging.WARNING):
        camera = Camera(str(source))
        time.sleep(1.5)
        assert camera.latest() is None and not camera.connected  # nothing there yet
        shutil.copyfile(tmp_path / "ready.avi", source)
        deadline = time.monotonic() + 10
        while camera.latest() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert camera.connected and camera.latest()[1].shape == (720, 1280, 3)
        camera.close()
    said = [r.getMessage() for r in caplog.records if "camera" in r.getMessage()]
    back = next(i for i, m in enumerate(said) if "is back" in m)
    assert sum("camera lost" in m for m in said[:back]) == 1  # said once while retrying, not on every retry


@pytest.mark.parametrize("width, expected", [(40, []), (100, [VisitorArrived])])
def test_only_faces_large_enough_count_as_visitors(width, expected):
    from device.models.faces import Face

    engagement = Engagement(EngagementSettings(60, 0.5, 1.5))
    face = Face((100, 100, 100 + width, 100 + width), ((0, 0),) * 6, 0.9)
    events = [e for t in np.arange(0, 2, 0.2) for e in engagement.update([face], float(t), 1280, 720)]
    assert [type(e) for e in events] == expected

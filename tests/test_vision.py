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
from tests.conftest import FPS, visitor_clip


def clip_frames(path):
    """(media time, frame) of a video file, read by OpenCV as the camera reads it."""
    capture = cv2.VideoCapture(str(path))
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        yield capture.get(cv2.CAP_PROP_POS_MSEC) / 1000, frame
    capture.release()


def test_a_visitor_arrives_stays_and_leaves(faces, tmp_path):
    """Perception looks at the clip at 5 Hz of its own time (no wall clock), as the daemon's loop would."""
    clip = tmp_path / "visit.avi"
    visitor_clip(clip, 1.0, 3.0, 3.0)
    events, gazes = [], []
    perception = Perception(
        None, faces, Engagement(EngagementSettings(60, 0.5, 1.5)), 5.0, events.append, gazes.append, start=False
    )
    for index, (at, frame) in enumerate(clip_frames(clip)):
        if index % (FPS // 5) == 0:
            perception.observe((at, frame), at)
    kinds = [type(e) for e in events]
    assert kinds == [VisitorArrived, VisitorLeft], events
    arrived, left = events[0].at, events[1].at
    assert 1.4 <= arrived <= 1.8  # the face appears at 1 s and must stay 0.5 s
    assert 5.4 <= left <= 5.8  # it leaves at 4 s; gone for 1.5 s
    targets = [g for g in gazes if g is not None]
    assert targets and all(0.0 < x < 0.6 and -0.8 < y < 0.0 for x, y in targets)  # right of centre, upper half


def test_camera_disappears_and_comes_back(tmp_path, caplog):
    source = tmp_path / "camera.avi"
    visitor_clip(tmp_path / "ready.avi", 0.0, 2.0, 0.0)
    with caplog.at_level(logging.WARNING):
        camera = Camera(str(source))
        deadline = time.monotonic() + 10
        while camera.losses == 0 and time.monotonic() < deadline:  # it tried, and found nothing
            time.sleep(0.05)
        assert camera.latest() is None and not camera.connected
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

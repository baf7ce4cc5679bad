"""The perception loop: the newest camera frame, faces at a fixed rate, engagement events out."""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable

import numpy as np

from device.models.faces import FaceDetector
from device.vision.camera import Camera
from device.vision.engagement import Engagement

log = logging.getLogger(__name__)


class Perception:
    def __init__(
        self,
        camera: Camera,
        detector: FaceDetector,
        engagement: Engagement,
        rate_hz: float,
        on_event: Callable[[object], None],
        on_gaze: Callable[[tuple[float, float] | None], None],
        beat: Callable[[], None] = lambda: None,
        start: bool = True,
    ) -> None:
        """`start`: run the loop on its own thread (the daemon); tests call `observe` themselves."""
        self.camera, self.detector, self.engagement = camera, detector, engagement
        self.rate_hz, self.on_event, self.on_gaze, self.beat = rate_hz, on_event, on_gaze, beat
        self.latency_ms: collections.deque[float] = collections.deque(
            maxlen=1000
        )  # capture -> gaze target, the last frames
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="perception", daemon=True)
        if start:
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        last = None
        while not self._stop.wait(1 / self.rate_hz):
            self.beat()
            newest = self.camera.latest()
            if newest is not None and newest[0] == last:
                continue
            last = newest[0] if newest is not None else None
            self.observe(newest, time.monotonic())

    def observe(self, newest: tuple[float, np.ndarray] | None, now: float) -> None:
        """One look: the faces in the newest (capture time, frame), or none when the camera is gone at
        `now`; engagement events and the gaze target follow. The loop calls it at `rate_hz`."""
        if newest is None:
            events = self.engagement.lost_camera(now)
        else:
            captured, frame = newest
            faces = self.detector.detect(frame)
            events = self.engagement.update(faces, captured, frame.shape[1], frame.shape[0])
            self.latency_ms.append((time.monotonic() - captured) * 1000)
        self.on_gaze(self.engagement.target)
        for event in events:
            log.info("%s", type(event).__name__)
            self.on_event(event)

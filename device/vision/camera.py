"""Camera capture: a thread that keeps only the newest frame and reconnects when the camera goes.

Sources: a V4L2 index ("0"), a device or video file path, or a GStreamer pipeline (a CSI camera
through nvarguscamerasrc on a Jetson) when OpenCV was built with GStreamer. A file is read at its
own frame rate, like a camera. When reading fails the capture is released and reopened with a
backoff that grows until frames flow again for STEADY_S (a camera that opens but gives no frames, or
stalls, must not become a reopen loop); the loss is logged once, and the return once.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

log = logging.getLogger(__name__)
FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.5, 5.0
STEADY_S = 2.0  # frames flowing this long make the camera healthy again: the next loss is reopened at once


class Camera:
    def __init__(self, source: str, width: int = 1280, height: int = 720, fps: float = 30.0) -> None:
        self.source, self.width, self.height, self.fps = source, width, height, fps
        self.connected = False
        self.losses = 0
        self._frame: tuple[float, np.ndarray] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="camera", daemon=True)
        self._thread.start()

    @property
    def state(self) -> str:
        return f"{self.source} ({'connected' if self.connected else 'lost, reconnecting'})"

    def latest(self) -> tuple[float, np.ndarray] | None:
        """(capture time, BGR frame) of the newest frame, or None."""
        with self._lock:
            return self._frame

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _open(self):
        import cv2

        if self.source.isdigit():
            capture = cv2.VideoCapture(int(self.source), cv2.CAP_V4L2)
        elif "!" in self.source:
            capture = cv2.VideoCapture(self.source, cv2.CAP_GSTREAMER)
        else:
            capture = cv2.VideoCapture(self.source)
        if capture.isOpened() and self.source.isdigit():
            capture.set(cv2.CAP_PROP_FRAME_WIDTH, self.width)
            capture.set(cv2.CAP_PROP_FRAME_HEIGHT, self.height)
            capture.set(cv2.CAP_PROP_FPS, self.fps)
        return capture

    def _run(self) -> None:
        import cv2

        backoff = FIRST_BACKOFF_S
        while not self._stop.is_set():
            capture = self._open()
            if not capture.isOpened():
                capture.release()
                self._lost(f"cannot open {self.source}")
            else:
                flowing_since = self._read_frames(capture, cv2)
                capture.release()
                self._lost(f"{self.source} stopped delivering frames")
                if flowing_since is not None and time.monotonic() - flowing_since >= STEADY_S:
                    backoff = FIRST_BACKOFF_S
                    continue
            self._stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _read_frames(self, capture, cv2) -> float | None:
        """Keep the newest frame until reading fails; when the first frame came (None: none did)."""
        is_file = not self.source.isdigit() and "!" not in self.source
        period = 1 / (capture.get(cv2.CAP_PROP_FPS) or self.fps) if is_file else 0.0
        due, first = time.monotonic(), None
        while not self._stop.is_set():
            ok, frame = capture.read()
            if not ok:
                break
            first = first or time.monotonic()
            if not self.connected:
                log.warning("camera %s is back", self.source) if self.losses else log.info(
                    "camera %s connected", self.source
                )
                self.connected = True
            with self._lock:
                self._frame = (time.monotonic(), frame)
            if period:
                due += period
                self._stop.wait(max(0.0, due - time.monotonic()))
        return first

    def _lost(self, why: str) -> None:
        if self.connected or self.losses == 0:
            log.warning("camera lost (%s): the conversation goes on without gaze; reconnecting", why)
            self.losses += 1
        self.connected = False
        with self._lock:
            self._frame = None

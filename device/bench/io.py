"""`orin-avatar bench io`: microphone capture -> pipeline latency, and camera frame -> gaze latency."""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

import cv2
import numpy as np

from engines.errors import OrinAvatarError

from device.app import App
from device.bench.stats import percentiles_ms
from device.bundled import SAMPLE_PHOTO
from device.models import catalog
from device.vision.camera import Camera
from device.vision.engagement import Engagement
from device.vision.perception import Perception


def measure_io(app: App, seconds: float, camera: str | None = None) -> dict:
    """Microphone capture -> frame and camera frame -> gaze latencies over `seconds` each."""
    settings = app.settings
    return {
        "microphone": _microphone(settings.audio.input_device, seconds),
        "camera": _camera(camera or settings.camera.source, settings, app.store, seconds),
    }


def _microphone(device: str, seconds: float) -> dict:
    from device.sound.devices import Microphone

    try:
        microphone = Microphone(device)
    except OrinAvatarError as exc:
        return {"skipped": str(exc)}
    stop = threading.Event()
    threading.Timer(seconds, stop.set).start()
    frames = sum(1 for _ in microphone.frames(stop))
    microphone.close()
    return {
        "device": microphone.state,
        "frames": frames,
        "overflows": microphone.overflows,
        "capture_to_frame_ms": percentiles_ms([v / 1000 for v in microphone.latencies_ms]),
    }


def _camera(source: str, settings, store, seconds: float) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        if not source:
            source = str(Path(scratch) / "visitor.avi")
            _visitor_clip(Path(source), seconds)
        camera = Camera(source, settings.camera.width, settings.camera.height, settings.camera.fps)
        perception = Perception(
            camera,
            catalog.load_faces(store),
            Engagement(settings.camera.engagement()),
            settings.camera.detect_hz,
            lambda event: None,
            lambda gaze: None,
        )
        time.sleep(seconds)
        perception.close()
        camera.close()
    if not perception.latency_ms:
        return {"source": source, "skipped": "no frame arrived"}
    print(f"camera: {len(perception.latency_ms)} frames analysed", file=sys.stderr)
    return {
        "source": source,
        "detect_hz": settings.camera.detect_hz,
        "frame_to_gaze_ms": percentiles_ms([v / 1000 for v in perception.latency_ms]),
    }


def _visitor_clip(path: Path, seconds: float) -> None:
    """A 1280x720 30 fps clip of the bundled photo in a hall, as a stand-in camera."""
    frame = np.full((720, 1280, 3), 80, np.uint8)
    frame[100:612, 384:896] = cv2.imread(str(SAMPLE_PHOTO))
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 30, (1280, 720))
    for _ in range(int((seconds + 2) * 30)):
        writer.write(frame)
    writer.release()

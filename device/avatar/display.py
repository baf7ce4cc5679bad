"""Where avatar frames go: a fullscreen window, a video file, or nowhere.

OpenCV's window (Qt over xcb) aborts the whole process when there is no X display, which no
try/except can catch, so the window sink checks for a reachable X server first and the caller
falls back to a file or null sink with one log line. A window that fails later (the X server went
away) reports it through `show` returning False; the conversation goes on without a display.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
from pathlib import Path

import cv2
import numpy as np

from device.audio_file import write_wav

log = logging.getLogger(__name__)
WINDOW = "orin-avatar"


def x_display_reachable(display: str | None = None) -> bool:
    """Whether an X server answers on DISPLAY's local socket (the kiosk's display is local)."""
    display = display if display is not None else os.environ.get("DISPLAY", "")
    if not display.startswith(":"):
        return False
    number = display[1:].split(".")[0]
    path = f"/tmp/.X11-unix/X{number}"
    # Xorg and Xvfb also listen on the abstract socket of that name (Linux), which a service with
    # PrivateTmp= reaches although its /tmp has no X11-unix directory; libxcb tries it first too.
    for address in ("\0" + path, path):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(1.0)
                probe.connect(address)
            return True
        except OSError:
            continue
    return False


class NullSink:
    name = "null"

    def show(self, frame: np.ndarray) -> bool:
        return True

    def close(self) -> None:
        pass


class WindowSink:
    """A borderless fullscreen window; must be created and fed from the main thread."""

    name = "window"

    def __init__(self, width: int, height: int) -> None:
        cv2.namedWindow(WINDOW, cv2.WINDOW_NORMAL | cv2.WINDOW_GUI_NORMAL)
        cv2.moveWindow(WINDOW, 0, 0)
        cv2.resizeWindow(WINDOW, width, height)
        cv2.setWindowProperty(WINDOW, cv2.WND_PROP_FULLSCREEN, cv2.WINDOW_FULLSCREEN)

    def show(self, frame: np.ndarray) -> bool:
        try:
            cv2.imshow(WINDOW, frame)
            cv2.waitKey(1)
            return True
        except cv2.error as exc:
            log.error("the display failed (%s); the conversation goes on without it", exc)
            return False

    def close(self) -> None:
        cv2.destroyAllWindows()
        cv2.waitKey(1)


class VideoFileSink:
    """Frames to a video file; `close(audio)` muxes the reply audio in with ffmpeg when it is
    installed (MP4 or MKV), otherwise leaves the video and a WAV beside it."""

    name = "file"

    def __init__(self, path: Path, width: int, height: int, fps: float) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._silent = self.path.with_suffix(".video.avi")
        self._writer = cv2.VideoWriter(str(self._silent), cv2.VideoWriter_fourcc(*"MJPG"), fps, (width, height))
        if not self._writer.isOpened():
            raise OSError(f"OpenCV cannot write video to {self._silent}")
        self.frames = 0

    def show(self, frame: np.ndarray) -> bool:
        self._writer.write(frame)
        self.frames += 1
        return True

    def close(self, audio: np.ndarray | None = None, rate: int = 22050) -> list[Path]:
        """The files written: the video at `path` (with `audio` muxed in, when given) when ffmpeg is
        installed, else the video and a WAV beside it."""
        self._writer.release()
        wav = None
        if audio is not None:
            wav = self.path.with_suffix(".wav")
            write_wav(wav, audio, rate)
        ffmpeg = shutil.which("ffmpeg")
        if ffmpeg is None:
            log.warning("ffmpeg is not installed: the avatar video stays %s%s", self._silent, f" with its audio {wav}" if wav else "")
            return [self._silent] + ([wav] if wav else [])
        codec = ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "veryfast"] if self.path.suffix == ".mp4" else ["-c:v", "copy"]
        sound = ["-i", str(wav), "-c:a", "aac", "-shortest"] if wav else ["-an"]
        command = [ffmpeg, "-y", "-loglevel", "error", "-i", str(self._silent), *sound[:2], *codec, *sound[2:], str(self.path)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            log.warning("ffmpeg could not write %s (%s); the video stays %s", self.path, result.stderr.strip()[-300:], self._silent)
            return [self._silent] + ([wav] if wav else [])
        self._silent.unlink()
        if wav:
            wav.unlink()
        return [self.path]


def open_display(kind: str, width: int, height: int, fps: float, path: Path | None = None):
    """The sink asked for, or the best fallback with one log line saying why."""
    if kind == "window":
        if x_display_reachable():
            return WindowSink(width, height)
        log.warning("no X display at DISPLAY=%r: the avatar is not shown%s", os.environ.get("DISPLAY", ""),
                    f"; writing it to {path}" if path else "")
        kind = "file" if path else "null"
    if kind == "file" and path is not None:
        return VideoFileSink(path, width, height, fps)
    return NullSink()

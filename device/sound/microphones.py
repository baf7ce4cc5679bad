"""Microphones: where the conversation's sound comes from, each run on the microphone thread.

`DeviceMicrophone` is the configured sound card (device/sound/devices.py), `FileMicrophone` a recorded
visit played at a microphone's pace (the daemon's `run --mic`, the soak); with `[audio] array_channels`
each is heard through its array's beam, steered from any thread. `run` hands every frame or block to
`feed` (the conversation's), with when it was captured and its on-axis level when known.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from engines.errors import InputError
from engines.model_specs import FRAME, SPEECH_RATE

from device.audio_file import read_audio, read_channels
from device.settings import AudioSettings
from device.sound.beamformer import MicArray, SteeredBeam
from device.sound.devices import Microphone
from device.sound.echo_room import BLOCK, EchoRoom

# feed(samples, captured_at=None, on_axis_db=None): the conversation's microphone input
Feed = Callable[..., None]


class MicrophoneClock:
    """Hands audio over no faster than a microphone would deliver it (or at once if not realtime)."""

    def __init__(self, realtime: bool) -> None:
        self.realtime = realtime
        self._due = time.monotonic()

    def wait(self, samples: int = FRAME) -> None:
        """Until the microphone would have the next `samples`."""
        if not self.realtime:
            return
        self._due += samples / SPEECH_RATE
        delay = self._due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            self._due = time.monotonic()  # fell behind: do not try to catch up in a burst

    def pieces(self, audio: np.ndarray, size: int) -> Iterator[np.ndarray]:
        """`audio` in pieces of `size` samples (a sound card's blocks), each when the microphone would have it."""
        for start in range(0, len(audio), size):
            piece = audio[start : start + size]
            self.wait(len(piece))
            yield piece


def _array(settings: AudioSettings) -> MicArray | None:
    channels = settings.array_channels
    return (
        MicArray.circular(len(channels), settings.array_radius_mm / 1000, settings.array_first_deg)
        if channels
        else None
    )


class FileMicrophone:
    """A WAV file played into the conversation at the microphone's pace, then silence (or again from
    the start, with `loop`: the soak benchmark's endless visit). With `[audio] array_channels`, the
    file is an array's recording, and its beam is heard."""

    def __init__(self, path: Path, settings: AudioSettings, loop: bool = False) -> None:
        self.path = path
        self.loop = loop
        self.array = _array(settings)
        if self.array is None:
            self.audio = read_audio(path)[None]
        else:
            recorded = read_channels(path)
            if max(settings.array_channels) >= len(recorded):
                raise InputError(
                    f"{path} has {len(recorded)} channels; [audio] array_channels "
                    f"{list(settings.array_channels)} asks for more: "
                    "give the array's recording, or set array_channels = []"
                )
            self.audio = recorded[list(settings.array_channels)]
        self._beam = SteeredBeam(self.array) if self.array is not None else None
        self.state = f"file {path}" + (f" ({self.array.count}-microphone array)" if self.array is not None else "")
        self.room: EchoRoom | None = None  # the speaker's sound joins the file's on the way in, if set

    def steer(self, azimuth_rad: float, elevation_rad: float = 0.0) -> None:
        """From any thread: where the recording's array beam should point."""
        if self._beam is not None:
            self._beam.steer(azimuth_rad, elevation_rad)

    def run(self, feed: Feed, warming_up: Callable[[], bool], beat: Callable[[], None], stop: threading.Event) -> None:
        clock = MicrophoneClock(realtime=True)
        silence = np.zeros((len(self.audio), FRAME), np.float32)
        length = self.audio.shape[1]
        position = 0
        while not stop.is_set():
            if self.loop and position + FRAME > length:
                position = 0
            if warming_up():  # the visit starts once the robot listens
                sound = silence
            else:
                sound = self.audio[:, position : position + FRAME] if position + FRAME <= length else silence
                position += FRAME
            if self.room is not None:  # the room is the sound card: 10 ms blocks, each with when it was taken
                for block in clock.pieces(sound[0], BLOCK):
                    feed(self.room.capture(block), self.room.captured_at)
            elif self._beam is None:
                clock.wait()
                feed(sound[0])
            else:  # the beam gives a frame for a frame, a hop late
                clock.wait()
                frame = self._beam.process(sound)
                feed(frame, None, self._beam.frame_on_axis_db())
            beat()
        self.state = f"file {self.path} (stopped)"


class DeviceMicrophone:
    """The configured sound card, through PyAudio; with an array, its beam steered where it is told."""

    def __init__(self, settings: AudioSettings) -> None:
        self.array = _array(settings)
        self.device = Microphone(settings.input_device, array=self.array, array_channels=settings.array_channels)
        self.state, self.steer = self.device.state, self.device.steer

    def run(self, feed: Feed, warming_up: Callable[[], bool], beat: Callable[[], None], stop: threading.Event) -> None:
        try:
            for frame in self.device.frames(stop):
                feed(frame, self.device.captured_at, self.device.on_axis_db)
                beat()
        finally:
            self.device.close()

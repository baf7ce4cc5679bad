"""Sound cards through PyAudio: choosing a device by name or index, capture into a ring buffer,
playback with a clock, and the list `orin-avatar devices` prints.

The capture callback only copies bytes into a bounded ring (it never blocks and never computes);
resampling to 16 kHz mono (soxr, streaming) happens in the reader's thread. A full ring drops the
oldest audio and counts it, logged once a second at most.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from engines.errors import OrinAvatarError

from engines.model_specs import FRAME, SPEECH_RATE
from device.sound.speakers import Speaker

log = logging.getLogger(__name__)
RING_SECONDS = 4.0
TRAILING_SILENCE_S = 0.15  # played after the last chunk so the last syllable is not cut by the device


class DeviceError(OrinAvatarError):
    """A sound device that does not exist or cannot be opened."""


@dataclass(frozen=True)
class SoundDevice:
    index: int
    name: str
    inputs: int
    outputs: int
    rate: int


def list_devices(audio=None) -> list[SoundDevice]:
    audio = audio or _pyaudio()
    found = []
    for i in range(audio.get_device_count()):
        info = audio.get_device_info_by_index(i)
        found.append(SoundDevice(i, info["name"], int(info["maxInputChannels"]), int(info["maxOutputChannels"]),
                                 int(info["defaultSampleRate"])))
    return found


def choose(devices: list[SoundDevice], wanted: str, direction: str) -> SoundDevice:
    """By index ("2"), by (part of) its name, or "default"; the error lists what there is."""
    usable = [d for d in devices if (d.inputs if direction == "input" else d.outputs) > 0]
    if not usable:
        raise DeviceError(f"there is no audio {direction} device on this machine (PyAudio sees none); "
                          "plug one in and check 'arecord -l' / 'aplay -l'")
    if wanted.isdigit():
        match = [d for d in usable if d.index == int(wanted)]
    else:
        match = [d for d in usable if d.name == wanted] or [d for d in usable if wanted.lower() in d.name.lower()]
    if not match:
        names = ", ".join(f"{d.index}: {d.name}" for d in usable)
        raise DeviceError(f"no audio {direction} device {wanted!r}; there are: {names}")
    return match[0]


def _pyaudio():
    import pyaudio

    return pyaudio.PyAudio()


class Microphone:
    """Capture from a device at its native rate and channels; `frames()` yields 16 kHz mono frames."""

    def __init__(self, wanted: str = "default", block: int = 1024) -> None:
        import pyaudio

        self._audio = _pyaudio()
        self.device = choose(list_devices(self._audio), wanted, "input")
        self.rate = self.device.rate
        self.channels = min(2, self.device.inputs)
        self._ring: collections.deque[tuple[float, bytes]] = collections.deque(maxlen=max(2, int(RING_SECONDS * self.rate / block)))
        self.latencies_ms: collections.deque[float] = collections.deque(maxlen=1000)  # block captured -> frame out
        self._ready = threading.Condition()
        self.overflows = 0
        self._last_warning = 0.0
        self._stream = self._audio.open(format=pyaudio.paInt16, channels=self.channels, rate=self.rate, input=True,
                                        input_device_index=self.device.index, frames_per_buffer=block,
                                        stream_callback=self._callback)
        self.state = f"{self.device.name} ({self.rate} Hz, {self.channels} ch)"

    def _callback(self, data, frame_count, time_info, status):
        import pyaudio

        if len(self._ring) == self._ring.maxlen:
            self.overflows += 1
        self._ring.append((time.monotonic(), data))
        with self._ready:
            self._ready.notify()
        return None, pyaudio.paContinue

    def frames(self, stop: threading.Event) -> Iterator[np.ndarray]:
        import soxr

        resampler = soxr.ResampleStream(self.rate, SPEECH_RATE, 1, dtype="float32")
        pending = np.zeros(0, np.float32)
        seen = 0
        while not stop.is_set():
            with self._ready:
                if not self._ring:
                    self._ready.wait(0.1)
            for _ in range(len(self._ring)):  # what is there now: a fast device must not starve the reader
                captured, data = self._ring.popleft()
                block = np.frombuffer(data, np.int16).astype(np.float32) / 32768
                mono = block.reshape(-1, self.channels).mean(axis=1)
                pending = np.concatenate([pending, resampler.resample_chunk(mono)])
            if self.overflows != seen and time.monotonic() - self._last_warning > 1:
                log.warning("microphone overflow: %d blocks dropped so far (the reader fell behind)", self.overflows)
                seen, self._last_warning = self.overflows, time.monotonic()
            while len(pending) >= FRAME:
                self.latencies_ms.append((time.monotonic() - captured) * 1000)
                yield pending[:FRAME]
                pending = pending[FRAME:]

    def close(self) -> None:
        self._stream.stop_stream()
        self._stream.close()
        self._audio.terminate()


class DeviceSpeaker(Speaker):
    """Playback on a sound card. Blocking writes pace it at the device's rate, so the playback clock
    (`played`) counts samples the device has taken; after a reply's last chunk a little silence is
    played so the device does not cut the last syllable."""

    def __init__(self, sample_rate: int, wanted: str = "default") -> None:
        import pyaudio

        self._audio = _pyaudio()
        self.device = choose(list_devices(self._audio), wanted, "output")
        self._stream = self._audio.open(format=pyaudio.paInt16, channels=1, rate=sample_rate, output=True,
                                        output_device_index=self.device.index)
        self.state = f"{self.device.name} ({sample_rate} Hz)"
        super().__init__(sample_rate)

    def _write(self, samples: np.ndarray) -> None:
        self._stream.write((np.clip(samples, -1, 1) * 32767).astype(np.int16).tobytes())

    def _finished_chunk(self, last: bool) -> None:
        if last:
            self._write(np.zeros(int(TRAILING_SILENCE_S * self.sample_rate), np.float32))

    def close(self) -> None:
        super().close()
        self._stream.stop_stream()
        self._stream.close()
        self._audio.terminate()

"""Sound cards through PyAudio: choosing a device by name or index, capture into a ring buffer,
playback with a clock, and the list `orin-avatar devices` prints.

Both directions run in PortAudio's callback mode. The capture callback only copies bytes into a
bounded ring (it never blocks and never computes); resampling to 16 kHz mono (soxr, streaming), and
a microphone array's beamforming, happen in the reader's thread. A full ring drops the oldest audio
and counts it, logged once a second at most. The playback callback takes what the speaker's thread
queued (silence when there is nothing: the card never runs dry between replies). Each callback comes
with the card's own time of its buffer (PortAudio's ADC and DAC times), which the echo canceller
places its far end by.
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

from device.sound.beamformer import HOP, MicArray, SteeredBeam
from device.sound.speakers import BLOCK_SECONDS, Speaker, fade_of

log = logging.getLogger(__name__)
RING_SECONDS = 4.0
# A microphone without an array gives 10 ms blocks (the card's period too): a sound over a reply is
# judged on each as it comes (the listening stage), not once a 32 ms frame is whole; with an array, frames,
# whose on-axis level the beam gives per frame.
CAPTURE_BLOCK_S = 0.01
TRAILING_SILENCE_S = 0.15  # played after the last chunk so the last syllable is not cut by the device
CARD_STALLED_S = 2.0  # a card whose callback takes nothing for this long has stopped
CALLBACK_S = 0.01  # the playback callback's buffer: a stop is heard within about this much more


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
        found.append(
            SoundDevice(
                i,
                info["name"],
                int(info["maxInputChannels"]),
                int(info["maxOutputChannels"]),
                int(info["defaultSampleRate"]),
            )
        )
    return found


def choose(devices: list[SoundDevice], wanted: str, direction: str) -> SoundDevice:
    """By index ("2"), by (part of) its name, or "default"; the error lists what there is."""
    usable = [d for d in devices if (d.inputs if direction == "input" else d.outputs) > 0]
    if not usable:
        raise DeviceError(
            f"there is no audio {direction} device on this machine (PyAudio sees none); "
            "plug one in and check 'arecord -l' / 'aplay -l'"
        )
    if wanted.isdigit():
        match = [d for d in usable if d.index == int(wanted)]
    else:
        match = [d for d in usable if d.name == wanted] or [d for d in usable if wanted.lower() in d.name.lower()]
    if not match:
        names = ", ".join(f"{d.index}: {d.name}" for d in usable)
        raise DeviceError(f"no audio {direction} device {wanted!r}; there are: {names}")
    return match[0]


def check_array_channels(device: SoundDevice, channels: tuple[int, ...]) -> None:
    """A microphone array's channels must be among the device's inputs."""
    if max(channels) >= device.inputs:
        raise DeviceError(
            f"[audio] array_channels {list(channels)}: {device.name} has {device.inputs} input channels "
            f"(0-{device.inputs - 1}); list its microphones' channels among them (`orin-avatar devices` "
            "shows each device's channels), or [] for one microphone"
        )


def _pyaudio():
    import pyaudio

    return pyaudio.PyAudio()


class Microphone:
    """Capture from a device at its native rate and channels; `frames()` yields 16 kHz mono audio: its
    first two channels averaged in 10 ms blocks, or with an array, the beam of its microphones' channels
    in FRAME-sample frames."""

    def __init__(
        self, wanted: str = "default", array: MicArray | None = None, array_channels: tuple[int, ...] = ()
    ) -> None:
        import pyaudio

        self._audio = _pyaudio()
        self.device = choose(list_devices(self._audio), wanted, "input")
        self.rate = self.device.rate
        block = max(1, int(self.rate * CAPTURE_BLOCK_S))  # the card's period: a block comes every 10 ms
        self.array, self.array_channels = array, array_channels
        if array is not None:
            if len(array_channels) != array.count:
                raise ValueError(f"{array.count} microphones in the array, {len(array_channels)} channels given")
            try:
                check_array_channels(self.device, array_channels)
            except DeviceError:
                self._audio.terminate()
                raise
        self.channels = max(array_channels) + 1 if array is not None else min(2, self.device.inputs)
        self._beam = SteeredBeam(array) if array is not None else None  # the reader's; others only steer it
        # (arrival, ADC time of its first sample or 0 when the card gives none, the block)
        self._ring: collections.deque[tuple[float, float, bytes]] = collections.deque(
            maxlen=max(2, int(RING_SECONDS * self.rate / block))
        )
        self.captured_at: float | None = None  # ADC time of the first sample of the frame `frames` last gave
        self.on_axis_db: float | None = None  # with an array, that frame's level in the beam over the microphones'
        self.latencies_ms: collections.deque[float] = collections.deque(maxlen=1000)  # block captured -> frame out
        self._ready = threading.Condition()
        self.overflows = 0
        self._last_warning = 0.0
        self._stream = self._audio.open(
            format=pyaudio.paInt16,
            channels=self.channels,
            rate=self.rate,
            input=True,
            input_device_index=self.device.index,
            frames_per_buffer=block,
            stream_callback=self._callback,
        )
        heard = (
            f"{self.channels} ch"
            if array is None
            else f"{array.count}-microphone array on channels {list(array_channels)}"
        )
        self.state = f"{self.device.name} ({self.rate} Hz, {heard})"

    def steer(self, azimuth_rad: float, elevation_rad: float = 0.0) -> None:
        """From any thread: where the array's beam should point. Without an array there is nothing to steer."""
        if self._beam is not None:
            self._beam.steer(azimuth_rad, elevation_rad)

    def _callback(self, data, frame_count, time_info, status):
        import pyaudio

        if len(self._ring) == self._ring.maxlen:
            self.overflows += 1
        self._ring.append((time.monotonic(), time_info["input_buffer_adc_time"], data))
        with self._ready:
            self._ready.notify()
        return None, pyaudio.paContinue

    def frames(self, stop: threading.Event) -> Iterator[np.ndarray]:
        """16 kHz mono audio as it comes (10 ms blocks; with an array, frames); after each, `captured_at`
        is its first sample's ADC time and, with an array, `on_axis_db` how much of it came from where
        the beam points."""
        import soxr

        picked = list(self.array_channels) if self.array is not None else None
        resampler = soxr.ResampleStream(
            self.rate, SPEECH_RATE, len(picked) if picked else 1, dtype="float32"
        )  # keeps the signal's timing
        beam = self._beam
        pending = np.zeros(0, np.float32)
        seen = 0
        fed = given = 0  # device samples into the resampler, 16 kHz samples out of this generator
        lag = HOP if beam else 0  # the beam comes out this many 16 kHz samples after its input
        piece = FRAME if beam else int(SPEECH_RATE * CAPTURE_BLOCK_S)
        anchor: tuple[int, float] | None = None  # a device sample and its ADC time
        while not stop.is_set():
            with self._ready:
                if not self._ring:
                    self._ready.wait(0.1)
            for _ in range(len(self._ring)):  # what is there now: a fast device must not starve the reader
                captured, adc_time, data = self._ring.popleft()
                block = np.frombuffer(data, np.int16).astype(np.float32).reshape(-1, self.channels) / 32768
                sound = block[:, picked] if picked else block.mean(axis=1)
                anchor = (fed, adc_time) if adc_time > 0 else None
                fed += len(sound)
                resampled = resampler.resample_chunk(sound)
                pending = np.concatenate([pending, beam.process(resampled.T) if beam else resampled])
            if self.overflows != seen and time.monotonic() - self._last_warning > 1:
                log.warning("microphone overflow: %d blocks dropped so far (the reader fell behind)", self.overflows)
                seen, self._last_warning = self.overflows, time.monotonic()
            while len(pending) >= piece:
                self.latencies_ms.append((time.monotonic() - captured) * 1000)
                self.captured_at = (
                    anchor[1] + ((given - lag) * self.rate / SPEECH_RATE - anchor[0]) / self.rate if anchor else None
                )
                self.on_axis_db = beam.frame_on_axis_db() if beam else None
                yield pending[:piece]
                given += piece
                pending = pending[piece:]

    def close(self) -> None:
        self._stream.stop_stream()
        self._stream.close()
        self._audio.terminate()


class DeviceSpeaker(Speaker):
    """Playback on a sound card. The speaker's thread queues blocks (`_write` blocks while a block is
    already waiting, which paces it at the device's rate, so the playback clock `played` counts samples
    the device is about to take); the card's callback takes them, or silence. The taps get each buffer
    the card takes (silence included) with its DAC time. After a reply's last chunk a little silence
    is queued, so `busy` lasts until the last syllable has been played. A hold is done in the
    callback (`_fade_queued`)."""

    def __init__(self, sample_rate: int, wanted: str = "default") -> None:
        import pyaudio

        self._audio = _pyaudio()
        self.device = choose(list_devices(self._audio), wanted, "output")
        self._queued: collections.deque[np.ndarray] = collections.deque()
        self._queued_samples = 0
        self._room = threading.Condition()
        self._first = True  # the card's first buffer is still to come
        self._faded = False  # the callback's: it has faded out since the hold began
        self._ahead = int(sample_rate * BLOCK_SECONDS)  # queued beyond this, `_write` waits
        super().__init__(sample_rate)
        self._stream = self._audio.open(
            format=pyaudio.paInt16,
            channels=1,
            rate=sample_rate,
            output=True,
            output_device_index=self.device.index,
            frames_per_buffer=int(sample_rate * CALLBACK_S),
            stream_callback=self._fill,
        )
        self.state = f"{self.device.name} ({sample_rate} Hz)"

    def stop(self) -> None:
        super().stop()
        with self._room:  # what was queued goes too (a block being queued now sees the stop: `_write`)
            self._queued.clear()
            self._queued_samples = 0
            self._room.notify_all()

    def _hand(self, samples: np.ndarray, fresh: bool) -> None:
        """The taps are called from the card's callback instead, with each buffer's DAC time."""
        self._write(samples)

    def _fade_out(self, samples: np.ndarray, fresh: bool) -> None:
        """The callback fades out what is queued, where the card is: `samples` stay for the resume."""

    def _write(self, samples: np.ndarray) -> None:
        waited = 0.0
        with self._room:
            while self._queued_samples >= self._ahead and not self._stop.is_set():
                if waited >= CARD_STALLED_S:  # the callback stopped (a card unplugged): the reply is dropped, said once
                    raise DeviceError(f"{self.device.name} has taken no sound for {CARD_STALLED_S:.0f} s")
                self._room.wait(0.1)
                waited += 0.1
            if not self._stop.is_set():
                self._queued.append(np.clip(samples, -1, 1).astype(np.float32))
                self._queued_samples += len(samples)

    def _fill(self, data, count: int, time_info: dict, status: int):
        """PortAudio's callback: the next `count` samples the card plays."""
        import pyaudio

        out = np.zeros(count, np.float32)
        filled = 0
        held = self._held.is_set()  # once: a hold set meanwhile must not cut this buffer off without its fade
        with self._room:
            if held:
                self._fade_queued(out)
            else:
                self._faded = False
            while filled < count and self._queued and not held:
                block = self._queued[0]
                take = min(count - filled, len(block))
                out[filled : filled + take] = block[:take]
                if take == len(block):
                    self._queued.popleft()
                else:
                    self._queued[0] = block[take:]
                filled += take
            self._queued_samples -= filled
            self._room.notify_all()
        at = time_info["output_buffer_dac_time"]
        for tap in self.taps:  # silence too: the taps follow the card's output sample by sample
            tap(out, self._first, at if at > 0 else None)
        self._first = False
        return (out * 32767).astype(np.int16).tobytes(), pyaudio.paContinue

    def _fade_queued(self, out: np.ndarray) -> None:
        """Held: the first buffer after the hold is a fade of what comes next (kept queued, played again
        whole on resume), then silence. Done here rather than by the speaker's thread, so a hold is heard
        within the card's own latency, not after the block or two queued ahead of it as well."""
        if self._faded:
            return
        if self._queued:
            faded = fade_of(np.concatenate(list(self._queued))[: len(out)], self.sample_rate)
            out[: len(faded)] = faded
        self._faded = True

    def _finished_chunk(self, last: bool) -> None:
        if last:  # a block at a time, like the reply, so `busy` ends as the silence is played
            for _ in range(round(TRAILING_SILENCE_S / BLOCK_SECONDS)):
                self._write(np.zeros(self._ahead, np.float32))

    def close(self) -> None:
        super().close()
        self._stream.stop_stream()
        self._stream.close()
        self._audio.terminate()

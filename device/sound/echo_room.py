"""A room between the robot's speaker and its microphone, for tests, benchmarks and replayed visits.

What the speaker plays reaches the microphone a few milliseconds later, a little clipped by a small
loudspeaker driven hard, coloured by the room (an impulse response from pyroomacoustics: a shoebox
hall, the speaker a few centimetres from the microphone), and mixed with what the visitor says, all
on the microphone's sample clock (`PlaybackTimeline`, with the sound card's buffer and the path's
delay as latency). The echo's level is set relative to the visitor's speech (0 to +12 dB: the
speaker is much closer to the microphone than the visitor).

The speaker's thread calls `play`, the microphone's thread `capture`; the room owns its echo buffer
behind a lock (the two threads only ever append to it and read from it).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from engines.errors import InputError
from engines.model_specs import SPEECH_RATE

from device.audio_file import resample
from device.sound.playback_timeline import PlaybackTimeline, far_end_resampler
from device.sound.speakers import CARD_BUFFER_S

ACTIVE_DB = -40.0  # 10 ms blocks above this level (dBFS) count as speech when levels are measured
# The sound card's buffer: what the speaker is handed is heard this much later at least, on top of
# the path's delay (a 2-period ALSA/PulseAudio output at 20 ms periods).
DEVICE_BUFFER_MS = CARD_BUFFER_S * 1000
# The microphone's gain on the mix: recorded visits peak at -6 dBFS, and an echo 12 dB over them would
# clip; a kiosk's microphone gain is set for its own loud speaker, so the visitor is quieter than that.
MIC_GAIN = 10 ** (-12 / 20)


@dataclass(frozen=True)
class EchoPath:
    """How the speaker's sound reaches the microphone."""

    echo_db: float = 6.0  # echo level over the visitor's speech level, dB
    delay_ms: float = 20.0  # from the sound card's output to the microphone, beyond DEVICE_BUFFER_MS
    rt60_s: float = 0.5  # the hall's reverberation time
    clip: float = 0.7  # the loudspeaker clips above this fraction of full scale (1: no clipping)
    seed: int = 0

    def __post_init__(self) -> None:
        if not -20 <= self.echo_db <= 30:
            raise InputError(f"echo level {self.echo_db} dB is out of range: use -20..30 dB over the visitor")
        if not 0 <= self.delay_ms <= 500:
            raise InputError(f"echo delay {self.delay_ms} ms is out of range: use 0..500 ms")


BLOCK = SPEECH_RATE // 100  # 10 ms


def block_power(audio: np.ndarray) -> np.ndarray:
    """Mean power of each whole 10 ms block."""
    return np.mean(audio[: len(audio) // BLOCK * BLOCK].reshape(-1, BLOCK).astype(np.float64) ** 2, axis=1)


def active_rms(audio: np.ndarray) -> float:
    """RMS over the 10 ms blocks that carry sound (speech level, not diluted by pauses)."""
    power = block_power(audio)
    active = power[power > 10 ** (ACTIVE_DB / 10)]
    return float(np.sqrt(active.mean())) if active.size else 0.0


def room_response(rt60_s: float, seed: int) -> np.ndarray:
    """Impulse response from the speaker to the microphone, 16 kHz, normalised to a unit direct path."""
    try:
        import pyroomacoustics as pra
    except ImportError:
        raise InputError("the echo room needs pyroomacoustics: pip install 'orin-avatar[rooms]'") from None

    rng = np.random.default_rng(seed)
    size = np.array([8.0, 6.0, 3.5]) * rng.uniform(0.85, 1.15, 3)
    absorption, max_order = pra.inverse_sabine(rt60_s, size)
    room = pra.ShoeBox(size, fs=SPEECH_RATE, materials=pra.Material(absorption), max_order=min(max_order, 30))
    mic = size * np.array([0.5, 0.3, 0.0]) + np.array([0.0, 0.0, 1.5])
    room.add_source(mic + np.array([0.0, 0.06, -0.1]))  # the speaker just below the microphone
    room.add_microphone(mic)
    room.compute_rir()
    response = np.asarray(room.rir[0][0], np.float64)
    return (response / np.max(np.abs(response))).astype(np.float32)


class EchoRoom:
    """Mixes the speaker's sound into the microphone's frames."""

    def __init__(
        self,
        path: EchoPath,
        visitor_rms: float,
        reference_reply: np.ndarray,
        speaker_rate: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`visitor_rms`: the visitor's speech level (`active_rms`); `reference_reply`: a reply at the
        speaker's rate whose echo is set `path.echo_db` over it."""
        self.path = path
        self.speaker_rate = speaker_rate
        self._response = room_response(path.rt60_s, path.seed)
        reference = self._through_room(resample(reference_reply, speaker_rate, SPEECH_RATE))
        if visitor_rms <= 0 or active_rms(reference) <= 0:
            raise InputError("the echo room needs a visitor and a reference reply that are not silent")
        self._gain = visitor_rms * 10 ** (path.echo_db / 20) / active_rms(reference)
        self._lock = threading.Lock()
        self._echo = np.zeros(0, np.float32)  # echo still to be heard, from microphone sample `position` on
        self._path_delay = int(path.delay_ms * SPEECH_RATE / 1000)
        self._timeline = PlaybackTimeline(int(DEVICE_BUFFER_MS * SPEECH_RATE / 1000) + self._path_delay, clock=clock)
        # The room's clock, which its device times are on: seconds of microphone samples. Like a sound
        # card's, it tells the echo canceller where each block plays (`play`) and when each frame was
        # taken, so the far end goes where its echo is, not where the speaker's and the microphone's
        # threads, each late in its own way under load, make it seem (docs/lab/bargein.md).
        self.captured_at = 0.0
        self._resampler = far_end_resampler(speaker_rate)

    @property
    def heard_until(self) -> int:
        """Microphone sample at which the last block played stops being heard (its direct sound)."""
        return self._timeline.next

    @property
    def position(self) -> int:
        """Microphone samples captured so far."""
        return self._timeline.captured

    def _through_room(self, audio: np.ndarray) -> np.ndarray:
        """16 kHz samples as the microphone hears them from the speaker (at unit gain)."""
        clipped = np.clip(audio, -self.path.clip, self.path.clip)
        return np.convolve(clipped, self._response).astype(np.float32)

    def play(self, samples: np.ndarray) -> float | None:
        """Samples handed to the speaker now (at its rate), heard where the timeline puts them: the room is
        the sound card here, which runs dry by the clock, whatever the speaker thinks. Returns the block's
        DAC time on the room's clock (`captured_at`'s), as a card's callback gives it (None: too short to
        come out of the resampler yet)."""
        audio = self._resampler.resample_chunk(samples.astype(np.float32))
        if not len(audio):
            return None
        echo = self._through_room(audio) * self._gain
        with self._lock:
            heard_from = self._timeline.place(len(audio))
            start = heard_from - self._timeline.captured
            end = start + len(echo)
            if len(self._echo) < end:
                self._echo = np.concatenate([self._echo, np.zeros(end - len(self._echo), np.float32)])
            self._echo[start:end] += echo
        return (heard_from - self._path_delay) / SPEECH_RATE

    def capture(self, visitor: np.ndarray) -> np.ndarray:
        """The microphone's next frame: the visitor's samples plus the echo due now. Its first sample's ADC
        time is then `captured_at`."""
        count = len(visitor)
        with self._lock:
            echo = np.pad(self._echo[:count], (0, max(0, count - len(self._echo))))
            self._echo = self._echo[count:]
            self.captured_at = self._timeline.captured / SPEECH_RATE
            self._timeline.capture(count)
        return ((visitor + echo) * MIC_GAIN).astype(np.float32)

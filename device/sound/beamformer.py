"""Steering a microphone array toward the visitor: a superdirective beamformer.

The only thing the robot knows about where the visitor is comes from the camera (the direction of
their face), and a hall's talk reaches the array from every direction, which is close to a diffuse
field. For that case the beamformer with the least noise for a given look direction is MVDR against
diffuse noise (superdirective): per frequency, w = G^-1 d / (d^H G^-1 d), with G the diffuse field's
coherence between the microphones (sinc of their distance) and d the look direction's steering
vector. A kiosk array is a few centimetres across, where delay-and-sum hardly beats one microphone
below 2 kHz; the superdirective weights do, at the price of amplifying the microphones' own noise,
which the diagonal loading keeps in check. Closed-form weights and a short-time Fourier transform are
a few lines of numpy; the libraries that have beamformers (pyroomacoustics, acoular) are offline
analysis tools that a robot does not install, so it is written here.
"""

from __future__ import annotations

import collections
import queue
from dataclasses import dataclass

import numpy as np

from engines.model_specs import FRAME, SPEECH_RATE

SOUND_SPEED = 343.0  # m/s, in air at 20 degrees C
FFT = 512  # 32 ms at 16 kHz: the frequency resolution the weights are given in
HOP = FFT // 2  # half-overlapping square-root Hann windows add up to one
LOADING = 0.01  # diagonal loading of the coherence matrix (white noise gain against directivity)
STEER_STEP_DEG = 10.0  # a smaller turn changes little of what the beam hears, and each is an echo path change
SPEECH_BAND_HZ = (200.0, 4000.0)  # where `on_axis_db` is measured: speech's energy, and the array's directivity


@dataclass(frozen=True)
class MicArray:
    """Where the microphones are, in metres from the array's centre: x to the robot's right, y ahead
    (toward the visitor in front of it), z up."""

    positions: np.ndarray  # (microphones, 3)

    @classmethod
    def circular(cls, count: int, radius_m: float, first_deg: float = 0.0) -> "MicArray":
        """The usual USB array: `count` microphones evenly on a horizontal circle, the first in the
        direction `first_deg`, the others following clockwise seen from above."""
        if count < 2 or radius_m <= 0:
            raise ValueError(
                f"a microphone array needs 2 or more microphones and a radius over 0 m, got {count} and {radius_m} m"
            )
        azimuths = np.radians(first_deg) + 2 * np.pi * np.arange(count) / count
        return cls(radius_m * np.stack([np.sin(azimuths), np.cos(azimuths), np.zeros(count)], axis=1))

    @property
    def count(self) -> int:
        return len(self.positions)


def look_direction(azimuth_rad: float, elevation_rad: float = 0.0) -> np.ndarray:
    """The unit vector toward a source at this azimuth (0: straight ahead, positive: to the robot's
    right) and elevation (positive: up)."""
    return np.array(
        [
            np.sin(azimuth_rad) * np.cos(elevation_rad),
            np.cos(azimuth_rad) * np.cos(elevation_rad),
            np.sin(elevation_rad),
        ]
    )


def direction_angles(direction: np.ndarray) -> tuple[float, float]:
    """The azimuth and elevation (radians) of a unit vector: `look_direction`'s inverse."""
    return float(np.arctan2(direction[0], direction[1])), float(np.arcsin(np.clip(direction[2], -1, 1)))


def superdirective_weights(array: MicArray, direction: np.ndarray, rate: int, loading: float = LOADING) -> np.ndarray:
    """Per FFT bin, the weights (bins, microphones) that pass a far-field source in `direction`
    unchanged and let through the least of a diffuse field."""
    frequencies = np.fft.rfftfreq(FFT, 1 / rate)
    lead = array.positions @ direction / SOUND_SPEED  # how much earlier each microphone hears the source
    steering = np.exp(2j * np.pi * frequencies[:, None] * lead[None, :])
    distances = np.linalg.norm(array.positions[:, None] - array.positions[None, :], axis=-1)
    coherence = np.sinc(2 * frequencies[:, None, None] * distances[None] / SOUND_SPEED) + loading * np.eye(array.count)
    solved = np.linalg.solve(coherence, steering[..., None])[..., 0]
    return solved / np.sum(steering.conj() * solved, axis=1, keepdims=True).conj()


class Beamformer:
    """Multichannel microphone frames in, one channel out, steered where it is told. The output lags
    the input by `HOP` samples (16 ms at 16 kHz): the overlap of the windows.

    Each hop given out also gets its `on_axis_db`: the beam's level over the microphones' own in the
    speech band. What comes from where the beam points passes whole (about 0 dB); a hall's talk from
    everywhere loses its directivity (-5 dB and less), so it tells the visitor's speech from the
    hall's even where the two are equally loud."""

    def __init__(self, array: MicArray, rate: int, loading: float = LOADING) -> None:
        self.array, self.rate, self.loading = array, rate, loading
        self._window = np.sqrt(np.hanning(FFT + 1)[:FFT])  # periodic: its squares at half overlap sum to one
        self._history = np.zeros((array.count, HOP), np.float32)
        self._pending = np.zeros((array.count, 0), np.float32)
        self._tail = np.zeros(HOP, np.float64)
        frequencies = np.fft.rfftfreq(FFT, 1 / rate)
        self._band = (frequencies >= SPEECH_BAND_HZ[0]) & (frequencies <= SPEECH_BAND_HZ[1])
        self.on_axis_db: collections.deque[float] = collections.deque()  # one per hop given out, for the caller to take
        self.steer(0.0)

    def steer(self, azimuth_rad: float, elevation_rad: float = 0.0) -> None:
        self._weights = superdirective_weights(
            self.array, look_direction(azimuth_rad, elevation_rad), self.rate, self.loading
        )

    def process(self, frames: np.ndarray) -> np.ndarray:
        """`frames` (microphones, samples) -> the beam, a sample for each one taken in once a whole
        hop of them is in; each comes out `HOP` samples late."""
        if frames.ndim != 2 or frames.shape[0] != self.array.count:
            raise ValueError(f"expected frames of {self.array.count} channels, got shape {frames.shape}")
        self._pending = np.concatenate([self._pending, frames.astype(np.float32)], axis=1)
        out = []
        while self._pending.shape[1] >= HOP:
            hop, self._pending = self._pending[:, :HOP], self._pending[:, HOP:]
            spectrum = np.fft.rfft(np.concatenate([self._history, hop], axis=1) * self._window, axis=1)
            self._history = hop
            beam_spectrum = np.sum(self._weights.conj() * spectrum.T, axis=1)
            microphones = np.mean(np.abs(spectrum[:, self._band]) ** 2)
            self.on_axis_db.append(
                float(10 * np.log10((np.mean(np.abs(beam_spectrum[self._band]) ** 2) + 1e-20) / (microphones + 1e-20)))
            )
            beam = np.fft.irfft(beam_spectrum, FFT) * self._window
            out.append((self._tail + beam[:HOP]).astype(np.float32))
            self._tail = beam[HOP:]
        return np.concatenate(out) if out else np.zeros(0, np.float32)


class SteeredBeam:
    """A microphone reader's beamformer and the directions other threads send it: turned, at the next
    `process`, to the newest one once that is `STEER_STEP_DEG` or more from where it points (every
    turn changes the echo path the canceller after it follows). Straight ahead until told."""

    def __init__(self, array: MicArray) -> None:
        self._beamformer = Beamformer(array, SPEECH_RATE)
        self._steering: queue.SimpleQueue[tuple[float, float]] = queue.SimpleQueue()
        self._pointing = look_direction(0.0)

    def steer(self, azimuth_rad: float, elevation_rad: float = 0.0) -> None:
        """From any thread."""
        self._steering.put((azimuth_rad, elevation_rad))

    def process(self, sound: np.ndarray) -> np.ndarray:
        wanted = None
        while not self._steering.empty():
            wanted = self._steering.get_nowait()
        if wanted is not None:
            direction = look_direction(*wanted)
            if np.degrees(np.arccos(np.clip(direction @ self._pointing, -1, 1))) >= STEER_STEP_DEG:
                self._beamformer.steer(*wanted)
                self._pointing = direction
        return self._beamformer.process(sound)

    def frame_on_axis_db(self) -> float:
        """The on-axis level of the next FRAME of beam handed out: the mean of its hops' (the beam is
        handed out in whole hops, two to a frame)."""
        hops = self._beamformer.on_axis_db
        return float(np.mean([hops.popleft() for _ in range(FRAME // HOP)]))

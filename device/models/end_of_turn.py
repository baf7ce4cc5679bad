"""Smart Turn v3: has the visitor finished speaking, judged from the audio of the utterance so far
and the silence after it (as its authors' runtime feeds it).

The model reads Whisper-style log-mel features of the last 8 s (earlier audio is dropped, shorter
audio is zero-padded in front, as pipecat, its authors' runtime, does) and gives the probability
that the turn is complete. The features are computed here with numpy: the same math as Hugging
Face's `WhisperFeatureExtractor` (80 Slaney mel bins, 25 ms periodic Hann window, 10 ms hop,
log10 clipped 8 decades below the peak, scaled to about [-1, 1]), without pulling in transformers
and torch for one spectrogram; tests/test_end_of_turn.py checks it against transformers.
"""

from __future__ import annotations

import time
from functools import lru_cache

import numpy as np

from engines.model_specs import END_OF_TURN_FEATURES, SPEECH_RATE
from engines.runner import Runner

from device.messages import EndOfTurnVerdict

WINDOW = 8 * SPEECH_RATE  # samples the model sees
N_FFT, HOP = 400, 160
MELS = END_OF_TURN_FEATURES[0]


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, np.float64)
    return np.where(hz < 1000, 3 * hz / 200, 15 + np.log(np.maximum(hz, 1e-9) / 1000) * 27 / np.log(6.4))


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    return np.where(mel < 15, 200 * mel / 3, 1000 * np.exp((mel - 15) * np.log(6.4) / 27))


@lru_cache(maxsize=1)
def mel_filters() -> np.ndarray:
    """(N_FFT/2+1, MELS) triangular filters with Slaney area normalisation."""
    edges = _mel_to_hz(np.linspace(_hz_to_mel(0), _hz_to_mel(SPEECH_RATE / 2), MELS + 2))
    bins = np.linspace(0, SPEECH_RATE / 2, N_FFT // 2 + 1)
    slopes = edges[None, :] - bins[:, None]
    down = -slopes[:, :-2] / np.diff(edges)[:-1]
    up = slopes[:, 2:] / np.diff(edges)[1:]
    return np.maximum(0, np.minimum(down, up)) * (2 / (edges[2:] - edges[:-2]))[None, :]


def log_mel(audio: np.ndarray) -> np.ndarray:
    """(MELS, 800) features of exactly WINDOW samples of 16 kHz audio."""
    x = np.asarray(audio, np.float32)
    x = (x - x.mean()) / np.sqrt(x.var() + 1e-7)
    padded = np.pad(x.astype(np.float64), N_FFT // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP]
    power = np.abs(np.fft.rfft(frames * np.hanning(N_FFT + 1)[:-1], axis=-1)) ** 2
    spectrum = np.log10(np.maximum(1e-10, power @ mel_filters())).T[:, :-1]
    return ((np.maximum(spectrum, spectrum.max() - 8) + 4) / 4).astype(np.float32)


def last_window(audio: np.ndarray) -> np.ndarray:
    """The last 8 s of `audio`, zero-padded in front when shorter."""
    audio = np.asarray(audio, np.float32)[-WINDOW:]
    return np.pad(audio, (WINDOW - len(audio), 0))


class EndOfTurnDetector:
    """Judges an utterance so far; `threshold` is the probability from which it counts as finished."""

    def __init__(self, runner: Runner, threshold: float = 0.5, clock=time.monotonic) -> None:
        self.runner = runner
        self.threshold = threshold
        self.clock = clock

    def warm_up(self) -> None:
        """The first call is the slow one (ONNX Runtime plans its memory): not at a visitor's pause."""
        self.probability(np.zeros(WINDOW, np.float32))

    def feeds(self, audio: np.ndarray) -> dict[str, np.ndarray]:
        return {"input_features": log_mel(last_window(audio))[None]}

    def probability(self, audio: np.ndarray) -> float:
        return float(self.runner.infer(self.feeds(audio))["logits"].reshape(-1)[0])

    def judge(self, audio: np.ndarray, speech_end: int) -> EndOfTurnVerdict:
        """The verdict on the utterance whose speech ends at stream sample `speech_end`."""
        started = self.clock()
        probability = self.probability(audio)
        return EndOfTurnVerdict(
            speech_end, probability, probability >= self.threshold, round((self.clock() - started) * 1000, 1)
        )

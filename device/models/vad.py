"""Silero VAD: speech probability for each 32 ms frame of 16 kHz audio."""

from __future__ import annotations

import numpy as np

from engines.runner import Runner

FRAME = 512  # samples per frame at 16 kHz (32 ms), what Silero VAD v5+ is trained on
CONTEXT = 64  # samples of the previous frame that the model sees in front of each frame


class VoiceActivityDetector:
    """Streaming: call `probability` frame after frame; `reset` between unrelated streams."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), np.float32)
        self._context = np.zeros(CONTEXT, np.float32)

    def feeds(self, frame: np.ndarray) -> dict[str, np.ndarray]:
        """The model's inputs for `frame` in the current stream state (calibration records them)."""
        frame = np.asarray(frame, np.float32)
        if frame.shape != (FRAME,):
            raise ValueError(f"a VAD frame is {FRAME} samples at 16 kHz, got shape {frame.shape}")
        return {"input": np.concatenate([self._context, frame])[None, :], "state": self._state}

    def probability(self, frame: np.ndarray) -> float:
        out = self.runner.infer(self.feeds(frame))
        self._state = out["stateN"]
        self._context = np.asarray(frame, np.float32)[-CONTEXT:]
        return float(out["output"][0, 0])

    def probabilities(self, audio: np.ndarray) -> np.ndarray:
        """One probability per whole frame of `audio` (a trailing partial frame is dropped)."""
        self.reset()
        frames = len(audio) // FRAME
        return np.array([self.probability(audio[i * FRAME:(i + 1) * FRAME]) for i in range(frames)], np.float32)

"""Silero VAD: speech probability for each 32 ms frame of 16 kHz audio."""

from __future__ import annotations

import numpy as np

from engines.model_specs import FRAME, VAD_CONTEXT, VAD_STATE
from engines.runner import Runner


class VoiceActivityDetector:
    """Streaming: call `probability` frame after frame; `reset` between unrelated streams."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros(VAD_STATE, np.float32)
        self._context = np.zeros(VAD_CONTEXT, np.float32)

    def feeds(self, frame: np.ndarray) -> dict[str, np.ndarray]:
        """The model's inputs for `frame` in the current stream state (calibration records them)."""
        frame = np.asarray(frame, np.float32)
        if frame.shape != (FRAME,):
            raise ValueError(f"a VAD frame is {FRAME} samples at 16 kHz, got shape {frame.shape}")
        return {"input": np.concatenate([self._context, frame])[None, :], "state": self._state}

    def probability(self, frame: np.ndarray) -> float:
        out = self.runner.infer(self.feeds(frame))
        self._state = out["stateN"]
        self._context = np.asarray(frame, np.float32)[-VAD_CONTEXT:]
        return float(out["output"][0, 0])

    def probabilities(self, audio: np.ndarray) -> np.ndarray:
        """One probability per whole frame of `audio` (a trailing partial frame is dropped)."""
        self.reset()
        frames = len(audio) // FRAME
        return np.array([self.probability(audio[i * FRAME : (i + 1) * FRAME]) for i in range(frames)], np.float32)

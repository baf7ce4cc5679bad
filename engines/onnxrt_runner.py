"""ONNX Runtime on the CPU: the runner every model can fall back to.

ONNX Runtime's CPU arena keeps every region it has grown to and never gives it back: recognition and
synthesis see new tensor shapes on almost every call, so a daemon's memory ratchets up over days
(microsoft/onnxruntime#11627; measured here: the voice alone went from 354 to 407 MB over 120
sentences). The run option "memory.enable_memory_arena_shrinkage" (onnxruntime_run_options_config_keys.h)
returns the regions a run leaves unused; it costs that run fresh pages, so a runner asks for it at most
every SHRINK_EVERY_S (the voice stays at about 150 MB, synthesis time within noise).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from engines.errors import RunnerError
from engines.runner import Feeds, Runner


SHRINK_EVERY_S = 30.0


class OnnxRuntimeRunner(Runner):
    """Runs an ONNX file with ONNX Runtime's CPU execution provider."""

    def __init__(self, name: str, path: Path, threads: int = 1, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(name)
        self.path = path
        self.threads = threads
        self.clock = clock
        self._session = None
        self._outputs: list[str] = []
        self._shrink = None  # run options that give the arena's unused regions back
        self._shrunk_at = float("-inf")

    @property
    def kind(self) -> str:
        return "cpu"

    @property
    def backend(self) -> str:
        return "onnxruntime-cpu"

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self._session.get_inputs()]

    def _activate(self) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(
                str(self.path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # ORT raises several unrelated exception types
            raise RunnerError(
                f"ONNX Runtime could not load {self.name} from {self.path}: {exc}. "
                "Run 'orin-avatar models sync' to repair the model store."
            ) from exc
        self._outputs = [o.name for o in self._session.get_outputs()]
        self._shrink = ort.RunOptions()
        self._shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def _infer(self, feeds: Feeds) -> dict[str, np.ndarray]:
        options, now = None, self.clock()
        if now - self._shrunk_at >= SHRINK_EVERY_S:
            options, self._shrunk_at = self._shrink, now
        try:
            values = self._session.run(self._outputs, dict(feeds), options)
        except Exception as exc:
            raise RunnerError(f"{self.name} inference failed on ONNX Runtime: {exc}") from exc
        return dict(zip(self._outputs, values))

    def _release(self) -> None:
        self._session = None

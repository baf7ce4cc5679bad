"""ONNX Runtime on the CPU: the runner every model can fall back to."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engines.errors import RunnerError
from engines.runner import Feeds, Runner


class OnnxRuntimeRunner(Runner):
    """Runs an ONNX file with ONNX Runtime's CPU execution provider."""

    def __init__(self, name: str, path: Path, threads: int = 1) -> None:
        super().__init__(name)
        self.path = path
        self.threads = threads
        self._session = None
        self._outputs: list[str] = []

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

    def _infer(self, feeds: Feeds) -> dict[str, np.ndarray]:
        try:
            values = self._session.run(self._outputs, dict(feeds))
        except Exception as exc:
            raise RunnerError(f"{self.name} inference failed on ONNX Runtime: {exc}") from exc
        return dict(zip(self._outputs, values))

    def _release(self) -> None:
        self._session = None

"""The Runner seam: every model runs behind this one small interface.

Model wrappers (VAD, ASR, ...) hold a Runner and never ask which backend it is; the ONNX Runtime
and TensorRT runners are siblings. The lifecycle is enforced here once, like Polygraphy's
`BaseRunner`: `activate` loads and allocates, `infer` maps input names to arrays, `release`
frees; `with runner:` does both ends.
"""

from __future__ import annotations

import abc
from typing import Mapping

import numpy as np

from engines.errors import RunnerError

Feeds = Mapping[str, np.ndarray]


class Runner(abc.ABC):
    """One model on one backend."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.is_active = False

    @property
    @abc.abstractmethod
    def backend(self) -> str:
        """Short label for logs and reports, e.g. 'onnxruntime-cpu'."""

    @property
    @abc.abstractmethod
    def kind(self) -> str:
        """Where calls run now: "cpu" (ONNX Runtime) or "tensorrt"."""

    def activate(self) -> None:
        if self.is_active:
            return
        self._activate()
        self.is_active = True

    def infer(self, feeds: Feeds) -> dict[str, np.ndarray]:
        if not self.is_active:
            raise RunnerError(f"runner for {self.name} used before activate()")
        return self._infer(feeds)

    def release(self) -> None:
        if self.is_active:
            self._release()
            self.is_active = False

    @property
    @abc.abstractmethod
    def input_names(self) -> list[str]:
        """Names of the model's inputs, valid once active."""

    def __enter__(self) -> "Runner":
        self.activate()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    @abc.abstractmethod
    def _activate(self) -> None: ...

    @abc.abstractmethod
    def _infer(self, feeds: Feeds) -> dict[str, np.ndarray]: ...

    @abc.abstractmethod
    def _release(self) -> None: ...

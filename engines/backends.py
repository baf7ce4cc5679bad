"""Choosing the runner for a model: the one place that knows which backends exist.

Today every model runs on ONNX Runtime's CPU provider; the TensorRT engine and its fallback slot
in here without the model wrappers noticing.
"""

from __future__ import annotations

from engines.onnxrt_runner import OnnxRuntimeRunner
from engines.runner import Runner
from engines.store.model_store import ModelStore


def open_runner(store: ModelStore, model_file: str, threads: int = 1) -> Runner:
    """An activated runner for a model of the store, e.g. 'asr-encoder.onnx'."""
    runner = OnnxRuntimeRunner(model_file.removesuffix(".onnx"), store.path(model_file), threads=threads)
    runner.activate()
    return runner

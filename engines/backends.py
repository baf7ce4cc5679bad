"""Choosing the runner for a model: the one place that knows which backends exist.

Without an engine manager (or where TensorRT cannot run) a model runs on ONNX Runtime's CPU
provider. With one, it gets a fallback runner that serves from the CPU at once and switches to
its TensorRT engine when the engine is found or built and validated.
"""

from __future__ import annotations

from engines.fallback import FallbackRunner
from engines.model_specs import MODELS
from engines.onnxrt_runner import OnnxRuntimeRunner
from engines.runner import Runner
from engines.store.model_store import ModelStore


def open_runner(store: ModelStore, model_file: str, threads: int = 1, engines=None) -> Runner:
    """An activated runner for a model of the store, e.g. 'asr-encoder.onnx'.

    `engines` is an `engines.engine_manager.EngineManager` or None (CPU only)."""
    name = model_file.removesuffix(".onnx")
    cpu = OnnxRuntimeRunner(name, store.path(model_file), threads=threads)
    policy = MODELS.get(name)
    if engines is None or engines.unavailable or policy is None or policy.cpu_reason:
        cpu.activate()
        return cpu
    runner = FallbackRunner(name, cpu, policy.deadline_ms)
    runner.activate()
    engines.serve(runner, model_file)
    return runner

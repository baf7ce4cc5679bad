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


def open_runner(store: ModelStore, name: str, threads: int = 1, engines=None) -> Runner:
    """An activated runner for the model `name` of `engines.model_specs.MODELS`, e.g. "asr-encoder".

    `engines` is an `engines.engine_manager.EngineManager` or None (CPU only)."""
    spec = MODELS[name]
    cpu = OnnxRuntimeRunner(name, store.path(spec.model), threads=threads)
    if engines is None or engines.unavailable or spec.cpu_reason:
        cpu.activate()
        return cpu
    runner = FallbackRunner(name, cpu, spec.deadline_ms)
    runner.activate()
    engines.serve(runner, name)
    return runner

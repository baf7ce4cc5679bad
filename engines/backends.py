"""Choosing the runner for a model: the one place that knows which backends exist.

Without an engine manager (or where TensorRT cannot run) a model runs on ONNX Runtime's CPU
provider. With one, it gets a fallback runner that serves from the CPU at once and switches to
its TensorRT engine when the engine is found or built and validated. Either way the CPU runner
keeps ONNX Runtime's optimized graph in the model store, so later loads skip the optimizing.
"""

from __future__ import annotations

from pathlib import Path

from engines.fallback import FallbackRunner
from engines.model_specs import MODELS
from engines.onnxrt_runner import OnnxRuntimeRunner, optimized_name
from engines.runner import Runner
from engines.store.model_store import ModelStore

OPTIMIZED_DIR = "onnxruntime"  # in the model store: this machine's optimized graphs (engines/onnxrt_runner.py)


def open_runner(store: ModelStore, name: str, threads: int = 1, engines=None) -> Runner:
    """An activated runner for the model `name` of `engines.model_specs.MODELS`, e.g. "asr-encoder".

    `engines` is an `engines.engine_manager.EngineManager` or None (CPU only)."""
    spec = MODELS[name]
    optimized = store.root / OPTIMIZED_DIR / optimized_name(Path(spec.model), store.entries()[spec.model].sha256)
    cpu = OnnxRuntimeRunner(name, store.path(spec.model), threads=threads, optimized=optimized)
    if engines is None or engines.unavailable or spec.cpu_reason:
        cpu.activate()
        return cpu
    runner = FallbackRunner(name, cpu, spec.deadline_ms)
    runner.activate()
    engines.serve(runner, name)
    return runner

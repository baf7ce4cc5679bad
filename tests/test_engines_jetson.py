"""The engine scenarios against real TensorRT and CUDA, on an Orin: `pytest -m jetson tests`.

Deselected elsewhere (pytest.ini); these are the same code paths test_engines.py drives through
the simulator, with NVIDIA's library underneath.
"""

from __future__ import annotations

import numpy as np
import pytest

from engines.engine_manager import EngineManager, EngineSettings
from engines.fallback import FallbackRunner
from engines.model_specs import MODELS
from engines.onnxrt_runner import OnnxRuntimeRunner
from engines.platform import probe_platform
from engines.tensorrt_runner import TensorRTRunner

from tests.table_maker import make_table

pytestmark = pytest.mark.jetson
SETTINGS = EngineSettings(
    enabled=True,
    precision="auto",
    dla_core=-1,
    workspace_mb=1024,
    tactic_dram_mb=2048,
    optimization_level=3,
    build_timeout_s=1800,
)


@pytest.fixture(scope="module")
def platform():
    found = probe_platform()
    assert found.usable, found.problem
    return found


@pytest.mark.parametrize("name", ["vad", "face", "text", "asr-encoder"])
def test_build_validate_and_reuse(platform, store, tmp_path, name):
    make_table(store, name, tmp_path)
    engines = EngineManager(store, tmp_path / "engines", SETTINGS, tmp_path)
    outcome = engines.ensure(name)
    assert outcome.engine is not None, outcome.reasons
    assert outcome.record.validation["worst_cosine"] >= MODELS[name].min_cosine
    lines = []
    assert (
        EngineManager(store, tmp_path / "engines", SETTINGS, tmp_path).ensure(name, report=lines.append).engine
        == outcome.engine
    )
    assert any("cached" in line for line in lines)


def test_corrupt_engine_is_rebuilt(platform, store, tmp_path):
    make_table(store, "face", tmp_path)
    engines = EngineManager(store, tmp_path / "engines", SETTINGS, tmp_path)
    outcome = engines.ensure("face")
    outcome.engine.write_bytes(outcome.engine.read_bytes()[:1000])
    assert EngineManager(store, tmp_path / "engines", SETTINGS, tmp_path).ensure("face").record.status == "valid"


def test_dla_engine_with_gpu_fallback(platform, store, tmp_path):
    if platform.dla_cores == 0:
        pytest.fail("this Jetson reports no DLA core")
    make_table(store, "face", tmp_path)
    outcome = EngineManager(store, tmp_path / "engines", SETTINGS, tmp_path).ensure("face", dla_core=0)
    assert outcome.engine is not None and "layers_on_gpu" in outcome.record.validation


def test_fallback_runner_on_the_real_engine(platform, store, tmp_path):
    make_table(store, "face", tmp_path)
    outcome = EngineManager(store, tmp_path / "engines", SETTINGS, tmp_path).ensure("face")
    runner = FallbackRunner("face", OnnxRuntimeRunner("face", store.path("face.onnx")), MODELS["face"].deadline_ms)
    with runner:
        runner.attach(TensorRTRunner("face", outcome.engine, precision=outcome.precision))
        out = runner.infer(MODELS["face"].golden())
        assert runner.snapshot().engine_calls == 1 and all(np.isfinite(v).all() for v in out.values())


# The fixes of docs/integrator/tensorrt.md on the real library (the simulator's versions: tests/test_tensorrt_fixes.py).


def test_asr_encoder_engine_loads_in_a_fresh_process(platform, store, tmp_path):
    import subprocess
    import sys

    outcome = EngineManager(store, tmp_path / "engines", SETTINGS, tmp_path).ensure("asr-encoder", precision="fp16")
    assert outcome.engine is not None, outcome.reasons
    code = (
        "from engines.tensorrt_runner import TensorRTRunner; "
        f"r = TensorRTRunner('asr-encoder', {str(outcome.engine)!r}); "
        "r.activate(); r.release(); print('loaded')"
    )
    assert "loaded" in subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600).stdout


def test_qdq_model_parses_and_plan_matches_the_build(platform, store, tmp_path):
    from engines.plan import plan

    from calibration import TABLES_DIR

    planned = {p.model: p.runs_on for p in plan(store, TABLES_DIR, platform.tensorrt)}
    engines = EngineManager(store, tmp_path / "engines", SETTINGS, TABLES_DIR)
    for name in ("vad", "face", "text", "asr-encoder"):
        outcome = engines.ensure(name)
        assert planned[name] == f"TensorRT {outcome.precision}", (name, outcome.reasons)


def test_no_builder_in_the_probe_and_dla_only_for_static_models(platform, store, tmp_path):
    import dataclasses

    if platform.dla_cores == 0:
        pytest.fail("this Jetson reports no DLA core")
    settings = dataclasses.replace(SETTINGS, dla_core=0)
    outcome = EngineManager(store, tmp_path / "engines", settings, tmp_path).ensure("text", precision="fp16")
    assert outcome.engine is not None and outcome.record.components["dla_core"] is None


def test_set_shape_raises_runtime_error(platform):
    import tensorrt as trt

    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    with pytest.raises(RuntimeError):
        builder.create_optimization_profile().set_shape("x", (1, 16), (1, 8), (1, 4))


def test_runners_share_the_primary_context(platform, store, tmp_path):
    outcome = EngineManager(store, tmp_path / "engines", SETTINGS, tmp_path).ensure("face", precision="fp16")
    first, second = TensorRTRunner("face", outcome.engine), TensorRTRunner("face", outcome.engine)
    with first, second:
        first.infer(MODELS["face"].golden())
        second.infer(MODELS["face"].golden())
        assert first._context.handle == second._context.handle

"""The engine scenarios against real TensorRT and CUDA, on an Orin: `pytest -m jetson tests`.

Deselected elsewhere (pytest.ini); these are the same code paths test_engines.py drives through
the simulator, with NVIDIA's library underneath.
"""

from __future__ import annotations

import numpy as np
import pytest

from engines.engine_manager import EngineManager, EngineSettings
from engines.fallback import FallbackRunner
from engines.model_policy import POLICIES
from engines.onnxrt_runner import OnnxRuntimeRunner
from engines.platform import probe_platform
from engines.tensorrt_runner import TensorRTRunner
from tests.table_maker import make_table

pytestmark = pytest.mark.jetson
SETTINGS = EngineSettings(enabled=True, precision="auto", dla_core=-1, workspace_mb=1024, optimization_level=3,
                          build_timeout_s=1800)


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
    assert outcome.record.validation["worst_cosine"] >= POLICIES[name].min_cosine
    lines = []
    assert EngineManager(store, tmp_path / "engines", SETTINGS, tmp_path).ensure(name, report=lines.append).engine == outcome.engine
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
    runner = FallbackRunner("face", OnnxRuntimeRunner("face", store.path("face.onnx")), POLICIES["face"].deadline_ms)
    with runner:
        runner.attach(TensorRTRunner("face", outcome.engine, precision=outcome.precision))
        out = runner.infer(POLICIES["face"].golden())
        assert runner.stats.engine_calls == 1 and all(np.isfinite(v).all() for v in out.values())

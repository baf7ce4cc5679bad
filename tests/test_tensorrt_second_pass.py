"""The second review of engines/ against NVIDIA's files (the TensorRT second-pass issue), each finding
through the grounded simulator (tests/trt_sim), numbered as in the issue."""

from __future__ import annotations

import dataclasses
import importlib
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engines import trt_builder
from engines.engine_cache import EngineCache
from engines.engine_manager import RETRY_AFTER_S, EngineManager
from engines.model_specs import MODELS
from engines.plan import plan
from engines.tensorrt_runner import TensorRTRunner
from engines.tensorrt_support import refusals

from tests.conftest import SETTINGS, SIM_PATH, manager, unload_tensorrt
from tests.table_maker import make_table
from tests.test_tensorrt_fixes import engine_header

VERSIONS = ("8.6.2", "10.3.0", "11.4.1")


def simulated(version: str, monkeypatch):
    monkeypatch.setenv("TRT_SIM_VERSION", version)
    monkeypatch.syspath_prepend(SIM_PATH)
    unload_tensorrt()
    return importlib.import_module("tensorrt")


def parses(trt, path) -> tuple[bool, str]:
    logger = trt.Logger()
    builder = trt.Builder(logger)
    network = builder.create_network(0 if int(trt.__version__.split(".")[0]) >= 10 else 1)
    parser = trt.OnnxParser(network, logger)
    ok = parser.parse_from_file(str(path))
    return ok, "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))


@pytest.mark.parametrize("version", VERSIONS)
def test_1_the_plan_and_the_parser_agree_on_every_store_model(store, tmp_path, monkeypatch, version):
    """end-of-turn keeps Smart Turn's asymmetric UINT8 quantization: refused on every version (the plan
    said fp16 on 8.6 and fp32 on 11.4 before); every other model parses, as the plan says."""
    trt = simulated(version, monkeypatch)
    try:
        for spec in MODELS.values():
            if spec.cpu_reason:
                continue
            refused = refusals(onnx.load(str(store.path(spec.model))), version)
            ok, errors = parses(trt, store.path(spec.model))
            assert ok == (not refused), (spec.name, version, errors, refused)
        (end_of_turn,) = [p for p in plan(store, tmp_path, version) if p.model == "end-of-turn"]
        assert end_of_turn.runs_on == "CPU" and "only symmetric quantization" in end_of_turn.reason
    finally:
        unload_tensorrt()


def _quantized_model(path, zero_point: int, kind=TensorProto.INT8) -> None:
    """x -> QuantizeLinear -> DequantizeLinear -> MatMul(w) -> y, the zero point given."""
    weights = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    scale = numpy_helper.from_array(np.array(0.02, np.float32), "scale")
    zero = helper.make_tensor("zero", kind, [], [zero_point])
    graph = helper.make_graph(
        [
            helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"], name="quantize"),
            helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["dq"], name="dequantize"),
            helper.make_node("MatMul", ["dq", "w"], ["y"], name="matmul"),
        ],
        "quantized",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [weights, scale, zero],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _request(path, precision: str, quantized: bool, tmp_path) -> trt_builder.BuildRequest:
    return trt_builder.BuildRequest(
        model="quantized.onnx",
        onnx_path=str(path),
        precision=precision,
        calibration_cache=None,
        dla_core=None,
        profile={},
        workspace_mb=256,
        tactic_dram_mb=512,
        optimization_level=1,
        timing_cache=None,
        output=str(tmp_path / "out.engine"),
        quantized=quantized,
    )


@pytest.mark.parametrize("version", ["8.6.2", "10.3.0"])
def test_1_a_pre_quantized_model_builds_only_with_int8_set_on_8_and_10(tmp_path, monkeypatch, version):
    simulated(version, monkeypatch)
    try:
        path = tmp_path / "quantized.onnx"
        _quantized_model(path, 0)
        assert refusals(onnx.load(str(path)), version) == []
        with pytest.raises(trt_builder.EngineBuildError, match="could not build"):
            trt_builder.build_engine(_request(path, "fp16", False, tmp_path), lambda line: None)
        for precision in ("int8", "fp16", "fp32"):  # the builder sets INT8 for its Q/DQ on every rung
            trt_builder.build_engine(_request(path, precision, True, tmp_path), lambda line: None)
            assert (tmp_path / "out.engine").stat().st_size > 0
    finally:
        unload_tensorrt()


@pytest.mark.parametrize("version", VERSIONS)
def test_1_asymmetric_zero_points_are_refused_by_both_unsigned_zeros_read_as_int8(tmp_path, monkeypatch, version):
    trt = simulated(version, monkeypatch)
    try:
        shifted, unsigned = tmp_path / "shifted.onnx", tmp_path / "unsigned.onnx"
        _quantized_model(shifted, 3)
        _quantized_model(unsigned, 0, TensorProto.UINT8)
        ok, errors = parses(trt, shifted)
        assert not ok and "symmetric quantization" in errors
        assert "non-zero" in str(refusals(onnx.load(str(shifted)), version)[0])
        ok, errors = parses(trt, unsigned)
        assert ok and refusals(onnx.load(str(unsigned)), version) == [], errors
    finally:
        unload_tensorrt()


def test_4_the_dla_gets_only_int8_and_fp16_rungs_and_only_cores_that_exist(trt, store, tmp_path, tables, monkeypatch):
    settings = dataclasses.replace(SETTINGS, dla_core=0)
    seen = []
    fp32 = manager(store, tmp_path, tables, settings).ensure("face", precision="fp32", report=seen.append)
    assert fp32.engine is not None and fp32.record.components["dla_core"] is None  # was a GPU engine labelled dla0
    assert any("fp32 rung runs on the GPU (the DLA runs only FP16 and INT8)" in line for line in seen)
    fp16 = manager(store, tmp_path, tables, settings).ensure("face", precision="fp16")
    assert fp16.record.components["dla_core"] == 0
    assert not any(name.startswith("Reformatting") for name in fp16.record.validation["layers_on_gpu"])
    (face,) = [p for p in plan(store, tables, "10.3.0", dla=True) if p.model == "face"]
    assert "fp32 rung on the GPU: the DLA runs only FP16 and INT8" in face.notes

    monkeypatch.setenv("TRT_SIM_DLA_CORES", "1")
    unload_tensorrt()
    importlib.import_module("tensorrt")
    seen = []
    other = dataclasses.replace(SETTINGS, dla_core=1)
    outcome = manager(store, tmp_path / "one", tables, other).ensure("face", precision="fp16", report=seen.append)
    assert outcome.engine is not None and outcome.record.components["dla_core"] is None
    assert any("DLA core 1 was asked for, but this device has 1 DLA core(s)" in line for line in seen)


def test_5_one_logger_for_the_process_and_plugins_registered_once(trt, store, tmp_path, tables):
    """Each runner made its own logger and registered the plugins with it; the plugin library keeps the
    pointer of the last one, which dangled once that runner was released."""
    from engines.platform import probe_platform

    probe_platform()
    built = manager(store, tmp_path, tables).ensure("face", precision="fp16")  # built in a child process
    for _ in range(3):
        with TensorRTRunner("face", built.engine, precision="fp16") as runner:
            runner.infer(MODELS["face"].golden())
    assert trt.SIM.plugin_registrations == 1 and len(set(trt.SIM.loggers)) == 1


def test_6_a_damaged_timing_cache_never_fails_a_build_and_others_timings_are_kept(trt, store, tmp_path, tables):
    engines = manager(store, tmp_path, tables)
    path = engines.cache.timing_cache_path(engines.key(MODELS["face"], "fp16", None).platform)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x00 half a timing cache, cut by a power loss")
    outcome = engines.ensure("face", precision="fp16")
    assert outcome.engine is not None, outcome.reasons  # was: TypeError from set_timing_cache(None), a failed rung

    config = trt.Builder(trt.Logger()).create_builder_config()
    trt_builder._load_timing_cache(config, str(path))
    config.get_timing_cache().entries["this build"] = "fp16"
    path.write_text(json.dumps({"version": trt.__version__, "entries": {"a build that ended meanwhile": "int8"}}))
    trt_builder._save_timing_cache(config, path)
    assert {"this build", "a build that ended meanwhile"} <= set(json.loads(path.read_text())["entries"])


def test_3_a_killed_build_is_tried_again_after_a_back_off_a_refusal_never(trt, store, tmp_path, tables, monkeypatch):
    now = [1_000_000.0]
    engines = EngineManager(store, tmp_path / "engines", SETTINGS, tables, clock=lambda: now[0])
    monkeypatch.setenv("TRT_SIM_CRASH", "build")  # SIGKILL inside the build, as the OOM killer does
    first = engines.ensure("face", precision="fp16")
    assert first.engine is None and "killed by SIGKILL" in first.reasons[0]
    record = EngineCache(tmp_path / "engines").records()[0]
    assert record.attempts == 1 and record.retry_after == now[0] + 600  # was: failed for good
    monkeypatch.delenv("TRT_SIM_CRASH")
    now[0] += 60
    waiting = engines.ensure("face", precision="fp16")
    assert waiting.engine is None and "attempt 1 of 5; tried again after" in waiting.reasons[0]
    now[0] += 600
    again = engines.ensure("face", precision="fp16")
    assert again.engine is not None and again.record.status == "valid"

    refused = manager(store, tmp_path / "refused", tables).ensure("end-of-turn", precision="fp16")
    (record,) = EngineCache(tmp_path / "refused" / "engines").records()
    assert refused.engine is None and record.retry_after == 0  # a parser's refusal is final for its key


def test_3_the_builders_tactic_memory_is_capped_from_the_settings(trt, store, tmp_path, tables):
    outcome = manager(store, tmp_path, tables).ensure("face", precision="fp16")
    header = engine_header(outcome.engine)
    assert header["tactic_dram"] == SETTINGS.tactic_dram_mb << 20  # was TensorRT's 75% of the Orin's 64 GB
    assert outcome.record.components["tactic_dram_mb"] == SETTINGS.tactic_dram_mb  # a new cap is a new engine


@pytest.mark.parametrize(("python", "pycuda"), [("3.10", "2024.1.2"), ("3.12", "2025.1.2")])
def test_2_pycuda_is_pinned_per_jetpack(python, pycuda):
    """JetPack 6 ships Python 3.10 and CUDA 12; JetPack 7 Python 3.12 and CUDA 13, which PyCUDA builds
    against from 2025.1.2 (the extra allowed 2022.2 and later)."""
    import ast

    from packaging.requirements import Requirement

    from tests.conftest import REPO

    call = next(
        node
        for node in ast.walk(ast.parse((REPO / "setup.py").read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup"
    )
    extras = ast.literal_eval(next(k.value for k in call.keywords if k.arg == "extras_require"))
    chosen = [
        r
        for r in map(Requirement, extras["jetson"])
        if r.marker is None or r.marker.evaluate({"python_version": python})
    ]
    assert [(r.name, str(r.specifier)) for r in chosen] == [("pycuda", f"=={pycuda}")]


def test_9_the_unit_leaves_out_profiler_and_debugger_nodes_and_covers_jetpack_7():
    import re

    from tests.conftest import REPO

    unit = (REPO / "systemd" / "orin-avatar.service").read_text()
    allowed = set(re.findall(r"^DeviceAllow=(\S+) rw", unit, re.M))
    assert not {"/dev/nvhost-prof-gpu", "/dev/nvhost-dbg-gpu"} & allowed  # its comment said so; it allowed both
    assert {"char-nvidia-frontend", "char-nvidia-uvm"} <= allowed  # JetPack 7's open-module nodes


def test_9_a_cached_engine_that_fails_to_activate_is_rebuilt_with_a_record(trt, store, tmp_path, tables, monkeypatch):
    from engines import engine_manager

    make_table(store, "face", tables)
    built = manager(store, tmp_path, tables).ensure("face")

    class Unloadable(TensorRTRunner):
        def _activate(self) -> None:
            raise TypeError("an incompatible function argument from the bindings")

    monkeypatch.setattr(engine_manager, "TensorRTRunner", Unloadable)
    seen = []
    outcome = manager(store, tmp_path, tables).ensure("face", report=seen.append)  # raised before
    assert outcome.engine is None and "TypeError: an incompatible function argument" in outcome.reasons[0]
    assert any(f"cached engine {built.record.key} is unusable (TypeError" in line for line in seen)
    records = {r.precision: r for r in EngineCache(tmp_path / "engines").records()}
    assert records["int8"].status == "failed" and "TypeError" in records["int8"].reason


def test_7_an_engine_is_warmed_up_before_it_serves(trt, store, tmp_path, tables):
    """Lazy loading makes a context's first calls slow: switched to at once, the VAD's first call missed
    its 5 ms deadline and sent the model back to the CPU for 5 s."""
    from engines.fallback import FallbackRunner
    from engines.onnxrt_runner import OnnxRuntimeRunner

    engines = manager(store, tmp_path, tables)
    built = engines.ensure("face", precision="fp16")
    trt.SIM.cold_calls, trt.SIM.cold_delay_s = 2, 0.3  # each of a new context's first two calls: 300 ms
    runner = FallbackRunner("face", OnnxRuntimeRunner("face", store.path("face.onnx")), deadline_ms=100)
    with runner:
        engines.serve(runner, "face")
        engines.wait()
        runner.infer(MODELS["face"].golden())
        stats = runner.snapshot()
    assert built.engine is not None and stats.engine_calls == 1 and not stats.fallbacks, stats


def test_8_a_call_copies_only_what_it_uses(trt, store, tmp_path, tables):
    """Buffers are sized for the largest profile; an 8-token query copied all of them (the text
    model's output alone 6.3 MB) to and from the device on every call."""
    from pycuda import driver

    built = manager(store, tmp_path, tables).ensure("text", precision="fp16")
    feeds = MODELS["text"].golden()
    with TensorRTRunner("text", built.engine, precision="fp16") as runner:
        before = driver.copied_bytes
        outputs = runner.infer(feeds)
        copied = driver.copied_bytes - before
    live = sum(a.nbytes for a in feeds.values()) + sum(a.nbytes for a in outputs.values())
    assert copied == live, (copied, live)


def test_3_a_running_daemon_tries_an_interrupted_build_again_when_it_is_due(trt, store, tmp_path, tables, monkeypatch):
    """Retries came only with the next start; a kiosk runs for days."""
    import time

    from engines.fallback import FallbackRunner
    from engines.onnxrt_runner import OnnxRuntimeRunner

    now = [1_000_000.0]
    engines = EngineManager(store, tmp_path / "engines", SETTINGS, tables, clock=lambda: now[0])
    engines.retry_poll_s = 0.05
    monkeypatch.setenv("TRT_SIM_CRASH", "build")
    runner = FallbackRunner("face", OnnxRuntimeRunner("face", store.path("face.onnx")), deadline_ms=1000)
    with runner:
        engines.serve(runner, "face")
        engines.wait()
        assert runner.kind == "cpu" and "killed by SIGKILL" in runner.snapshot().last_reason
        monkeypatch.delenv("TRT_SIM_CRASH")
        now[0] += RETRY_AFTER_S + 1
        deadline = time.monotonic() + 120
        while runner.kind == "cpu" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert runner.kind == "tensorrt", runner.snapshot().last_reason

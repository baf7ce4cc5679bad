"""The TensorRT path through the real build, cache, validation and fallback code, against the
TensorRT/PyCUDA simulator in tests/trt_sim (grounded in NVIDIA's files, see its docstring).
The same scenarios run against
the real library on an Orin: `pytest -m jetson tests/test_engines_jetson.py`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engines.engine_cache import EngineCache
from engines.errors import RunnerError
from engines.fallback import FallbackRunner
from engines.model_specs import MODELS
from engines.onnxrt_runner import OnnxRuntimeRunner
from engines.tensorrt_runner import TensorRTRunner

from tests.conftest import SETTINGS, SIM_PATH, manager, run_cli, unload_tensorrt
from tests.table_maker import make_table


def lines():
    seen = []
    return seen, seen.append


def test_first_build_then_cache_hit(trt, store, tmp_path, tables):
    make_table(store, "face", tables)
    engines = manager(store, tmp_path, tables)
    seen, report = lines()
    outcome = engines.ensure("face", report=report)
    assert outcome.precision == "int8" and outcome.engine.is_file()
    assert outcome.record.status == "valid" and outcome.record.validation["worst_cosine"] > 0.99
    assert any("building int8 engine" in line for line in seen)
    manifest = json.loads(outcome.engine.with_suffix(".json").read_text())
    assert manifest["components"]["platform"]["tensorrt"] == "10.3.0"
    assert manifest["components"]["table_sha256"]

    seen, report = lines()
    again = manager(store, tmp_path, tables).ensure("face", report=report)
    assert again.engine == outcome.engine
    assert any("cached int8 engine" in line for line in seen) and not any("building" in line for line in seen)


def test_every_key_component_changes_the_key(trt, store, tmp_path, tables):
    make_table(store, "face", tables)
    engines = manager(store, tmp_path, tables)
    policy = MODELS["face"]
    base = engines.key(policy, "int8", None)
    variants = [
        engines.key(policy, "fp16", None),
        engines.key(policy, "int8", 0),
        manager(store, tmp_path, tables, SETTINGS.__class__(**{**SETTINGS.__dict__, "workspace_mb": 512})).key(
            policy, "int8", None
        ),
        manager(store, tmp_path, tables, SETTINGS.__class__(**{**SETTINGS.__dict__, "optimization_level": 3})).key(
            policy, "int8", None
        ),
    ]
    other_platform = manager(
        store,
        tmp_path,
        tables,
        platform=engines.platform.__class__(**{**engines.platform.as_dict(), "tensorrt": "10.3.1"}),
    )
    variants.append(other_platform.key(policy, "int8", None))
    make_table(store, "face", tables, scale=1.01)  # a new table
    variants.append(engines.key(policy, "int8", None))
    digests = [base.digest] + [v.digest for v in variants]
    assert len(set(digests)) == len(digests)


def test_new_table_rebuilds_and_removes_the_stale_engine(trt, store, tmp_path, tables):
    make_table(store, "face", tables)
    first = manager(store, tmp_path, tables).ensure("face")
    make_table(store, "face", tables, scale=1.05)
    second = manager(store, tmp_path, tables).ensure("face")
    assert second.engine != first.engine and second.engine.is_file()
    assert not first.engine.exists() and not first.engine.with_suffix(".json").exists()


def test_corrupt_engine_file_is_rebuilt(trt, store, tmp_path, tables):
    make_table(store, "face", tables)
    outcome = manager(store, tmp_path, tables).ensure("face")
    outcome.engine.write_bytes(b"\x00garbage" * 100)
    seen, report = lines()
    again = manager(store, tmp_path, tables).ensure("face", report=report)
    assert any("unusable (its bytes changed" in line for line in seen)
    assert again.engine == outcome.engine and again.record.status == "valid"
    assert outcome.engine.read_bytes().startswith(b"TRTSIM")


def test_an_engine_changed_after_its_build_is_rebuilt_not_run(trt, store, tmp_path, tables):
    """An engine that still deserializes but is not the file that was validated (edited, or another
    model's engine copied over it) is rebuilt, as a changed store file is."""
    import struct

    make_table(store, "face", tables)
    outcome = manager(store, tmp_path, tables).ensure("face")
    data = outcome.engine.read_bytes()
    magic, size = data[:8], struct.unpack("<I", data[8:12])[0]
    header = json.loads(data[12 : 12 + size]) | {"edited": True}
    blob = json.dumps(header).encode()
    outcome.engine.write_bytes(magic + struct.pack("<I", len(blob)) + blob + data[12 + size :])
    with TensorRTRunner("face", outcome.engine, precision="int8") as edited:  # it still loads and runs
        edited.infer(MODELS["face"].golden())
    seen, report = lines()
    again = manager(store, tmp_path, tables).ensure("face", report=report)
    assert any("unusable (its bytes changed since it was built" in line for line in seen)
    assert again.record.status == "valid" and b"edited" not in outcome.engine.read_bytes()


def test_engine_from_another_tensorrt_version_is_never_reused(trt, store, tmp_path, tables, monkeypatch):
    make_table(store, "face", tables)
    built = manager(store, tmp_path, tables).ensure("face")
    runner = TensorRTRunner("face", built.engine, precision="int8")
    monkeypatch.setenv("TRT_SIM_VERSION", "10.3.1")
    unload_tensorrt()
    with pytest.raises(RunnerError, match="could not deserialize"):
        runner.activate()


def test_header_mismatched_table_is_refused_before_the_build(trt, store, tmp_path, tables):
    from engines.trt_builder import BuildRequest, EngineBuildError, build_engine

    make_table(store, "face", tables)
    engines = manager(store, tmp_path, tables)
    request = engines._request(MODELS["face"], engines.key(MODELS["face"], "int8", None))
    stale = request.calibration_cache.replace(b"TRT-100300-", b"TRT-8601-")
    bad = BuildRequest(**{**request.__dict__, "calibration_cache": stale})
    with pytest.raises(EngineBuildError, match="TRT-8601-EntropyCalibration2"):
        build_engine(bad, lambda _: None)


def test_simulator_ignores_a_mismatched_cache_and_fails_without_data(trt, capfd):
    """What the pre-check above protects against: TensorRT skips the cache and calibrates with no data."""
    from engines.trt_builder import cache_only_calibrator

    assert _build_int8_with(trt, cache_only_calibrator(trt, b"TRT-8601-EntropyCalibration2\ninput: 3c010204\n")) is None
    assert "does not match" in capfd.readouterr().err


def _build_int8_with(trt, calibrator):
    """An INT8 build of a parsed one-input network with `calibrator` (on TensorRT 10.x)."""
    builder = trt.Builder(trt.Logger())
    network = builder.create_network(0)
    network.onnx, network.inputs = b"model", [trt.ITensor("input", (1, 3), trt.DataType.FLOAT)]
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    with pytest.warns(DeprecationWarning):
        config.int8_calibrator = calibrator
    return builder.build_serialized_network(network, config)


def test_exceptions_in_calibrator_callbacks_are_swallowed_like_tensorrt(trt, capfd):
    class Broken(trt.IInt8EntropyCalibrator2):
        def __init__(self):
            trt.IInt8EntropyCalibrator2.__init__(self)

        def read_calibration_cache(self):
            raise OSError("disk gone")

        def get_batch(self, names):
            return None

    assert _build_int8_with(trt, Broken()) is None
    assert "[ERROR] Exception caught in read_calibration_cache()" in capfd.readouterr().err


@pytest.mark.version("11.4.1")
def test_tensorrt_11_uses_a_qdq_model_and_no_precision_flags(trt, store, tmp_path, tables):
    assert not hasattr(trt.BuilderFlag, "INT8") and not hasattr(trt, "IInt8EntropyCalibrator2")
    assert not hasattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH")
    make_table(store, "face", tables)
    outcome = manager(store, tmp_path, tables).ensure("face")
    assert outcome.precision == "int8" and outcome.record.status == "valid"
    qdq = next(outcome.engine.parent.glob("*.qdq.onnx"))
    import onnx

    ops = {n.op_type for n in onnx.load(str(qdq)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops


@pytest.mark.version("8.6.1")
def test_tensorrt_8_6_implicit_int8_with_int64_inputs_cast_down(trt, store, tmp_path, tables):
    make_table(store, "text", tables)
    outcome = manager(store, tmp_path, tables).ensure("text")
    assert outcome.precision == "int8" and outcome.record.status == "valid"
    runner = TensorRTRunner("text", outcome.engine, precision="int8")
    with runner:
        feeds = MODELS["text"].golden()
        got = runner.infer(feeds)["sentence_embedding"]
    with OnnxRuntimeRunner("text", store.path("text.onnx")) as cpu:
        expected = cpu.infer(feeds)["sentence_embedding"]
    assert got.shape == expected.shape and float(np.dot(got[0], expected[0])) > 0.99


def test_int8_that_fails_validation_drops_to_fp16(trt, store, tmp_path, tables, monkeypatch):
    monkeypatch.setenv("TRT_SIM_INT8_ERROR", "0.8")
    make_table(store, "face", tables)
    outcome = manager(store, tmp_path, tables).ensure("face")
    assert outcome.precision == "fp16"
    assert "int8" in outcome.reasons[0] and "does not match ONNX Runtime FP32" in outcome.reasons[0]
    records = {r.precision: r for r in EngineCache(tmp_path / "engines").records()}
    assert records["int8"].status == "failed" and records["fp16"].status == "valid"


def test_missing_table_skips_int8(trt, store, tmp_path, tables):
    engines = manager(store, tmp_path, tables)
    assert engines.ladder(MODELS["face"]) == ("fp16", "fp32")
    outcome = engines.ensure("face")
    assert outcome.precision == "fp16" and outcome.reasons == ()
    make_table(store, "face", tables)
    assert engines.ladder(MODELS["face"]) == ("int8", "fp16", "fp32")


def test_build_crash_in_the_child_leaves_the_model_on_the_cpu(trt, store, tmp_path, tables, monkeypatch):
    monkeypatch.setenv("TRT_SIM_CRASH", "build")
    make_table(store, "face", tables)
    outcome = manager(store, tmp_path, tables).ensure("face")
    assert outcome.engine is None
    assert all("killed by SIGKILL" in reason and "out of memory" in reason for reason in outcome.reasons)
    assert len(outcome.reasons) == 3  # every rung tried (int8, fp16, fp32), this process untouched


def test_fallback_answers_every_call_from_the_cpu_when_the_engine_fails(trt, store, tmp_path, tables):
    make_table(store, "face", tables)
    outcome = manager(store, tmp_path, tables).ensure("face")
    cpu = OnnxRuntimeRunner("face", store.path("face.onnx"))
    now = [100.0]
    runner = FallbackRunner("face", cpu, deadline_ms=MODELS["face"].deadline_ms, clock=lambda: now[0])
    with runner:
        runner.attach(TensorRTRunner("face", outcome.engine, precision="int8"))
        feeds = MODELS["face"].golden()
        assert runner.backend == "tensorrt-gpu-int8" and runner.kind == "tensorrt"
        runner.infer(feeds)
        assert runner.snapshot().engine_calls == 1
        trt.SIM.execute_raises = True  # mid-turn failure
        answer = runner.infer(feeds)
        expected = cpu.infer(feeds)
        assert all(np.array_equal(answer[k], expected[k]) for k in expected)  # answered by the CPU, nothing lost
        assert runner.snapshot().fallbacks == {"error": 1} and "launch failure" in runner.snapshot().last_reason
        assert runner.backend.startswith("onnxruntime-cpu") and runner.kind == "cpu"
        trt.SIM.execute_raises = False
        now[0] += 4.9  # still backing off (5 s after the first failure): the CPU answers
        runner.infer(feeds)
        assert runner.snapshot().engine_calls == 1 and runner.snapshot().cpu_calls == 2
        now[0] += 0.2  # the backoff has passed
        runner.infer(feeds)
        assert runner.snapshot().engine_calls == 2


def test_deadline_overrun_hands_the_call_to_the_cpu(trt, store, tmp_path, tables):
    make_table(store, "face", tables)
    outcome = manager(store, tmp_path, tables).ensure("face")
    cpu = OnnxRuntimeRunner("face", store.path("face.onnx"))
    runner = FallbackRunner("face", cpu, deadline_ms=50)
    with runner:
        runner.attach(TensorRTRunner("face", outcome.engine, precision="int8"))
        trt.SIM.execute_delay_s = 0.5
        answer = runner.infer(MODELS["face"].golden())
        assert "reshaped_regressor_face_4" in answer
        assert runner.snapshot().fallbacks == {"deadline": 1} and runner.snapshot().cpu_calls == 1
        assert "deadline" in runner.snapshot().last_reason


def test_execute_returning_false_is_an_error_the_fallback_catches(trt, store, tmp_path, tables):
    make_table(store, "face", tables)
    outcome = manager(store, tmp_path, tables).ensure("face")
    runner = TensorRTRunner("face", outcome.engine, precision="int8")
    with runner:
        trt.SIM.execute_returns_false = True
        with pytest.raises(RunnerError, match="execution failed"):
            runner.infer(MODELS["face"].golden())


def test_inference_outside_the_pushed_context_is_what_pycuda_refuses(trt):
    from pycuda import driver

    driver.init()
    with pytest.raises(driver.LogicError, match="no currently active context"):
        driver.mem_alloc(16)


def test_daemon_serves_from_the_cpu_then_switches_to_the_engine(trt, store, tmp_path, tables):
    from engines.backends import open_runner

    make_table(store, "face", tables)
    engines = manager(store, tmp_path, tables)
    runner = open_runner(store, "face", 1, engines)
    assert isinstance(runner, FallbackRunner)
    runner.infer(MODELS["face"].golden())  # answered at once, from the CPU, while the engine builds
    engines.wait()
    assert runner.backend == "tensorrt-gpu-int8"
    runner.infer(MODELS["face"].golden())
    assert runner.snapshot().engine_calls == 1 and runner.snapshot().cpu_calls == 1
    runner.release()


def test_models_without_a_tensorrt_policy_stay_on_onnx_runtime(trt, store, tmp_path, tables):
    from engines.backends import open_runner

    runner = open_runner(store, "tts", 1, manager(store, tmp_path, tables))
    assert isinstance(runner, OnnxRuntimeRunner)
    outcome = manager(store, tmp_path, tables).ensure("tts")
    assert outcome.engine is None and "output length depends on the data" in outcome.reasons[0]


def test_the_voices_vocoder_builds_and_validates_an_engine_for_its_pieces(trt, store, tmp_path, tables):
    """The voice's sound side (its text side stays on the CPU, above): a profile up to the largest
    piece with its context, validated on a piece of latent frames."""
    engines = manager(store, tmp_path, tables)
    assert engines.ladder(MODELS["tts-vocoder"]) == ("fp16", "fp32")
    outcome = engines.ensure("tts-vocoder")
    assert outcome.precision == "fp16" and outcome.record.status == "valid", outcome.reasons
    assert outcome.record.validation["worst_cosine"] > 0.99


def test_dla_build_reports_layers_left_on_the_gpu(trt, store, tmp_path, tables, caplog):
    import onnx

    make_table(store, "face", tables)
    with caplog.at_level("WARNING"):
        outcome = manager(store, tmp_path, tables).ensure("face", dla_core=0)
    assert outcome.record.status == "valid" and outcome.record.components["dla_core"] == 0
    ops = {n.op_type for n in onnx.load(str(store.path("face.onnx"))).graph.node}
    expected = sorted(
        ops
        - {
            "Conv",
            "Relu",
            "Add",
            "Mul",
            "MaxPool",
            "AveragePool",
            "Concat",
            "Sigmoid",
            "Pad",
            "Reshape",
            "Transpose",
            "BatchNormalization",
            "PRelu",
            "Clip",
        }
    )
    assert outcome.record.validation["layers_on_gpu"] == expected
    if expected:
        assert "left DLA core 0 for the GPU" in caplog.text


def test_no_tensorrt_at_all(store, tmp_path, tables):
    from engines.backends import open_runner

    unload_tensorrt()
    engines = manager(store, tmp_path, tables)
    assert "TensorRT is not installed" in engines.unavailable
    assert isinstance(open_runner(store, "face", 1, engines), OnnxRuntimeRunner)
    outcome = engines.ensure("face")
    assert outcome.engine is None and "not installed" in outcome.reasons[0]
    result = run_cli("build")
    assert result.returncode == 0 and "TensorRT is not installed" in result.stdout and "CPU" in result.stdout
    result = run_cli("engines", "list", "--json")
    report = json.loads(result.stdout)
    assert report["platform"]["tensorrt"] is None and "not installed" in report["tensorrt_unavailable"]


def test_engines_list_and_build_cli_with_the_simulator(trt, store, tmp_path, tables):
    env = {"PYTHONPATH": SIM_PATH, "ORIN_AVATAR_HOME": str(tmp_path / "home")}
    home_store = Path(store.root)
    result = run_cli("--store", str(home_store), "build", "face", "--precision", "fp16", env=env)
    assert result.returncode == 0, result.stderr
    assert "face: TensorRT fp16 engine" in result.stdout
    result = run_cli("--store", str(home_store), "engines", "list", env=env)
    assert "TensorRT: 10.3.0" in result.stdout and "face" in result.stdout and "valid" in result.stdout


def test_onnx_is_checked_before_the_parser_sees_it(store, tmp_path):
    import onnx
    from onnx import helper, numpy_helper

    from engines.errors import ModelStoreError
    from engines.onnx_check import check_onnx

    assert len(check_onnx(store.path("face.onnx"), store.root).graph.node) > 10
    root = tmp_path / "store"
    root.mkdir()
    weights = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 4])],
        [weights],
    )
    model = helper.make_model(graph)
    onnx.save(model, str(root / "m.onnx"), save_as_external_data=True, location="m.data", size_threshold=0)
    assert check_onnx(root / "m.onnx", root).graph.initializer[0].name == "w"
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../../etc/passwd"
    model.graph.initializer[0].data_location = onnx.TensorProto.EXTERNAL
    (root / "evil.onnx").write_bytes(model.SerializeToString())
    with pytest.raises(ModelStoreError, match="points outside the model store"):
        check_onnx(root / "evil.onnx", root)
    (root / "junk.onnx").write_bytes(b"\x08\x07junk")
    with pytest.raises(ModelStoreError, match="not a readable ONNX model"):
        check_onnx(root / "junk.onnx", root)

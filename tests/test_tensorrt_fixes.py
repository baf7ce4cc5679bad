"""What would have failed on a real Orin, each through the grounded simulator (tests/trt_sim): the
twelve findings of the review of engines/ against NVIDIA's own files. `pytest -m jetson` runs the
same paths on real TensorRT (tests/test_engines_jetson.py)."""

from __future__ import annotations

import dataclasses
import gc
import json
import re
import struct

import onnx
import pytest

from engines import trt_builder
from engines.calibration_table import read_table, write_table
from engines.engine_cache import EngineCache
from engines.errors import OrinAvatarError
from engines.model_specs import MODELS
from engines.platform import probe_platform
from engines.tensorrt_runner import TensorRTRunner
from engines.tensorrt_support import refusals

from tests.conftest import REPO, SETTINGS, manager
from tests.table_maker import make_table

MAGIC = b"TRTSIM\x00\x01"


def engine_header(path) -> dict:
    data = path.read_bytes()
    size = struct.unpack("<I", data[len(MAGIC) : len(MAGIC) + 4])[0]
    return json.loads(data[len(MAGIC) + 4 : len(MAGIC) + 4 + size])


@pytest.mark.version("8.6.2")
def test_1_asr_encoder_on_8_6_builds_without_the_instance_norm_plugin_and_loads(trt, store, tmp_path, tables):
    outcome = manager(store, tmp_path, tables).ensure("asr-encoder", precision="fp16")
    assert outcome.engine is not None, outcome.reasons
    assert engine_header(outcome.engine)["plugins"] == []  # NATIVE_INSTANCENORM set on the parser


@pytest.mark.version("8.6.2")
def test_1_an_engine_holding_a_plugin_loads_only_after_plugins_are_registered(trt, store, tmp_path, monkeypatch):
    request = trt_builder.BuildRequest(
        "asr-encoder.onnx",
        str(store.path("asr-encoder.onnx")),
        "fp32",
        None,
        None,
        MODELS["asr-encoder"].profile,
        256,
        512,
        1,
        None,
        str(tmp_path / "e.engine"),
    )
    monkeypatch.setattr(trt_builder, "_parser_flags", lambda trt_module, parser: None)  # 8.6's default import
    trt_builder.build_engine(request, lambda line: None)
    assert engine_header(tmp_path / "e.engine")["plugins"] == ["InstanceNormalization_TRT"]
    trt._PLUGINS_REGISTERED = False  # a fresh daemon process
    trt_builder._registered_logger.cache_clear()
    with TensorRTRunner("asr-encoder", tmp_path / "e.engine") as runner:  # registers them first
        assert "input_values" in runner.input_names


@pytest.mark.version("11.4.1")
def test_2_qdq_model_for_tensorrt_11_has_no_int32_bias_dequantize(trt, store, tmp_path, tables):
    make_table(store, "face", tables)
    outcome = manager(store, tmp_path, tables).ensure("face")
    assert outcome.precision == "int8", outcome.reasons
    qdq = onnx.load(str(next(outcome.engine.parent.glob("*.qdq.onnx"))))
    kinds = {t.name: t.data_type for t in qdq.graph.initializer}
    dequantized = [kinds.get(n.input[0]) for n in qdq.graph.node if n.op_type == "DequantizeLinear"]
    assert dequantized and onnx.TensorProto.INT32 not in dequantized


@pytest.mark.parametrize("version", ["8.6.2", "10.3.0"])
def test_3_vad_builds_its_if_is_folded_in_the_store(store, version):
    model = onnx.load(str(store.path("vad.onnx")))
    assert not {"If", "Shape", "Equal"} & {n.op_type for n in model.graph.node}
    assert refusals(model, version) == []


def test_3_an_if_with_branches_of_different_rank_is_refused(store):
    from onnx import helper

    branch = lambda rank: helper.make_graph(  # noqa: E731
        [helper.make_node("Identity", ["x"], [f"y{rank}"])],
        f"b{rank}",
        [],
        [helper.make_tensor_value_info(f"y{rank}", onnx.TensorProto.FLOAT, [1] * rank)],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("ReduceSum", ["s"], ["n"], keepdims=0),
            helper.make_node("Cast", ["n"], ["c"], to=onnx.TensorProto.BOOL),
            helper.make_node("If", ["c"], ["out"], then_branch=branch(2), else_branch=branch(3)),
        ],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, None)],
    )
    problems = refusals(helper.make_model(graph), "10.3.0")
    assert len(problems) == 1 and "ranks (2,) and (3,)" in str(problems[0])


@pytest.mark.version("11.4.1")
def test_4_tensorrt_11_has_an_fp32_rung(trt, store, tmp_path, tables):
    engines = manager(store, tmp_path, tables)
    assert engines.ladder(MODELS["text"]) == ("fp32",)
    outcome = engines.ensure("text")
    assert outcome.precision == "fp32" and outcome.engine is not None, outcome.reasons


def test_5_the_platform_probe_makes_no_builder(trt):
    platform = probe_platform()
    assert platform.usable and platform.dla_cores == 2
    assert trt.SIM.builders == 0


def test_6_dla_only_for_static_models(trt, store, tmp_path, tables):
    settings = dataclasses.replace(SETTINGS, dla_core=0)
    seen = []
    outcome = manager(store, tmp_path, tables, settings).ensure("text", precision="fp16", report=seen.append)
    assert outcome.engine is not None and outcome.record.components["dla_core"] is None
    assert any("not on the DLA (dynamic shapes" in line for line in seen)
    face = manager(store, tmp_path, tables, settings).ensure("face", precision="fp16")
    assert face.record.components["dla_core"] == 0


@pytest.mark.version("11.1.0")
def test_6_no_dla_on_tensorrt_11_before_11_4_1(trt, store, tmp_path, tables):
    settings = dataclasses.replace(SETTINGS, dla_core=0)
    outcome = manager(store, tmp_path, tables, settings).ensure("face")
    assert outcome.engine is not None and outcome.record.components["dla_core"] is None


def test_7_an_inconsistent_profile_is_named(trt):
    request = trt_builder.BuildRequest(
        "text.onnx", "", "fp16", None, None, {"input_ids": ((1, 16), (1, 8), (1, 4))}, 256, 512, 1, None, ""
    )
    builder = trt.Builder(trt.Logger())
    with pytest.raises(trt_builder.EngineBuildError, match="input_ids .* is inconsistent"):
        trt_builder._profile(trt, builder, builder.create_builder_config(), request)


def test_8_layers_kept_out_of_int8_run_in_fp16(trt, store, tmp_path, tables):
    path = make_table(store, "face", tables)
    write_table(path, dataclasses.replace(read_table(path), fp16_nodes=("conv2d_10",)))
    outcome = manager(store, tmp_path, tables).ensure("face")
    assert outcome.precision == "int8"
    header = engine_header(outcome.engine)
    assert "conv2d_10" in header["fp16_layers"]
    assert "conv2d_10" not in header["int8_tensors"]  # its output got no scale


def test_9_runners_share_the_primary_context_and_free_their_streams(trt, store, tmp_path, tables):
    from pycuda import driver

    driver.WARNINGS.clear()
    driver.LEAKED.clear()
    outcome = manager(store, tmp_path, tables).ensure("face", precision="fp16")
    runners = [TensorRTRunner("face", outcome.engine) for _ in range(2)]
    for runner in runners:
        runner.activate()
        runner.infer(MODELS["face"].golden())
    assert all(r._context.primary for r in runners)
    for runner in runners:
        runner.release()
    del runners, runner  # a stream still held after release would be destroyed here, with no context current
    gc.collect()
    assert driver.WARNINGS == [] and driver.LEAKED == []


def test_10_the_unit_allows_the_igpu_nodes_cuda_opens():
    unit = (REPO / "systemd" / "orin-avatar.service").read_text()
    allowed = set(re.findall(r"^DeviceAllow=(\S+) rw", unit, re.M))
    assert {f"/dev/nvgpu/igpu0/{n}" for n in ("ctrl", "as", "tsg", "channel", "power")} <= allowed
    assert not {f"/dev/nvgpu/igpu0/{n}" for n in ("prof", "dbg", "prof-dev")} & allowed


@pytest.mark.version("11.4.1")
def test_11_any_exception_preparing_a_build_is_a_recorded_failed_rung(trt, store, tmp_path, tables, monkeypatch):
    from engines import engine_manager

    def broken(*args):
        raise ValueError("the quantizer found no node to quantize")

    monkeypatch.setattr(engine_manager, "make_qdq_model", broken)
    make_table(store, "face", tables)
    outcome = manager(store, tmp_path, tables).ensure("face")
    assert outcome.precision == "fp32" and "ValueError: the quantizer" in outcome.reasons[0]
    records = {r.precision: r for r in EngineCache(tmp_path / "engines").records()}
    assert records["int8"].status == "failed" and "ValueError" in records["int8"].reason


@pytest.mark.version("10.16.1")
def test_12_a_cache_rendered_for_another_tensorrt_is_caught(trt, store, tmp_path, tables):
    make_table(store, "face", tables)
    engines = manager(store, tmp_path, tables)
    wrong = dataclasses.replace(engines.platform, tensorrt="10.3.0")  # rendered for JetPack 6.1's TensorRT
    outcome = manager(store, tmp_path, tables, platform=wrong).ensure("face")
    assert outcome.precision == "fp16"
    assert "ignored the calibration cache" in outcome.reasons[0] and "TRT-100300" in outcome.reasons[0]
    right = manager(store, tmp_path, tables).ensure("face")
    assert right.precision == "int8"


def test_cache_header_renderer_agrees_with_nvidia_version_macro(trt):
    from engines.calibration_table import trt_version_number

    for version, number in (("8.6.1", 8601), ("10.3.0", 100300), ("10.16.1", 101601), ("11.4.1", 110401)):
        trt.__version__, trt._VERSION = version, tuple(int(p) for p in version.split("."))
        assert trt_version_number(version) == trt.cache_version_number() == number


def test_errors_building_are_user_errors():
    assert issubclass(trt_builder.EngineBuildError, OrinAvatarError)

"""Where INT8 goes, as TensorRT runs it: a table's ranges survive each renderer (the 8.6/10.x
calibration cache, the 11.x Q/DQ model) exactly, a layer the table keeps in FP16 gets no scale and no
Q/DQ pair, and the emulations the gates run on place Q/DQ and FP16 rounding as documented."""

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from engines.calibration_table import read_table, render_trt_cache, table_from_trt_cache
from engines.model_specs import MODELS
from engines.onnxrt_runner import OnnxRuntimeRunner
from engines.qdq_model import WEIGHTED_OPS, make_qdq_model, output_tensors, weighted_layers

from calibration.emulation import emulated_models
from tests.table_maker import make_table

KEPT = "conv2d_10"  # a face convolution the test table keeps in FP16


@pytest.fixture(scope="module")
def face_table(store, tmp_path_factory):
    path = make_table(store, "face", tmp_path_factory.mktemp("tables"))
    return dataclasses.replace(read_table(path), fp16_nodes=(KEPT,))


@pytest.fixture(scope="module")
def face_model(store):
    return onnx.load(str(store.path("face.onnx")))


def _qdq(store, table, tmp_path) -> onnx.ModelProto:
    path = tmp_path / "face.qdq.onnx"
    make_qdq_model(store.path("face.onnx"), table, path)
    return onnx.load(str(path))


def _producers(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return {o: n for n in model.graph.node for o in n.output}


@pytest.mark.parametrize("version", ["8.6.1", "10.3.0"])
def test_the_calibration_cache_carries_every_scale_but_the_fp16_layers_outputs(face_table, face_model, version):
    kept_outputs = output_tensors(face_model, face_table.fp16_nodes)
    assert kept_outputs == {KEPT}
    text = render_trt_cache(face_table, version, kept_outputs).decode()
    back = table_from_trt_cache(text, face_table.model, face_table.model_sha256, face_table.method)
    assert KEPT in face_table.amax and KEPT not in back.amax
    assert back.amax == {k: v for k, v in face_table.amax.items() if k != KEPT}  # bit for bit


def test_the_qdq_model_carries_the_tables_scales_exactly(store, face_table, tmp_path):
    model = _qdq(store, face_table, tmp_path)
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    checked = 0
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear" and node.input[0] in face_table.amax:
            scale = constants[node.input[1]]
            assert scale.dtype == np.float32 and scale == np.float32(face_table.amax[node.input[0]] / 127)
            assert constants[node.input[2]].dtype == np.int8 and constants[node.input[2]] == 0  # symmetric
            checked += 1
    assert checked > 50


def test_int8_layers_get_qdq_inputs_per_channel_weights_and_no_qdq_outputs(store, face_table, face_model, tmp_path):
    model = _qdq(store, face_table, tmp_path)
    producers = _producers(model)
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    consumers = {i for n in model.graph.node if n.op_type == "QuantizeLinear" for i in n.input[:1]}
    layers = [n for n in model.graph.node if n.op_type in WEIGHTED_OPS]
    assert len(layers) == len(weighted_layers(face_model))
    int8_inputs = {i for n in face_model.graph.node if n.op_type in WEIGHTED_OPS and n.name != KEPT for i in n.input}
    for layer in layers:
        fed = [producers.get(i) for i in layer.input[:2]]
        if layer.name == KEPT:  # no Q/DQ pair anywhere around the FP16 layer
            assert all(p is None or p.op_type != "DequantizeLinear" for p in fed)
            continue
        assert all(p is not None and p.op_type == "DequantizeLinear" for p in fed), layer.name
        weight_scale = constants[fed[1].input[1]]
        assert weight_scale.shape == (constants[fed[1].input[0]].shape[0],)  # one scale per output channel
        # its output is quantized only where it is another INT8 layer's input
        assert not (set(layer.output) & consumers) - int8_inputs, f"{layer.name}'s output is quantized"
    dequantized = [constants.get(n.input[0]) for n in model.graph.node if n.op_type == "DequantizeLinear"]
    assert all(d is None or d.dtype == np.int8 for d in dequantized)  # no INT32 bias DequantizeLinear


def test_the_implicit_emulation_rounds_what_is_not_int8_to_fp16(store, face_table, face_model, tmp_path):
    emulations = emulated_models(store.path("face.onnx"), face_table, tmp_path)
    model = onnx.load(str(emulations["implicit"]))
    quantized = {n.input[0] for n in model.graph.node if n.op_type == "QuantizeLinear"}
    rounded = {
        n.input[0].removesuffix("__fp32")
        for n in model.graph.node
        if n.op_type == "Cast" and n.attribute[0].i == onnx.TensorProto.FLOAT16
    }
    kept = next(n for n in face_model.graph.node if n.name == KEPT)
    assert kept.output[0] in rounded and not set(kept.input) & quantized  # the FP16 layer: FP16 in and out
    float_ops = [n for n in face_model.graph.node if n.op_type in ("Add", "Relu", "MaxPool")]
    assert float_ops and all(n.output[0] in rounded for n in float_ops)
    explicit = onnx.load(str(emulations["explicit"]))
    assert not any(n.op_type == "Cast" for n in explicit.graph.node)
    golden = MODELS["face"].golden()
    with (
        OnnxRuntimeRunner("fp32", store.path("face.onnx")) as fp32,
        OnnxRuntimeRunner("implicit", emulations["implicit"]) as implicit,
        OnnxRuntimeRunner("explicit", emulations["explicit"]) as explicit_runner,
    ):
        want = fp32.infer(golden)
        for runner in (implicit, explicit_runner):
            got = runner.infer(golden)
            for name, value in want.items():
                cosine = np.dot(value.ravel(), got[name].ravel()) / np.linalg.norm(value) / np.linalg.norm(got[name])
                assert 0.9 < cosine < 1.0  # quantized, so close but not equal


def test_fp16_rounding_is_what_fp16_storage_gives(tmp_path):
    from calibration.emulation import round_to_fp16

    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Mul", ["x", "x"], ["y"], name="square")], "g", [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    round_to_fp16(model)
    onnx.save(model, str(tmp_path / "m.onnx"))
    values = np.array([1.0001, 300.03, 70000.0], np.float32)
    with OnnxRuntimeRunner("m", tmp_path / "m.onnx") as runner:
        got = runner.infer({"x": values})["y"]
    assert np.array_equal(got, (values * values).astype(np.float16).astype(np.float32))  # 70000^2 overflows FP16
    assert np.isinf(got[2])

"""Build an ONNX graph for a BERT sentence encoder straight from its safetensors weights.

Why our own: the usual exporters (torch.onnx, optimum) need torch, which a Jetson robot should not
have to install for one small model. BERT is a short, standard graph: embeddings, N encoder
layers (self-attention, feed-forward, post-layer-norm), then the sentence-transformers mean pooling
and L2 normalisation, which are folded into the graph so that its one output is the embedding.
Node names follow the layer structure (`layer3.ffn_out`, ...) so calibration tables can name them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # LayerNormalization is standard from 17; TensorRT 8.6 parses up to 17


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, inputs: list[str], name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name


def build_bert_encoder(weights_path: Path, config_path: Path) -> onnx.ModelProto:
    """Return the sentence-embedding model: (input_ids, attention_mask) -> sentence_embedding."""
    from safetensors.numpy import load_file

    config = json.loads(config_path.read_text())
    w = load_file(str(weights_path))
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    eps = float(config["layer_norm_eps"])
    g = _Graph()

    ids, mask = "input_ids", "attention_mask"
    positions = g.op(
        "Range",
        [
            g.const("zero", np.array(0, np.int64)),
            g.op("Gather", [g.op("Shape", [ids], "ids_shape"), g.const("one", np.array(1, np.int64))], "seq_len"),
            "one",
        ],
        "positions",
    )
    embedded = g.op(
        "Add",
        [
            g.op(
                "Add",
                [
                    g.op("Gather", [g.const("emb.word", w["embeddings.word_embeddings.weight"]), ids], "emb.words"),
                    g.op(
                        "Gather",
                        [g.const("emb.position", w["embeddings.position_embeddings.weight"]), positions],
                        "emb.positions",
                    ),
                ],
                "emb.sum",
            ),
            g.const("emb.type0", w["embeddings.token_type_embeddings.weight"][0]),  # single-segment input
        ],
        "emb.all",
    )
    x = _layer_norm(g, embedded, w, "embeddings.LayerNorm", "emb.norm", eps)

    # Additive attention bias: 0 where attended, -10000 where padded, shaped [B, 1, 1, T].
    mask_f = g.op("Cast", [mask], "mask.float", to=TensorProto.FLOAT)
    bias = g.op(
        "Mul",
        [
            g.op("Sub", [g.const("one_f", np.array(1.0, np.float32)), mask_f], "mask.inverse"),
            g.const("neg_big", np.array(-10000.0, np.float32)),
        ],
        "mask.bias",
    )
    bias = g.op("Unsqueeze", [bias, g.const("axes12", np.array([1, 2], np.int64))], "mask.bias4d")

    for i in range(config["num_hidden_layers"]):
        x = _encoder_layer(g, x, bias, w, i, hidden, heads, eps)

    # Mean pooling over attended tokens, then L2 normalisation (sentence-transformers modules 1 and 2).
    mask3 = g.op("Unsqueeze", [mask_f, g.const("axis2", np.array([2], np.int64))], "pool.mask")
    summed = g.op(
        "ReduceSum",
        [g.op("Mul", [x, mask3], "pool.masked"), g.const("axis1", np.array([1], np.int64))],
        "pool.sum",
        keepdims=0,
    )
    count = g.op(
        "Max",
        [
            g.op("ReduceSum", [mask3, "axis1"], "pool.count", keepdims=0),
            g.const("min_count", np.array(1e-9, np.float32)),
        ],
        "pool.count_clamped",
    )
    mean = g.op("Div", [summed, count], "pool.mean")
    norm = g.op(
        "Max",
        [g.op("ReduceL2", [mean], "norm.l2", axes=[-1], keepdims=1), g.const("min_norm", np.array(1e-12, np.float32))],
        "norm.clamped",
    )
    g.op("Div", [mean, norm], "sentence_embedding")

    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])],
        initializer=g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="orin-avatar")
    onnx.checker.check_model(model)
    return model


def _layer_norm(g: _Graph, x: str, w: dict, key: str, name: str, eps: float) -> str:
    return g.op(
        "LayerNormalization",
        [x, g.const(name + ".gamma", w[key + ".weight"]), g.const(name + ".beta", w[key + ".bias"])],
        name,
        axis=-1,
        epsilon=eps,
    )


def _linear(g: _Graph, x: str, w: dict, key: str, name: str) -> str:
    """x @ W^T + b; the MatMul carries `name` so tables and sensitivity sweeps can refer to it."""
    weight = np.ascontiguousarray(w[key + ".weight"].T)
    product = g.op("MatMul", [x, g.const(name + ".weight", weight)], name)
    return g.op("Add", [product, g.const(name + ".bias", w[key + ".bias"])], name + ".biased")


def _encoder_layer(g: _Graph, x: str, bias: str, w: dict, i: int, hidden: int, heads: int, eps: float) -> str:
    src, dst = f"encoder.layer.{i}", f"layer{i}"
    head_dim = hidden // heads
    split = g.const(f"{dst}.split_shape", np.array([0, 0, heads, head_dim], np.int64))
    merge = g.const(f"{dst}.merge_shape", np.array([0, 0, hidden], np.int64))

    def heads_of(kind: str, perm: list[int]) -> str:
        projected = _linear(g, x, w, f"{src}.attention.self.{kind}", f"{dst}.{kind}")
        shaped = g.op("Reshape", [projected, split], f"{dst}.{kind}.heads")
        return g.op("Transpose", [shaped], f"{dst}.{kind}.t", perm=perm)

    q, k, v = heads_of("query", [0, 2, 1, 3]), heads_of("key", [0, 2, 3, 1]), heads_of("value", [0, 2, 1, 3])
    scores = g.op("MatMul", [q, k], f"{dst}.scores")
    scaled = g.op(
        "Mul", [scores, g.const(f"{dst}.scale", np.array(1.0 / np.sqrt(head_dim), np.float32))], f"{dst}.scaled"
    )
    probs = g.op("Softmax", [g.op("Add", [scaled, bias], f"{dst}.masked")], f"{dst}.probs", axis=-1)
    context = g.op("MatMul", [probs, v], f"{dst}.context")
    context = g.op(
        "Reshape", [g.op("Transpose", [context], f"{dst}.context.t", perm=[0, 2, 1, 3]), merge], f"{dst}.context.merged"
    )
    attended = _linear(g, context, w, f"{src}.attention.output.dense", f"{dst}.attn_out")
    x = _layer_norm(
        g,
        g.op("Add", [attended, x], f"{dst}.attn_residual"),
        w,
        f"{src}.attention.output.LayerNorm",
        f"{dst}.attn_norm",
        eps,
    )

    inner = _linear(g, x, w, f"{src}.intermediate.dense", f"{dst}.ffn_in")
    inner = _gelu(g, inner, f"{dst}.gelu")
    out = _linear(g, inner, w, f"{src}.output.dense", f"{dst}.ffn_out")
    return _layer_norm(
        g, g.op("Add", [out, x], f"{dst}.ffn_residual"), w, f"{src}.output.LayerNorm", f"{dst}.ffn_norm", eps
    )


def _gelu(g: _Graph, x: str, name: str) -> str:
    """Exact (erf) GELU, as BERT's 'gelu'; Gelu is only an ONNX op from opset 20."""
    erf = g.op(
        "Erf",
        [g.op("Mul", [x, g.const(name + ".rsqrt2", np.array(1 / np.sqrt(2), np.float32))], name + ".scaled")],
        name + ".erf",
    )
    half = g.op("Mul", [x, g.const(name + ".half", np.array(0.5, np.float32))], name + ".half_x")
    return g.op(
        "Mul", [half, g.op("Add", [erf, g.const(name + ".one", np.array(1.0, np.float32))], name + ".erf1")], name
    )

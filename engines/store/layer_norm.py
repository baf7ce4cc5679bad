"""Layer normalizations written out as arithmetic, made into ONNX `LayerNormalization` (opset 17).

Moonshine's encoder computes each layer norm as ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div,
Mul. In FP16 the Pow overflows (squares reach 5e6 where FP16 ends at 65504), which ruins an FP16 or
INT8 engine. TensorRT imports `LayerNormalization` as its INormalizationLayer and keeps its precision
itself (NVIDIA's answer in NVIDIA/TensorRT#2781: export to opset 17 and use TensorRT 8.6; the
builder's own warning says the same), and onnx-tensorrt's operator tables list it for 8.6 and 10.x.
ONNX Runtime's transformer fusion (FusionLayerNormalization) does not match this graph: its layout
pass put a Transpose between the mean subtraction and the variance, and the norms have no bias. So
the pattern is matched here, from each Pow; outputs stay equal within float rounding
(tests/test_conversions.py).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper


def fuse_layer_norms(model: onnx.ModelProto) -> int:
    """Convert `model` to opset 17, then replace every written-out layer norm in it by
    `LayerNormalization`; returns how many were fused."""
    model.CopyFrom(onnx.version_converter.convert_version(model, 17))
    graph = model.graph
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    fused, removed = 0, set()
    replacements: dict[int, list[onnx.NodeProto]] = {}
    for pow_node in [n for n in graph.node if n.op_type == "Pow"]:
        match = _match(pow_node, producer, consumers, constants)
        if match is None:
            continue
        nodes, source, perm, gamma, beta, epsilon, output = match
        fused += 1
        removed.update(id(n) for n in nodes)
        prefix = pow_node.name or pow_node.output[0]
        new = []
        if perm is not None:
            new.append(
                onnx.helper.make_node(
                    "Transpose", [source], [f"{prefix}/ln_input"], perm=perm, name=f"{prefix}/ln_transpose"
                )
            )
            source = f"{prefix}/ln_input"
        if beta is None:
            beta = f"{prefix}/ln_bias"
            graph.initializer.append(numpy_helper.from_array(np.zeros_like(constants[gamma]), beta))
        new.append(
            onnx.helper.make_node(
                "LayerNormalization",
                [source, gamma, beta],
                [output],
                axis=-1,
                epsilon=epsilon,
                name=f"{prefix}/LayerNormalization",
            )
        )
        replacements[id(nodes[-1])] = new
    kept = []
    for node in graph.node:
        kept += replacements.get(id(node), []) if id(node) in removed else [node]
    del graph.node[:]
    graph.node.extend(kept)
    used = {name for node in graph.node for name in node.input}
    unused = [t for t in graph.initializer if t.name not in used]
    for tensor in unused:
        graph.initializer.remove(tensor)
    return fused


def _match(pow_node, producer, consumers, constants):
    """The nodes of one layer norm whose variance `pow_node` squares, or None."""
    exponent = constants.get(pow_node.input[1])
    if exponent is None or float(exponent) != 2.0:
        return None
    centred = pow_node.input[0]
    chain = _single_chain(pow_node, consumers, ("ReduceMean", "Add", "Sqrt", "Div", "Mul"))
    if chain is None:
        return None
    variance, add_eps, sqrt, div, mul = chain
    if (
        _axes(variance) != [-1]
        or list(div.input) != [centred, sqrt.output[0]]
        or add_eps.input[0] != variance.output[0]
    ):
        return None
    epsilon, gamma = constants.get(add_eps.input[1]), mul.input[1]
    if epsilon is None or gamma not in constants or mul.input[0] != div.output[0]:
        return None
    nodes, output, beta = [pow_node, variance, add_eps, sqrt, div, mul], mul.output[0], None
    after = consumers.get(output, [])
    if len(after) == 1 and after[0].op_type == "Add" and after[0].input[1] in constants:
        beta, output = after[0].input[1], after[0].output[0]
        nodes.append(after[0])
    transpose, perm = producer.get(centred), None
    if transpose is not None and transpose.op_type == "Transpose":
        perm = list(onnx.helper.get_attribute_value(transpose.attribute[0]))
        nodes.insert(0, transpose)
        centred_before = transpose.input[0]
    else:
        centred_before = centred
    sub = producer.get(centred_before)
    if sub is None or sub.op_type != "Sub":
        return None
    mean = producer.get(sub.input[1])
    if mean is None or mean.op_type != "ReduceMean" or mean.input[0] != sub.input[0]:
        return None
    wanted_axis = perm[-1] if perm is not None else -1
    rank = len(perm) if perm is not None else None
    axes = _axes(mean)
    if (
        axes is None
        or len(axes) != 1
        or (axes[0] != wanted_axis and (rank is None or axes[0] % rank != wanted_axis % rank))
    ):
        return None
    inner = {id(n) for n in nodes} | {id(sub), id(mean)}
    if any(id(c) not in inner for t in (sub.output[0], centred) for c in consumers.get(t, [])):
        return None  # an intermediate is used elsewhere: not a plain layer norm
    if any(id(c) not in inner for c in consumers.get(mean.output[0], [])):
        return None
    return [mean, sub, *nodes], sub.input[0], perm, gamma, beta, float(epsilon), output


def _single_chain(start, consumers, ops):
    """The nodes that follow `start` one by one with the op types `ops`, each the only consumer of the
    one before, or None."""
    chain, current = [], start
    for op in ops:
        following = [c for c in consumers.get(current.output[0], []) if c.op_type == op]
        if len(following) != 1 or len(consumers.get(current.output[0], [])) != 1:
            return None
        current = following[0]
        chain.append(current)
    return chain


def _axes(node) -> list[int] | None:
    for attribute in node.attribute:
        if attribute.name == "axes":
            return list(onnx.helper.get_attribute_value(attribute))
    return None

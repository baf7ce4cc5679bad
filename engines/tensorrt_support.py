"""What each TensorRT release accepts: the ONNX parser's operators and types, the rules that refuse a
model before any build, which precisions and DLA placements it offers.

The builder checks a model here before it spends minutes in TensorRT, and `orin-avatar engines plan`
shows the same verdicts for any release on any machine. Operator support comes from onnx-tensorrt's
own table (docs/operators.md, per release; `engines/data/onnx-tensorrt-operators.json` names the
commit each was read at). The other rules, each with where NVIDIA documents it:
- `If`: "Output tensors of the two conditional branches must have the same rank" (operators.md,
  10.x); onnx-tensorrt imports only the taken branch when the condition is a build-time constant.
- `DequantizeLinear`: only the input types of the table's row (INT8 on 8.6; INT8, FP8, INT4 on 10.x):
  ONNX Runtime's INT32 bias DequantizeLinear is refused (onnx/onnx-tensorrt#850).
- `QuantizeLinear`/`DequantizeLinear` zero points: a constant one must be all zeros ("TensorRT only
  supports symmetric quantization", QuantDequantLinearHelper in onnx-tensorrt 8.6-GA and 10.x; a UINT8
  constant is read as INT8: 8.6 converts UINT8 initializers on import, 10.x warns). A network with
  Q/DQ builds on 8.6/10.x only with `BuilderFlag.INT8` (explicit quantization, TensorRT developer
  guide), which the builder sets for such a model whatever its rung.
- `InstanceNormalization` on 8.6 becomes the `InstanceNormalization_TRT` plugin unless the parser's
  `OnnxParserFlag.NATIVE_INSTANCENORM` is set (NvOnnxParser.h, 8.6), and an engine holding a plugin
  deserializes only after `trt.init_libnvinfer_plugins` (NVIDIA's samples, Polygraphy's loaders).
- TensorRT 11 is strongly typed: no FP16 flag (FP16 needs an FP16 ONNX model), INT8 only from Q/DQ.
- DLA: FP16 and INT8 layers only (the DLA developer guide's supported precisions); static shapes only
  (profile min = opt = max); on TensorRT 11 from 11.4.1 (AGX Orin, JetPack
  7.2.2+); the 8.x/10.x calibration-cache path on JetPack 6.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a model is read (engines/onnx_check.py says why)
    import onnx

OPERATOR_TABLES = Path(__file__).parent / "data" / "onnx-tensorrt-operators.json"
# The TensorRT of each JetPack release this product supports (JetPack 6.0, 6.1/6.2, 7.2, 7.2.2+).
RELEASES = {"8.6": "8.6.2", "10.3": "10.3.0", "10.16": "10.16.1", "11.4": "11.4.1"}
_QDQ = ("QuantizeLinear", "DequantizeLinear")
_TYPE_NAMES = {
    "FLOAT": "FP32",
    "FLOAT16": "FP16",
    "INT8": "INT8",
    "INT32": "INT32",
    "INT64": "INT64",
    "UINT8": "UINT8",
    "BOOL": "BOOL",
    "BFLOAT16": "BF16",
    "INT4": "INT4",
    "FLOAT8E4M3FN": "FP8",
}


def version_tuple(version: str) -> tuple[int, int, int]:
    parts = [int(p) for p in (version.split(".") + ["0", "0"])[:3]]
    return parts[0], parts[1], parts[2]


def operator_table(version: str) -> str:
    """The onnx-tensorrt release whose table describes `version`'s parser (the nearest reachable one
    where the exact table is not in engines/data)."""
    return "8.6-GA" if version_tuple(version)[0] < 10 else "10.1-GA"


@functools.lru_cache(maxsize=4)
def _operators(release: str) -> dict:
    return json.loads(OPERATOR_TABLES.read_text())["releases"][release]["ops"]


def strongly_typed(version: str) -> bool:
    return version_tuple(version)[0] >= 11


def dla_problem(static: bool, version: str) -> str | None:
    """Why a model may not go to the DLA under TensorRT `version` (None: it may)."""
    if not static:
        return "dynamic shapes: the DLA needs min = opt = max, so it runs on the GPU"
    if strongly_typed(version) and version_tuple(version) < (11, 4, 1):
        return f"TensorRT {version} has no DLA support (TensorRT 11 has it from 11.4.1, JetPack 7.2.2+)"
    return None


def on_dla(precision: str) -> bool:
    """The DLA runs only FP16 and INT8 layers; an FP32 rung sent there would be a GPU engine labelled
    with a DLA core (TensorRT moves each FP32 layer to the GPU under GPU_FALLBACK)."""
    return precision in ("int8", "fp16")


def precisions(version: str, has_table: bool, quantized: bool = False) -> tuple[str, ...]:
    """The ladder TensorRT `version` can walk: INT8 where a table ships, FP16 (not on strongly typed
    11.x without an FP16 model), then plain FP32 before the CPU. A model with its own Q/DQ: INT8 from
    them, then (8.6/10.x) FP32 for the rest of its layers; an FP16 rung would build its INT8 again."""
    if quantized:
        return ("int8",) if strongly_typed(version) else ("int8", "fp32")
    ladder = ("int8",) if has_table else ()
    return ladder + (() if strongly_typed(version) else ("fp16",)) + ("fp32",)


@dataclass(frozen=True)
class Refusal:
    """Why TensorRT would refuse a model: what (an op, a type, a shape) and where."""

    what: str
    detail: str

    def __str__(self) -> str:
        return f"{self.what}: {self.detail}"


def refusals(model: onnx.ModelProto, version: str) -> list[Refusal]:
    """What TensorRT `version`'s ONNX parser would refuse in `model` (empty: it parses)."""
    release = operator_table(version)
    table = _operators(release)
    types = _value_types(model)
    constants = {t.name for t in model.graph.initializer} | {
        o for n in model.graph.node if n.op_type == "Constant" for o in n.output
    }
    found: list[Refusal] = []
    for op in sorted({n.op_type for n in model.graph.node}):
        row = table.get(op)
        if row is None or not row["supported"]:
            found.append(
                Refusal(
                    f"operator {op}", f"not supported by TensorRT {version}'s ONNX parser (onnx-tensorrt {release})"
                )
            )
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear":
            kind = types.get(node.input[0])
            allowed = table["DequantizeLinear"]["types"]
            if kind is not None and kind not in allowed:
                found.append(
                    Refusal(
                        f"DequantizeLinear {node.name or node.output[0]}",
                        f"input type {kind}; TensorRT {version} accepts {', '.join(allowed)}",
                    )
                )
        elif node.op_type == "If" and node.input[0] not in constants:
            ranks = [_branch_ranks(node, branch) for branch in ("then_branch", "else_branch")]
            if None not in ranks and ranks[0] != ranks[1]:
                found.append(
                    Refusal(
                        f"If {node.name or node.output[0]}",
                        f"its branches give outputs of ranks {ranks[0]} and {ranks[1]} and its condition "
                        "is computed at run time; TensorRT needs equal ranks",
                    )
                )
    return found + _zero_point_refusals(model, version)


def quantized(model: onnx.ModelProto) -> bool:
    """The model carries its own quantization (Q/DQ nodes)."""
    return any(n.op_type in _QDQ for n in model.graph.node)


def _zero_point_refusals(model: onnx.ModelProto, version: str) -> list[Refusal]:
    """Q/DQ zero points the parser of `version` refuses, counted over the model (one line, not one per node)."""
    from onnx import numpy_helper

    values = {t.name: t for t in model.graph.initializer} | {
        n.output[0]: a.t for n in model.graph.node if n.op_type == "Constant" for a in n.attribute if a.name == "value"
    }
    nodes = [n for n in model.graph.node if n.op_type in _QDQ and len(n.input) > 2 and n.input[2] in values]
    zero_points = [(n, numpy_helper.to_array(values[n.input[2]])) for n in nodes]
    found = []
    shifted = [n.name or n.output[0] for n, zero in zero_points if zero.any()]
    if shifted:
        found.append(
            Refusal(
                f"{len(shifted)} of {len(zero_points)} Q/DQ zero points (first {shifted[0]})",
                f"non-zero (asymmetric quantization); TensorRT {version} supports only symmetric quantization",
            )
        )
    return found


def needs_plugins(model: onnx.ModelProto, version: str) -> list[str]:
    """Plugins the parser of `version` would put in the engine without NATIVE_INSTANCENORM."""
    has_instance_norm = any(n.op_type == "InstanceNormalization" for n in model.graph.node)
    return ["InstanceNormalization_TRT"] if has_instance_norm and version_tuple(version)[0] < 10 else []


@functools.cache
def _onnx_types() -> dict[int, str]:
    import onnx

    return {getattr(onnx.TensorProto, name): ours for name, ours in _TYPE_NAMES.items()}


def _value_types(model: onnx.ModelProto) -> dict[str, str]:
    names = _onnx_types()
    types = {t.name: names.get(t.data_type, str(t.data_type)) for t in model.graph.initializer}
    for value in (*model.graph.input, *model.graph.value_info, *model.graph.output):
        if value.type.tensor_type.elem_type:
            types.setdefault(value.name, names.get(value.type.tensor_type.elem_type, "?"))
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    types[node.output[0]] = names.get(attribute.t.data_type, "?")
    return types


def _branch_ranks(node: onnx.NodeProto, branch: str) -> tuple[int, ...] | None:
    graph = next((a.g for a in node.attribute if a.name == branch), None)
    if graph is None or any(not o.type.tensor_type.HasField("shape") for o in graph.output):
        return None
    return tuple(len(o.type.tensor_type.shape.dim) for o in graph.output)

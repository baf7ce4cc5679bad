"""INT8 as TensorRT will run it, emulated on the CPU for the accuracy gates.

Each renderer of a table gets its own emulation, an ONNX model ONNX Runtime runs. Both place INT8
as engines.qdq_model says (Q/DQ at the inputs of the INT8 weighted layers, weights per output
channel); they differ in what the other layers compute in:
- implicit (TensorRT 8.6 and 10.x, calibration cache, FP16 flag set): every other layer runs in
  FP16, so its float outputs are rounded to FP16 (TensorRT Developer Guide, "Implicit Quantization":
  TensorRT picks FP16 or FP32 per layer, whichever is faster; FP16 is the worse case);
- explicit (TensorRT 11.x, strongly typed, the Q/DQ model): the rest in FP32, as a strongly typed
  FP32 model runs.
TensorRT may fuse or reorder float operations, so results are close to, not bit-equal with, the
device; the engine's own validation against FP32 on the device remains the last check.
"""

from __future__ import annotations

from pathlib import Path

import onnx

from engines.calibration_table import CalibrationTable
from engines.qdq_model import make_qdq_model

RENDERERS = ("implicit", "explicit")  # TensorRT 8.6/10.x (calibration cache), 11.x (Q/DQ model)
_NOT_ROUNDED = {"QuantizeLinear", "DequantizeLinear", "Cast", "Constant", "Shape", "Size"}


def emulated_models(model_path: Path, table: CalibrationTable, scratch: Path) -> dict[str, Path]:
    """The emulation of `table` under each renderer, written to `scratch`. One Q/DQ model serves both:
    it is the explicit emulation, and the implicit one is it with the rest rounded to FP16."""
    explicit, implicit = (scratch / f"{model_path.stem}.{renderer}.onnx" for renderer in ("explicit", "implicit"))
    make_qdq_model(model_path, table, explicit)
    model = onnx.load(str(explicit))
    round_to_fp16(model)
    onnx.save(model, str(implicit))
    return {"implicit": implicit, "explicit": explicit}


def round_to_fp16(model: onnx.ModelProto) -> None:
    """Round every float tensor a non-INT8 layer computes to FP16 and back (Cast pairs after it)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    floats = {
        v.name
        for v in (*inferred.graph.value_info, *inferred.graph.output)
        if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    }
    dequantized = {o for n in model.graph.node if n.op_type == "DequantizeLinear" for o in n.output}
    nodes = []
    for node in model.graph.node:
        nodes.append(node)
        if node.op_type in _NOT_ROUNDED:
            continue
        for index, name in enumerate(node.output):
            if name in floats and name not in dequantized:
                exact = f"{name}__fp32"
                node.output[index] = exact
                nodes.append(
                    onnx.helper.make_node(
                        "Cast", [exact], [f"{name}__fp16"], to=onnx.TensorProto.FLOAT16, name=f"{name}__to_fp16"
                    )
                )
                nodes.append(
                    onnx.helper.make_node(
                        "Cast", [f"{name}__fp16"], [name], to=onnx.TensorProto.FLOAT, name=f"{name}__from_fp16"
                    )
                )
    del model.graph.node[:]
    model.graph.node.extend(nodes)

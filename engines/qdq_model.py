"""The Q/DQ (explicitly quantized) model derived from a calibration table.

ONNX Runtime's QDQ quantizer does the graph work from the table's ranges (no calibration data
on the device); the same model serves TensorRT's explicit quantization (10.x, 11.x) and INT8 on
the CPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from engines.calibration_table import CalibrationTable


def tensor_names(model: onnx.ModelProto) -> set[str]:
    """Every tensor a calibration table may name: the graph inputs and the nodes' inputs and outputs."""
    return {t for n in model.graph.node for t in (*n.input, *n.output)} | {i.name for i in model.graph.input}


def output_tensors(model: onnx.ModelProto, nodes: tuple[str, ...]) -> set[str]:
    wanted = set(nodes)
    return {out for node in model.graph.node if node.name in wanted for out in node.output}


def make_qdq_model(model_path: Path, table: CalibrationTable, dest: Path) -> None:
    """Insert symmetric INT8 QuantizeLinear/DequantizeLinear pairs for every tensor with a range;
    the table's fp32 nodes are left in float."""
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization.calibrate import CalibrationMethod, TensorData, TensorsData
    from onnxruntime.quantization.qdq_quantizer import QDQQuantizer
    from onnxruntime.quantization.quant_utils import save_and_reload_model_with_shape_infer
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    model = save_and_reload_model_with_shape_infer(onnx.load(str(model_path)))
    ranges = TensorsData(CalibrationMethod.MinMax, {
        name: TensorData(lowest=np.array(-amax, np.float32), highest=np.array(amax, np.float32))
        for name, amax in table.amax.items()})
    quantizer = QDQQuantizer(
        # Per-tensor weights: per-channel was measured worse on BlazeFace's depthwise convolutions
        # (boxes shifted, a face lost); TensorRT picks its own weight scales in implicit mode anyway.
        model, False, False, QuantType.QInt8, QuantType.QInt8, ranges, None, list(table.fp32_nodes),
        list(table.ops) or sorted(set(QLinearOpsRegistry) | set(QDQRegistry)),  # quantize_static's default: all
        # No INT32 bias DequantizeLinear: TensorRT's parser takes DequantizeLinear of INT8 (FP8, INT4)
        # only (onnx-tensorrt operators.md; onnx/onnx-tensorrt#850), and TensorRT folds biases itself.
        {"ActivationSymmetric": True, "WeightSymmetric": True, "QuantizeBias": False},
    )
    quantizer.quantize_model()
    quantizer.model.save_model_to_file(str(dest), False)

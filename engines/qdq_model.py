"""Where TensorRT runs INT8, and the Q/DQ model that places it there.

TensorRT has INT8 kernels for its weighted layers (convolution, deconvolution, matrix multiply,
GEMM); normalizations, softmax, activations like GELU and recurrent layers stay in FP16 or FP32.
The placement follows NVIDIA's TensorRT Developer Guide:
- "Quantization Schemes": symmetric INT8, scale = amax / 127; weights per output channel.
- "Explicit Quantization" > "Q/DQ Layer-Placement Recommendations": quantize all inputs of weighted
  operations, and by default do not quantize their outputs. That is the model TensorRT 11 (strongly
  typed, explicit quantization only) is given.
- Implicit quantization (8.6, 10.x, with a calibration cache) gives TensorRT the same tensors' scales:
  the inputs and outputs of the weighted layers. A tensor stays INT8 only between two layers that
  run in INT8; where a weighted layer feeds a float layer (its bias add, GELU, softmax, a residual
  add, a normalization) TensorRT fuses the bias into it or reformats to FP16, so its output is not
  quantized there either. The same placement therefore emulates both paths (calibration.emulation).
A layer the table keeps in higher precision (`fp16_nodes`) gets no Q/DQ pair at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported where a model is read (engines/onnx_check.py says why)
    import onnx

from engines.calibration_table import CalibrationTable

WEIGHTED_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")  # the layers TensorRT has INT8 kernels for


def tensor_names(model: onnx.ModelProto) -> set[str]:
    """Every tensor a calibration table may name: the graph inputs and the nodes' inputs and outputs."""
    return {t for n in model.graph.node for t in (*n.input, *n.output)} | {i.name for i in model.graph.input}


def output_tensors(model: onnx.ModelProto, nodes: tuple[str, ...]) -> set[str]:
    wanted = set(nodes)
    return {out for node in model.graph.node if node.name in wanted for out in node.output}


def weighted_layers(model: onnx.ModelProto) -> list[str]:
    """The names of the nodes TensorRT could run in INT8, in graph order."""
    return [n.name for n in model.graph.node if n.op_type in WEIGHTED_OPS]


def int8_layers(model: onnx.ModelProto, table: CalibrationTable) -> list[str]:
    """The weighted layers the table puts in INT8: all but its FP16 ones."""
    kept = set(table.fp16_nodes)
    return [name for name in weighted_layers(model) if name not in kept]


def make_qdq_model(model_path: Path, table: CalibrationTable, dest: Path) -> None:
    """The model with symmetric INT8 QuantizeLinear/DequantizeLinear pairs at the inputs of every INT8
    layer, weights per output channel; no INT32 bias
    DequantizeLinear, which TensorRT's parser refuses (onnx-tensorrt operators.md: DequantizeLinear
    takes INT8, FP8 or INT4; onnx/onnx-tensorrt#850) and does not need (it folds biases itself)."""
    import onnx
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization.calibrate import CalibrationMethod, TensorData, TensorsData
    from onnxruntime.quantization.qdq_quantizer import QDQQuantizer
    from onnxruntime.quantization.quant_utils import save_and_reload_model_with_shape_infer

    model = save_and_reload_model_with_shape_infer(onnx.load(str(model_path)))
    ranges = TensorsData(
        CalibrationMethod.MinMax,
        {
            name: TensorData(lowest=np.array(-amax, np.float32), highest=np.array(amax, np.float32))
            for name, amax in table.amax.items()
        },
    )
    quantizer = QDQQuantizer(
        model,
        True,
        False,
        QuantType.QInt8,
        QuantType.QInt8,
        ranges,
        None,
        list(table.fp16_nodes),
        list(WEIGHTED_OPS),
        {
            "ActivationSymmetric": True,
            "WeightSymmetric": True,
            "QuantizeBias": False,
            "OpTypesToExcludeOutputQuantization": list(WEIGHTED_OPS),
        },
    )
    quantizer.quantize_model()
    quantizer.model.save_model_to_file(str(dest), False)

"""A small stand-in for `orin-avatar calibrate` in the engine tests: ranges of every float tensor
of a model on its golden inputs, written as a portable calibration table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from engines.calibration_table import CalibrationTable, write_table
from engines.model_policy import POLICIES
from engines.store.model_store import ModelStore


def make_table(store: ModelStore, name: str, dest: Path, method: str = "entropy", scale: float = 1.0) -> Path:
    policy = POLICIES[name]
    model = onnx.load(str(store.path(policy.model)))
    inferred = onnx.shape_inference.infer_shapes(model)
    floats = {v.name for v in (*inferred.graph.value_info, *inferred.graph.output)
              if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT}
    existing = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for out in node.output:
            if out in floats and out not in existing:
                model.graph.output.append(onnx.helper.make_tensor_value_info(out, onnx.TensorProto.FLOAT, None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    values = session.run(names, policy.golden())
    observed = dict(zip(names, values)) | {k: v for k, v in policy.golden().items() if v.dtype == np.float32}
    amax = {n: float(np.abs(v).max()) * scale for n, v in observed.items()
            if v.dtype == np.float32 and (n in floats or n in policy.golden()) and np.abs(v).max() > 0}
    table = CalibrationTable(policy.model, store.entries()[policy.model].sha256, method, amax)
    path = dest / f"{name}.json"
    write_table(path, table)
    return path

"""Making a calibration table: collect ranges, check the accuracy gate, keep sensitive layers in FP32.

Ranges come from ONNX Runtime's own calibrators (entropy, percentile, min-max; symmetric). INT8 is
then judged as the device will run it: the Q/DQ model derived from the table, against FP32, on the
held-apart samples. If the gate fails, a leave-one-out sweep measures how much keeping each
candidate layer in FP32 helps, and layers are kept out of INT8 in that order until the gate
passes (for all-MiniLM-L6-v2: the feed-forward output MatMuls first). A table that cannot pass
is not written.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
import onnx

from engines.errors import InputError
from engines.model_specs import MODELS
from engines.onnxrt_runner import OnnxRuntimeRunner
from engines.store.model_store import ModelStore

from engines.qdq_model import make_qdq_model, tensor_names
from engines.calibration_table import CalibrationTable, CalibrationTableError, read_table, write_table
from calibration.targets import TARGETS, Gate, Target

Report = Callable[[str], None]
MAX_FP32_NODES = 12  # beyond this, INT8 buys little: the table is not written


@dataclass(frozen=True)
class Result:
    model: str
    table: CalibrationTable | None
    gate: Gate
    latency_ms: dict[str, float]
    written: Path | None
    why: str = ""


def calibrate(name: str, store: ModelStore, out: Path, method: str = "entropy", samples: int = 64,
              data: Path | None = None, report: Report = print, max_fp32: int = MAX_FP32_NODES) -> Result:
    target = TARGETS[name]
    dataset = target.dataset(store, data)
    feeds = target.feeds(store, dataset.calibrate)[:samples]
    if not feeds or not dataset.held:
        raise InputError(f"no calibration data for {name}")
    model_path = store.path(target.model)
    amax = collect_ranges(model_path, feeds, method, report, target.ops)
    table = CalibrationTable(target.model, store.entries()[target.model].sha256, method, amax, (), target.ops, _tools())
    with tempfile.TemporaryDirectory(prefix="orin-avatar-calibrate-") as scratch:
        gate = evaluate(store, target, table, dataset.held, Path(scratch))
        report(f"{name}: all-INT8 {gate.metric} = {gate.value:.4f} ({'pass' if gate.passed else 'fail'}, needs {gate.threshold})")
        if not gate.passed and max_fp32 > 0:
            table, gate = sweep(store, target, table, dataset.held, Path(scratch), report, max_fp32)
        latency = compare_latency(model_path, table, MODELS[name].golden(), Path(scratch))
    if not gate.passed:
        return Result(name, None, gate, latency, None,
                      f"INT8 misses the gate ({gate.metric} = {gate.value:.4f}, needs {gate.threshold}) even with "
                      f"up to {max_fp32} layers in FP32: no table written, {name} runs in FP16 on TensorRT")
    table = replace(table, gates=gate.as_dict() | {"held_apart": len(dataset.held), "samples": len(feeds)})
    path = out / f"{name}.json"
    write_table(path, table)
    return Result(name, table, gate, latency, path)


def collect_ranges(model_path: Path, feeds: list[dict], method: str, report: Report,
                   ops: tuple[str, ...] = ()) -> dict[str, float]:
    """Symmetric ranges of the tensors around `ops` nodes (all nodes if empty)."""
    from onnxruntime.quantization.calibrate import CalibrationDataReader, CalibrationMethod, create_calibrator

    methods = {"entropy": CalibrationMethod.Entropy, "percentile": CalibrationMethod.Percentile,
               "minmax": CalibrationMethod.MinMax}

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(enumerate(feeds, 1))

        def get_next(self):
            index, item = next(self.items, (None, None))
            if index is not None and (index % max(1, len(feeds) // 10) == 0 or index == len(feeds)):
                bar = "#" * (20 * index // len(feeds))
                report(f"  collecting ranges [{bar:<20}] {index}/{len(feeds)}")
            return item

    with tempfile.TemporaryDirectory(prefix="orin-avatar-ranges-") as scratch:
        calibrator = create_calibrator(
            str(model_path), list(ops) or None, augmented_model_path=str(Path(scratch) / "augmented.onnx"),
            calibrate_method=methods[method],
            extra_options={"symmetric": True, "num_bins": 512, "num_quantized_bins": 128, "percentile": 99.99})
        calibrator.collect_data(Reader())
        ranges = calibrator.compute_data()
    amax = {}
    for tensor, data in ranges.data.items():
        low, high = (float(np.max(np.abs(v))) for v in data.range_value)
        value = max(low, high)
        if np.isfinite(value) and value > 0:
            amax[tensor] = value
    if not amax:
        raise CalibrationTableError(f"calibration of {model_path.name} produced no usable range")
    return amax


def evaluate(store: ModelStore, target: Target, table: CalibrationTable, held: list, scratch: Path) -> Gate:
    qdq = scratch / f"{target.model}.{len(table.fp32_nodes)}.qdq.onnx"
    make_qdq_model(store.path(target.model), table, qdq)
    with OnnxRuntimeRunner("fp32", store.path(target.model), threads=2) as fp32, OnnxRuntimeRunner("int8", qdq, threads=2) as int8:
        return target.gate(store, fp32, int8, held)


def sweep(store: ModelStore, target: Target, table: CalibrationTable, held: list, scratch: Path,
          report: Report, max_fp32: int = MAX_FP32_NODES) -> tuple[CalibrationTable, Gate]:
    model = onnx.load(str(store.path(target.model)), load_external_data=False)
    candidates = [n.name for n in model.graph.node if n.op_type in target.sweep_ops and n.name]
    report(f"  sensitivity sweep over {len(candidates)} {'/'.join(target.sweep_ops)} layers")
    scores = []
    for i, node in enumerate(candidates, 1):
        gate = evaluate(store, target, replace(table, fp32_nodes=(node,)), held, scratch)
        scores.append((gate.quality, node))
        if i % 5 == 0 or i == len(candidates):
            report(f"  sweep {i}/{len(candidates)}")
    kept: list[str] = []
    gate = Gate("", 0.0, "", False, float("-inf"))
    for _, node in sorted(scores, reverse=True)[:max_fp32]:
        kept.append(node)
        gate = evaluate(store, target, replace(table, fp32_nodes=tuple(kept)), held, scratch)
        report(f"  keeping {len(kept)} layer(s) in FP32 (+{node}): {gate.metric} = {gate.value:.4f}")
        if gate.passed:
            break
    return replace(table, fp32_nodes=tuple(kept)), gate


def check(name: str, store: ModelStore, tables: Path, data: Path | None = None) -> Result:
    """The gate of a committed table on held-apart samples."""
    target = TARGETS[name]
    path = tables / f"{name}.json"
    model = onnx.load(str(store.path(target.model)), load_external_data=False)
    table = read_table(path, store.entries()[target.model].sha256, tensor_names(model))
    dataset = target.dataset(store, data)
    with tempfile.TemporaryDirectory(prefix="orin-avatar-check-") as scratch:
        gate = evaluate(store, target, table, dataset.held, Path(scratch))
        latency = compare_latency(store.path(target.model), table, MODELS[name].golden(), Path(scratch))
    return Result(name, table, gate, latency, path)


def compare_latency(model_path: Path, table: CalibrationTable, golden: dict, scratch: Path, runs: int = 10) -> dict[str, float]:
    """Median CPU latency of FP32 and of the Q/DQ INT8 model on the golden inputs."""
    qdq = scratch / "latency.qdq.onnx"
    make_qdq_model(model_path, table, qdq)
    medians = {}
    for label, path in (("fp32_ms", model_path), ("int8_ms", qdq)):
        with OnnxRuntimeRunner(label, path, threads=2) as runner:
            runner.infer(golden)
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                runner.infer(golden)
                times.append(time.perf_counter() - started)
        medians[label] = round(float(np.median(times)) * 1000, 2)
    return medians


def _tools() -> dict[str, str]:
    import importlib.metadata

    import onnxruntime

    try:
        ours = importlib.metadata.version("orin-avatar")
    except importlib.metadata.PackageNotFoundError:
        ours = "source"
    return {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__, "orin-avatar": ours}

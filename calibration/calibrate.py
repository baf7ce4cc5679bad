"""Making a calibration table: collect ranges, choose the layers that must stay FP16, gate the result.

Ranges come from ONNX Runtime's own calibrators (entropy, percentile, min-max; symmetric) over the
tensors around the weighted layers, the only ones TensorRT runs in INT8 (engines.qdq_model). INT8 is
judged as TensorRT will run it, once per renderer (calibration.emulation), against FP32.

When the all-INT8 emulation misses its gate on the tuning split, a sensitivity sweep keeps each
weighted layer alone out of INT8 and measures how much closer to FP32 the outputs come; layers are
then kept in FP16 in that order (doubling their number, then bisecting) until the tuning gate
passes, at most `max_fp16` of them (by default half: a model with fewer than half its weighted
layers in INT8 gains little). The held-apart split is used only for the final gates, which decide:
a table that misses them is not written.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx

from engines.calibration_table import CalibrationTable, CalibrationTableError, read_table, write_table
from engines.errors import InputError
from engines.onnxrt_runner import OnnxRuntimeRunner
from engines.qdq_model import WEIGHTED_OPS, int8_layers, output_tensors, tensor_names, weighted_layers
from engines.runner import Runner
from engines.store.model_store import ModelStore

from calibration.emulation import RENDERERS, emulated_models
from calibration.targets import TARGETS, Gate, Target

Report = Callable[[str], None]
SENSITIVITY_FEEDS = 16  # tuning inputs the per-layer sweep compares outputs on


@dataclass(frozen=True)
class Result:
    model: str
    table: CalibrationTable | None
    gates: dict[str, Gate]  # renderer -> gate on the held-apart split
    layers: tuple[int, int]  # (INT8 weighted layers, all weighted layers)
    emits: dict[str, str]  # renderer -> what it gives TensorRT
    written: Path | None
    curve: tuple[tuple[int, float], ...] = ()  # (layers in FP16, tuning-gate value) as the sweep tried them
    why: str = ""
    sensitivity: dict[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates.values())


def calibrate(
    name: str,
    store: ModelStore,
    out: Path,
    method: str | None = None,
    samples: int | None = None,
    data: Path | None = None,
    report: Report = print,
    max_fp16: int | None = None,
) -> Result:
    target = TARGETS[name]
    method = method or target.method
    dataset = target.dataset(store, data)
    feeds = spread(target.feeds(store, dataset.calibrate), samples or target.samples)
    if not feeds or not dataset.held:
        raise InputError(f"no calibration data for {name}")
    model_path = store.path(target.model)
    model = onnx.load(str(model_path), load_external_data=False)
    layers = weighted_layers(model)
    limit = len(layers) // 2 if max_fp16 is None else min(max_fp16, len(layers))
    amax = collect_ranges(model_path, feeds, method, report)
    table = CalibrationTable(target.model, store.entries()[target.model].sha256, method, amax, tools=_tools())
    curve: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory(prefix="orin-avatar-calibrate-") as scratch:
        tuning_fp32 = reference(store, target, dataset.calibrate)
        tuning = tuning_gate(store, target, table, dataset.calibrate, tuning_fp32, Path(scratch))
        curve.append((0, tuning.value))
        report(
            f"{name}: all {len(layers)} weighted layers in INT8: {tuning.metric} = {tuning.value:.4f} "
            "on the tuning split "
            f"({'pass' if tuning.passed else 'fail'}, needs {tuning.threshold})"
        )
        if not tuning.passed and limit > 0:
            table, tried = sweep(
                store, target, table, layers, dataset.calibrate, tuning_fp32, feeds, Path(scratch), report, limit
            )
            curve += tried
        gates, emits = held_apart(store, target, model, table, dataset.held, Path(scratch))
    result = Result(
        name,
        table,
        gates,
        (len(int8_layers(model, table)), len(layers)),
        emits,
        None,
        tuple(curve),
        sensitivity=table.sensitivity,
    )
    if not result.passed:
        return replace(
            result,
            table=None,
            why=(
                f"INT8 misses its gate even with {len(table.fp16_nodes)} of {len(layers)} weighted layers "
                "in FP16 (at most "
                f"{limit}): no table written, {name} runs in FP16 on TensorRT 8.6/10.x and FP32 on 11.x"
            ),
        )
    table = replace(
        table,
        gates={r: g.as_dict() for r, g in gates.items()}
        | {
            "held_apart": len(dataset.held),
            "samples": len(feeds),
            "int8_layers": list(result.layers),
            "curve": [list(point) for point in curve],
        },
    )
    path = out / f"{name}.json"
    write_table(path, table)
    return replace(result, table=table, written=path)


def spread(items: list, count: int) -> list:
    """`count` items spread evenly over `items` (all of them if there are fewer)."""
    if len(items) <= count:
        return items
    return [items[int(i)] for i in np.linspace(0, len(items) - 1, count)]


def collect_ranges(model_path: Path, feeds: list[dict], method: str, report: Report) -> dict[str, float]:
    """Symmetric ranges of the tensors around the weighted layers."""
    from onnxruntime.quantization.calibrate import CalibrationDataReader, CalibrationMethod, create_calibrator

    methods = {
        "entropy": CalibrationMethod.Entropy,
        "percentile": CalibrationMethod.Percentile,
        "minmax": CalibrationMethod.MinMax,
    }

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
            str(model_path),
            list(WEIGHTED_OPS),
            augmented_model_path=str(Path(scratch) / "augmented.onnx"),
            calibrate_method=methods[method],
            extra_options={"symmetric": True, "num_bins": 512, "num_quantized_bins": 128, "percentile": 99.99},
        )
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


def reference(store: ModelStore, target: Target, items: list) -> Any:
    """What FP32 makes of `items`, which every emulation of the target is gated against."""
    with OnnxRuntimeRunner("fp32", store.path(target.model), threads=2) as fp32:
        return target.reference(store, fp32, items)


def tuning_gate(
    store: ModelStore, target: Target, table: CalibrationTable, items: list, fp32: Any, scratch: Path
) -> Gate:
    """The target's gate on tuning `items` (FP32's reference of them: `fp32`), INT8 emulated as TensorRT
    8.6/10.x run it: the sweep's yardstick."""
    return gate(store, target, emulated_models(store.path(target.model), table, scratch)["implicit"], items, fp32)


def gate(store: ModelStore, target: Target, emulation: Path, items: list, fp32: Any) -> Gate:
    """The target's gate on `items` for one INT8 `emulation`, against `fp32`, FP32's reference of them."""
    with OnnxRuntimeRunner("int8", emulation, threads=2) as int8:
        return target.gate(store, fp32, int8, items)


def held_apart(
    store: ModelStore, target: Target, model: onnx.ModelProto, table: CalibrationTable, held: list, scratch: Path
) -> tuple[dict[str, Gate], dict[str, str]]:
    """The gates that decide, one per renderer on the held-apart split, and what each renderer gives
    TensorRT (`model`: the target's)."""
    emulations = emulated_models(store.path(target.model), table, scratch)
    fp32 = reference(store, target, held)
    gates = {r: gate(store, target, emulations[r], held, fp32) for r in RENDERERS}
    return gates, renderings(model, table, emulations["explicit"])


def fidelity(reference: list[dict], runner: Runner, feeds: list[dict]) -> float:
    """How close `runner`'s outputs come to FP32's: 1 - the worst output's error energy over its energy."""
    outputs = [runner.infer(f) for f in feeds]
    errors = []
    for name in reference[0]:
        want = np.concatenate([r[name].ravel() for r in reference]).astype(np.float64)
        got = np.concatenate([o[name].ravel() for o in outputs]).astype(np.float64)
        errors.append(np.sum((got - want) ** 2) / max(np.sum(want**2), 1e-12))
    return 1.0 - float(max(errors))


def sweep(
    store: ModelStore,
    target: Target,
    table: CalibrationTable,
    layers: list[str],
    tuning: list,
    tuning_fp32: Any,
    feeds: list[dict],
    scratch: Path,
    report: Report,
    limit: int,
) -> tuple[CalibrationTable, list[tuple[int, float]]]:
    """The table with the fewest FP16 layers (most sensitive first) that passes the tuning gate, and
    the (layers in FP16, tuning-gate value) pairs tried on the way. `tuning_fp32`: FP32's reference of
    the tuning split."""
    model_path = store.path(target.model)
    probe = spread(feeds, SENSITIVITY_FEEDS)
    with OnnxRuntimeRunner("fp32", model_path, threads=2) as fp32:
        reference = [fp32.infer(f) for f in probe]
    report(f"  sensitivity sweep over {len(layers)} weighted layers")
    gains = {}
    for i, layer in enumerate(layers, 1):
        path = emulated_models(model_path, replace(table, fp16_nodes=(layer,)), scratch)["implicit"]
        with OnnxRuntimeRunner("sweep", path, threads=2) as runner:
            gains[layer] = fidelity(reference, runner, probe)
        if i % 5 == 0 or i == len(layers):
            report(f"  sweep {i}/{len(layers)}")
    order = sorted(layers, key=lambda name: -gains[name])
    tried: dict[int, Gate] = {}

    def attempt(count: int) -> Gate:
        kept = replace(table, fp16_nodes=tuple(order[:count]))
        tried[count] = tuning_gate(store, target, kept, tuning, tuning_fp32, scratch)
        report(
            f"  {count} layer(s) in FP16: {tried[count].metric} = {tried[count].value:.4f} "
            f"({'pass' if tried[count].passed else 'fail'})"
        )
        return tried[count]

    counts = [2**k for k in range(limit.bit_length()) if 2**k < limit] + [limit]
    low, high = 0, None  # low fails; high, once found, passes
    for count in counts:
        if attempt(count).passed:
            high = count
            break
        low = count
    while high is not None and high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if attempt(middle).passed else (middle, high)
    chosen = high if high is not None else limit
    kept = tuple(order[:chosen])
    curve = [(count, gate.value) for count, gate in sorted(tried.items())]
    return replace(table, fp16_nodes=kept, sensitivity={n: round(gains[n], 6) for n in kept}), curve


def renderings(model: onnx.ModelProto, table: CalibrationTable, qdq: Path) -> dict[str, str]:
    """What each renderer gives TensorRT for this table (`model`: the one it was made for; `qdq`: its Q/DQ model)."""
    pairs = sum(1 for n in onnx.load(str(qdq), load_external_data=False).graph.node if n.op_type == "QuantizeLinear")
    scales = len(table.int8_amax(output_tensors(model, table.fp16_nodes)))
    int8 = len(int8_layers(model, table))
    return {
        "implicit": f"calibration cache: {scales} scales; {len(table.fp16_nodes)} layer(s) FP16 under "
        "OBEY_PRECISION_CONSTRAINTS",
        "explicit": f"Q/DQ model: {pairs} Q/DQ pairs at the inputs of {int8} INT8 layers",
    }


def check(name: str, store: ModelStore, tables: Path, data: Path | None = None) -> Result:
    """The gates of a committed table on the held-apart split, for every renderer."""
    target = TARGETS[name]
    path = tables / f"{name}.json"
    model_path = store.path(target.model)
    model = onnx.load(str(model_path), load_external_data=False)
    table = read_table(path, store.entries()[target.model].sha256, tensor_names(model), set(weighted_layers(model)))
    dataset = target.dataset(store, data)
    with tempfile.TemporaryDirectory(prefix="orin-avatar-check-") as scratch:
        gates, emits = held_apart(store, target, model, table, dataset.held, Path(scratch))
    layers = (len(int8_layers(model, table)), len(weighted_layers(model)))
    return Result(name, table, gates, layers, emits, path, sensitivity=table.sensitivity)


def _tools() -> dict[str, str]:
    import importlib.metadata

    import onnxruntime

    try:
        ours = importlib.metadata.version("orin-avatar")
    except importlib.metadata.PackageNotFoundError:
        ours = "source"
    return {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__, "orin-avatar": ours}

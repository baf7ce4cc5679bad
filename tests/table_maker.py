"""Calibration tables for the engine tests, made by the product's own range collection
(`calibration.calibrate.collect_ranges`, ONNX Runtime's min-max calibrator) on a model's golden
inputs; `scale` makes a different (still valid) table."""

from __future__ import annotations

from pathlib import Path

from engines.calibration_table import CalibrationTable, write_table
from engines.model_specs import MODELS
from engines.store.model_store import ModelStore

from calibration.calibrate import collect_ranges


def make_table(store: ModelStore, name: str, dest: Path, method: str = "entropy", scale: float = 1.0) -> Path:
    spec = MODELS[name]
    amax = collect_ranges(store.path(spec.model), [spec.golden()], "minmax", lambda line: None)
    table = CalibrationTable(
        spec.model,
        store.entries()[spec.model].sha256,
        method,
        {tensor: value * scale for tensor, value in amax.items()},
    )
    path = dest / f"{name}.json"
    write_table(path, table)
    return path

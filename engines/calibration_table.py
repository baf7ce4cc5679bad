"""The portable calibration table, and the TensorRT calibration cache rendered from it.

One JSON file per model: the model's sha256, the method, per-tensor amax (the symmetric range) of
the tensors around its weighted layers, the layers kept out of INT8 (FP16 on 8.6/10.x, FP32 on the
strongly typed 11.x) with the sensitivity that put them there, and the tool versions. On the device
it becomes, for the running TensorRT, a calibration cache (implicit INT8, 8.6 and 10.x) or a Q/DQ
model (explicit, 11.x; engines.qdq_model).

The TensorRT cache is text: `TRT-<version>-<algorithm>`, then `name: <hex>` per tensor, the hex
being the big-endian float32 bits of scale = amax / 127. Tables store amax as exactly 127 times a
float32 scale, so table -> cache -> table is bit-exact.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engines.errors import OrinAvatarError
from engines.files import write_atomic

SCHEMA = 2  # 2: fp16_nodes and their sensitivity; weighted layers only (1 had fp32_nodes, all ops)
ALGORITHMS = {"entropy": "EntropyCalibration2", "minmax": "MinMaxCalibration", "percentile": "EntropyCalibration2"}


class CalibrationTableError(OrinAvatarError):
    """A calibration table or cache is malformed or belongs to another model."""


@dataclass(frozen=True)
class CalibrationTable:
    model: str  # store file name, e.g. "face.onnx"
    model_sha256: str
    method: str  # entropy | percentile | minmax
    amax: dict[str, float]  # tensor name -> symmetric range
    fp16_nodes: tuple[str, ...] = ()  # weighted layers kept out of INT8 (no scale, no Q/DQ pair)
    sensitivity: dict[str, float] = field(default_factory=dict)  # fp16 node -> gate quality with it alone kept out
    tools: dict[str, str] = field(default_factory=dict)
    gates: dict = field(default_factory=dict)  # accuracy measured by `calibrate --check`

    def int8_amax(self, fp16_tensors: set[str]) -> dict[str, float]:
        """The ranges TensorRT gets: all but the outputs of the layers kept in higher precision."""
        return {name: value for name, value in self.amax.items() if name not in fp16_tensors}


def exact_amax(amax: float) -> float:
    """The amax nearest to `amax` that is exactly 127 times a float32 scale."""
    return float(np.float32(amax / 127.0)) * 127.0


def trt_version_number(version: str) -> int:
    """'8.6.1' -> 8601, '10.3.0' -> 100300: the number in a calibration cache header."""
    parts = [int(p) for p in (version.split(".") + ["0", "0"])[:3]]
    major, minor, patch = parts
    return major * (10000 if major >= 10 else 1000) + minor * 100 + patch


def render_trt_cache(table: CalibrationTable, trt_version: str, fp16_tensors: set[str] = frozenset()) -> bytes:
    """The calibration cache the running TensorRT accepts (its version and algorithm in the header);
    `fp16_tensors`, the outputs of the layers kept out of INT8, get no scale."""
    lines = [f"TRT-{trt_version_number(trt_version)}-{ALGORITHMS[table.method]}"]
    for name, amax in sorted(table.int8_amax(set(fp16_tensors)).items()):
        scale = np.float32(amax / 127.0)
        lines.append(f"{name}: {struct.pack('>f', scale).hex()}")
    return ("\n".join(lines) + "\n").encode()


def parse_trt_cache(text: str) -> tuple[str, dict[str, float]]:
    """(header, {tensor: amax}) of a TensorRT calibration cache; errors name the line."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("TRT-") or lines[0].count("-") < 2:
        raise CalibrationTableError("line 1: a TensorRT calibration cache starts with TRT-<version>-<algorithm>")
    amax: dict[str, float] = {}
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        name, sep, value = line.rpartition(": ")
        try:
            if not sep or not name:
                raise ValueError("no 'name: hex'")
            scale = struct.unpack(">f", bytes.fromhex(value.strip()))[0]
        except (ValueError, struct.error) as exc:
            raise CalibrationTableError(f"line {number}: {line!r} is not 'tensor: 8 hex digits' ({exc})") from None
        amax[name] = _checked(name, float(np.float32(scale)) * 127.0, f"line {number}")
    return lines[0], amax


def _checked(name: str, amax: float, where: str) -> float:
    if not math.isfinite(amax) or amax <= 0:
        raise CalibrationTableError(f"{where}: tensor {name!r} has range {amax}; a range must be finite and above zero")
    return amax


def table_from_trt_cache(text: str, model: str, model_sha256: str, method: str) -> CalibrationTable:
    _, amax = parse_trt_cache(text)
    return CalibrationTable(model, model_sha256, method, amax)


def write_table(path: Path, table: CalibrationTable) -> None:
    """Validate, normalise amax to exact values, write atomically."""
    amax = {name: exact_amax(_checked(name, float(v), str(path))) for name, v in sorted(table.amax.items())}
    if table.method not in ALGORITHMS:
        raise CalibrationTableError(f"{path}: method {table.method!r} is not one of {', '.join(ALGORITHMS)}")
    data = {
        "schema": SCHEMA,
        "model": table.model,
        "model_sha256": table.model_sha256,
        "method": table.method,
        "amax": amax,
        "fp16_nodes": list(table.fp16_nodes),
        "sensitivity": table.sensitivity,
        "tools": table.tools,
        "gates": table.gates,
    }
    write_atomic(path, (json.dumps(data, indent=1) + "\n").encode())


def read_table(
    path: Path,
    model_sha256: str | None = None,
    tensor_names: set[str] | None = None,
    layer_names: set[str] | None = None,
) -> CalibrationTable:
    """Read and validate a table; `model_sha256`, `tensor_names` and `layer_names` (the model's
    weighted layers) check it belongs to the model."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise CalibrationTableError(f"cannot read calibration table {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise CalibrationTableError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        old = isinstance(data, dict) and isinstance(data.get("schema"), int) and data["schema"] < SCHEMA
        raise CalibrationTableError(
            f"{path} is an orin-avatar calibration table of schema {data['schema']}, made before INT8 followed "
            f"TensorRT's placement; run 'orin-avatar calibrate' to make it again"
            if old
            else f"{path} is not an orin-avatar calibration table (schema {SCHEMA})"
        )
    try:
        table = CalibrationTable(
            model=str(data["model"]),
            model_sha256=str(data["model_sha256"]),
            method=str(data["method"]),
            amax={str(k): _checked(k, float(v), str(path)) for k, v in data["amax"].items()},
            fp16_nodes=tuple(str(n) for n in data.get("fp16_nodes", ())),
            sensitivity={str(k): float(v) for k, v in data.get("sensitivity", {}).items()},
            tools=dict(data.get("tools", {})),
            gates=dict(data.get("gates", {})),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibrationTableError(f"{path}: missing or malformed field {exc}") from None
    if model_sha256 is not None and table.model_sha256 != model_sha256:
        raise CalibrationTableError(
            f"{path} was made for another {table.model} (sha256 {table.model_sha256[:12]}..., this one is "
            f"{model_sha256[:12]}...). "
            f"Run 'orin-avatar calibrate {table.model.removesuffix('.onnx')}' to make a new one."
        )
    if tensor_names is not None:
        unknown = sorted(set(table.amax) - tensor_names)
        if unknown:
            raise CalibrationTableError(f"{path}: tensor(s) {', '.join(unknown[:5])} are not in {table.model}")
    if layer_names is not None:
        unknown = sorted(set(table.fp16_nodes) - layer_names)
        if unknown:
            raise CalibrationTableError(
                f"{path}: FP16 layer(s) {', '.join(unknown[:5])} are not weighted layers of "
                f"{table.model}; run 'orin-avatar calibrate {table.model.removesuffix('.onnx')}' again"
            )
    return table

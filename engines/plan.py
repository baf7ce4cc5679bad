"""What a TensorRT release would do with each store model, without building anything.

`orin-avatar engines plan` answers, on any machine and for any supported release, the questions an
integrator has before flashing a fleet: which precisions the builder will try, which of them TensorRT
would refuse and why (an operator, a type, a shape), whether the model may go to the DLA, and where it
will run. The verdicts come from the same checks the builder makes (`engines.tensorrt_support`).
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from engines import tensorrt_support
from engines.calibration_table import read_table
from engines.model_specs import MODELS, ModelSpec
from engines.onnx_check import check_onnx
from engines.qdq_model import make_qdq_model, tensor_names, weighted_layers
from engines.store.model_store import ModelStore


@dataclass(frozen=True)
class Rung:
    precision: str
    refused: str  # why TensorRT would refuse it ("" if it will be built and validated)


@dataclass(frozen=True)
class ModelPlan:
    model: str
    tensorrt: str
    rungs: tuple[Rung, ...]
    dla: str  # "yes", or why not
    runs_on: str  # e.g. "TensorRT int8", "CPU"
    reason: str  # why it runs there when that is the CPU or a lower rung
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return asdict(self)


def plan(store: ModelStore, tables: Path, version: str, dla: bool = False) -> list[ModelPlan]:
    """Each store model under TensorRT `version` (e.g. "8.6.2")."""
    with tempfile.TemporaryDirectory(prefix="orin-avatar-plan-") as scratch:
        return [_plan_model(store, tables, version, spec, dla, Path(scratch)) for spec in MODELS.values()]


def _plan_model(store: ModelStore, tables: Path, version: str, spec: ModelSpec, dla: bool, scratch: Path) -> ModelPlan:
    if spec.cpu_reason:
        return ModelPlan(spec.name, version, (), "no", "CPU", spec.cpu_reason)
    model = check_onnx(store.path(spec.model), store.root)
    table_path = tables / f"{spec.name}.json"
    rungs = []
    for precision in tensorrt_support.precisions(version, table_path.is_file(), spec.quantized):
        parsed = model
        if precision == "int8" and tensorrt_support.strongly_typed(version) and not spec.quantized:
            table = read_table(
                table_path, store.entries()[spec.model].sha256, tensor_names(model), set(weighted_layers(model))
            )
            qdq = scratch / f"{spec.name}.qdq.onnx"
            make_qdq_model(store.path(spec.model), table, qdq)
            parsed = check_onnx(qdq, scratch)
        refused = tensorrt_support.refusals(parsed, version)
        rungs.append(Rung(precision, "; ".join(str(r) for r in refused)))
    usable = [r for r in rungs if not r.refused]
    dla_problem = tensorrt_support.dla_problem(spec.static, version) if dla else "not asked ([engines] dla_core = -1)"
    notes = tuple(
        f"{plugin}: avoided by the parser flag NATIVE_INSTANCENORM"
        for plugin in tensorrt_support.needs_plugins(model, version)
    ) + tuple(
        f"{r.precision} rung on the GPU: the DLA runs only FP16 and INT8"
        for r in rungs
        if dla and not dla_problem and not tensorrt_support.on_dla(r.precision)
    )
    if not usable:
        return ModelPlan(
            spec.name,
            version,
            tuple(rungs),
            dla_problem or "yes",
            "CPU",
            "every rung would be refused: " + _reasons(rungs),
            notes,
        )
    skipped = [f"{r.precision}: {r.refused}" for r in rungs[: rungs.index(usable[0])]]
    return ModelPlan(
        spec.name,
        version,
        tuple(rungs),
        dla_problem or "yes",
        f"TensorRT {usable[0].precision}",
        "; ".join(skipped),
        notes,
    )


def _reasons(rungs: list[Rung]) -> str:
    """Each rung's refusal, or the one they share once."""
    if len({r.refused for r in rungs}) == 1:
        return rungs[0].refused
    return "; ".join(f"{r.precision}: {r.refused}" for r in rungs)

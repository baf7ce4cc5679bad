"""Checking an engine against ONNX Runtime FP32 on golden inputs, like Polygraphy's comparator.

Outputs are compared by cosine similarity (scale-free, so one tolerance per model serves outputs
of any magnitude) and by shape; an engine is used only if every output passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.runner import Feeds, Runner


@dataclass(frozen=True)
class Validation:
    passed: bool
    worst_cosine: float
    detail: str

    def as_dict(self) -> dict:
        return {"passed": self.passed, "worst_cosine": round(self.worst_cosine, 6), "detail": self.detail}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    denominator = np.linalg.norm(a) * np.linalg.norm(b)
    if denominator == 0:
        return 1.0 if np.array_equal(a, b) else 0.0
    return float(np.dot(a, b) / denominator)


def validate(engine: Runner, reference: Runner, golden: Feeds, min_cosine: float) -> Validation:
    expected = reference.infer(golden)
    try:
        got = engine.infer(golden)
    except Exception as exc:  # an engine that cannot run the golden inputs is not valid
        return Validation(False, 0.0, f"the engine failed on the golden inputs: {exc}")
    worst, problems = 1.0, []
    for name, reference_value in expected.items():
        if name not in got:
            problems.append(f"output {name} missing")
            worst = 0.0
            continue
        if got[name].shape != reference_value.shape:
            problems.append(f"output {name} has shape {got[name].shape}, expected {reference_value.shape}")
            worst = 0.0
            continue
        similarity = cosine(got[name], reference_value) if np.all(np.isfinite(got[name])) else 0.0
        worst = min(worst, similarity)
        if similarity < min_cosine:
            problems.append(f"output {name}: cosine {similarity:.5f} < {min_cosine}")
    return Validation(not problems, worst, "; ".join(problems) or f"all outputs within cosine {min_cosine}")

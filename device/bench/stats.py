"""Percentiles and peak memory for benchmark reports."""

from __future__ import annotations

import resource

import numpy as np


def percentiles_ms(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000.0
    return {f"p{q}": round(float(np.percentile(ms, q)), 2) for q in (50, 95, 99)} | {"runs": len(ms)}


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

"""Per-model TensorRT policy: the precision ladder, shape profiles, tolerance, deadline, golden inputs.

A model runs on TensorRT in the first precision of its ladder whose engine builds and matches ONNX
Runtime FP32 on the golden inputs; failing that it drops a rung, and below the last rung it runs
on the CPU. A policy with `cpu_reason` never tries TensorRT.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

Shape = tuple[int, ...]
Profile = dict[str, tuple[Shape, Shape, Shape]]  # input -> (min, opt, max)
Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class ModelPolicy:
    model: str  # store file, e.g. "face.onnx"
    precisions: tuple[str, ...]  # e.g. ("int8", "fp16"); fp32 is always allowed by --precision
    profile: Profile
    min_cosine: float  # every output must match ONNX Runtime FP32 at least this closely
    deadline_ms: float  # slower than this, the call is answered on the CPU
    golden: Callable[[], Feeds]  # deterministic inputs for validation
    cpu_reason: str | None = None

    @property
    def name(self) -> str:
        return self.model.removesuffix(".onnx")


def _audio(seconds: float, seed: int) -> np.ndarray:
    """Speech-like test signal: harmonics with a syllable envelope, plus a little noise."""
    t = np.arange(int(seconds * 16000)) / 16000
    rng = np.random.default_rng(seed)
    voice = sum(np.sin(2 * np.pi * f * t) / k for k, f in enumerate((140, 280, 420, 700, 1100), 1))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t)
    return (0.1 * voice * envelope + rng.normal(0, 0.005, t.size)).astype(np.float32)


def _face_golden() -> Feeds:
    rng = np.random.default_rng(3)
    return {"input": rng.uniform(-1, 1, (1, 3, 192, 192)).astype(np.float32)}


def _text_golden() -> Feeds:
    ids = np.array([[101, 2073, 2024, 1996, 2717, 9954, 1029, 102]], np.int64)  # "where are the restrooms?"
    return {"input_ids": ids, "attention_mask": np.ones_like(ids)}


def _vad_golden() -> Feeds:
    return {"input": _audio(0.036, 1)[None, :576], "state": np.zeros((2, 1, 128), np.float32)}


def _encoder_golden() -> Feeds:
    return {"input_values": _audio(2.0, 2)[None, :]}


MAX_AUDIO = 16000 * 16  # an utterance of at most 15 s plus the recogniser's padding

POLICIES: dict[str, ModelPolicy] = {p.name: p for p in (
    # FP16 only: INT8 missed its accuracy gate even with every convolution in FP32 (calibration/targets.py).
    ModelPolicy("vad.onnx", ("fp16",), {"input": ((1, 576),) * 3, "state": ((2, 1, 128),) * 3},
                min_cosine=0.99, deadline_ms=5, golden=_vad_golden),
    ModelPolicy("face.onnx", ("int8", "fp16"), {"input": ((1, 3, 192, 192),) * 3},
                min_cosine=0.99, deadline_ms=30, golden=_face_golden),
    ModelPolicy("text.onnx", ("int8", "fp16"),
                {"input_ids": ((1, 1), (1, 16), (8, 128)), "attention_mask": ((1, 1), (1, 16), (8, 128))},
                min_cosine=0.98, deadline_ms=30, golden=_text_golden),
    ModelPolicy("asr-encoder.onnx", ("int8", "fp16"), {"input_values": ((1, 4000), (1, 64000), (1, MAX_AUDIO))},
                min_cosine=0.99, deadline_ms=300, golden=_encoder_golden),
    ModelPolicy("asr-decoder.onnx", ("fp16",), {}, min_cosine=0.99, deadline_ms=50, golden=dict,
                cpu_reason="merged decoder with an If on the KV cache: not yet profiled for TensorRT"),
    ModelPolicy("tts.onnx", ("fp16",), {}, min_cosine=0.99, deadline_ms=600, golden=dict,
                cpu_reason="its output length depends on the data (needs TensorRT's output allocator)"),
)}

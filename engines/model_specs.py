"""One specification per model, under one name used everywhere (store, runners, engines, calibration
tables, benchmarks, status): its store files, its TensorRT policy (shape profiles, tolerance,
deadline, golden inputs, or why it stays on the CPU) and the input contract its wrapper honours by
splitting work (batch and length). The audio format every speech model shares is defined here too.

A model runs on TensorRT in the first precision of its ladder whose engine builds and matches ONNX
Runtime FP32 on the golden inputs; failing that it drops a rung, and below the last rung it runs
on the CPU. The ladder follows from the TensorRT release and whether a calibration table ships
(`engines.tensorrt_support.precisions`). A model with a `cpu_reason` never tries TensorRT.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

SPEECH_RATE = 16000  # Hz, mono: what the VAD, the recogniser and the end-of-turn model take
END_OF_TURN_FEATURES = (80, 800)  # Smart Turn v3: 80 log-mel bins x 800 10-ms hops = its 8 s window
FRAME = 512  # samples per microphone frame and VAD decision (32 ms), what Silero VAD v5+ is trained on
VAD_CONTEXT = 64  # samples of the previous frame the VAD sees in front of each frame

Shape = tuple[int, ...]
Profile = dict[str, tuple[Shape, Shape, Shape]]  # input -> (min, opt, max)
Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class ModelSpec:
    model: str  # its ONNX file in the store, e.g. "face.onnx"; the model's name is this without ".onnx"
    profile: Profile
    min_cosine: float  # every output must match ONNX Runtime FP32 at least this closely
    deadline_ms: float  # slower than this, the call is answered on the CPU
    golden: Callable[[], Feeds]  # deterministic inputs for validation
    cpu_reason: str | None = None
    # It carries its own quantization (Q/DQ nodes): its INT8 rung builds from them, with no table, then
    # an FP32 one, and on TensorRT 8.6/10.x both need BuilderFlag.INT8 (engines/tensorrt_support.py).
    quantized: bool = False
    extra_files: tuple[str, ...] = ()  # other store files its wrapper reads (tokenizers, voice settings)

    @property
    def files(self) -> tuple[str, ...]:
        return (self.model, *self.extra_files)

    @property
    def name(self) -> str:
        return self.model.removesuffix(".onnx")

    @property
    def static(self) -> bool:
        """Every input has one shape (min = opt = max): what the DLA needs."""
        return all(low == opt == high for low, opt, high in self.profile.values())


def _audio(seconds: float, seed: int) -> np.ndarray:
    """Speech-like test signal: harmonics with a syllable envelope, plus a little noise."""
    t = np.arange(int(seconds * SPEECH_RATE)) / SPEECH_RATE
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
    return {"input": _audio(0.036, 1)[None, : FRAME + VAD_CONTEXT], "state": np.zeros(VAD_STATE, np.float32)}


def _end_of_turn_golden() -> Feeds:
    rng = np.random.default_rng(4)  # log-mel features as Whisper scales them: within [-1, 1.5]
    return {"input_features": rng.uniform(-1, 1, (1, *END_OF_TURN_FEATURES)).astype(np.float32)}


def _vocoder_golden() -> Feeds:
    rng = np.random.default_rng(5)  # the voice's latent frames are about unit normal
    return {
        "latent": rng.normal(0, 1, (1, LATENT_CHANNELS, VOCODER_OPT_FRAMES)).astype(np.float32),
        "mask": np.ones((1, 1, VOCODER_OPT_FRAMES), np.float32),
    }


def _encoder_golden() -> Feeds:
    return {"input_values": _audio(2.0, 2)[None, :]}


# The text encoder's contract: the dialogue embeds every example of a knowledge base at once, so its
# wrapper splits work into batches of TEXT_BATCH sentences of at most TEXT_TOKENS tokens.
TEXT_BATCH, TEXT_TOKENS = 16, 256
MAX_AUDIO = SPEECH_RATE * 16  # an utterance of at most 15 s plus the recogniser's padding
VAD_STATE = (2, 1, 128)
# The vocoder's contract: a sentence's latent frames go in pieces of VOCODER_PIECES frames (the
# first small, so the first sound comes soon; then larger: fewer calls, less context made twice),
# each with VOCODER_CONTEXT frames of context on either side, whose samples are dropped. Its flow and
# decoder see about that far: with 24 frames the pieces' samples differ from the whole sentence's
# by at most 1e-4 relative RMS (with 16, up to 3e-2), asserted by tests/test_conversions.py. A 3.7 s
# sentence on the 2-core PC: first piece after 123-140 ms, all of it in 520-540 ms (one call: 420).
LATENT_CHANNELS, VOCODER_CONTEXT, VOCODER_PIECES = 192, 24, (32, 96, 256)
VOCODER_FRAMES = VOCODER_PIECES[-1] + 2 * VOCODER_CONTEXT
VOCODER_OPT_FRAMES = VOCODER_PIECES[1] + 2 * VOCODER_CONTEXT  # a middle piece: the profile's optimum, the golden

# The portrait avatar's landmark models run once per photo, at start, and their result is cached: an
# engine build (minutes on an Orin) would cost more than every call it could ever serve.
_ONCE_PER_PORTRAIT = "runs once per portrait photo, at start, and its landmarks are cached"
MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "vad.onnx",
            {"input": ((1, FRAME + VAD_CONTEXT),) * 3, "state": (VAD_STATE,) * 3},
            min_cosine=0.99,
            deadline_ms=5,
            golden=_vad_golden,
        ),
        ModelSpec(
            "face.onnx", {"input": ((1, 3, 192, 192),) * 3}, min_cosine=0.99, deadline_ms=30, golden=_face_golden
        ),
        ModelSpec(
            "text.onnx",
            {
                "input_ids": ((1, 1), (1, 16), (TEXT_BATCH, TEXT_TOKENS)),
                "attention_mask": ((1, 1), (1, 16), (TEXT_BATCH, TEXT_TOKENS)),
            },
            min_cosine=0.98,
            deadline_ms=30,
            golden=_text_golden,
            extra_files=("text-tokenizer.json",),
        ),
        ModelSpec(
            "asr-encoder.onnx",
            {"input_values": ((1, 4000), (1, 64000), (1, MAX_AUDIO))},
            min_cosine=0.99,
            deadline_ms=300,
            golden=_encoder_golden,
        ),
        ModelSpec(
            "end-of-turn.onnx",
            {"input_features": ((1, *END_OF_TURN_FEATURES),) * 3},
            min_cosine=0.99,
            deadline_ms=150,
            golden=_end_of_turn_golden,
            quantized=True,  # Smart Turn's own INT8
        ),
        ModelSpec(
            "asr-decoder.onnx",
            {},
            min_cosine=0.99,
            deadline_ms=50,
            golden=dict,
            extra_files=("asr-tokenizer.bin",),
            cpu_reason="the merged decoder branches on an input (use_cache_branch) and its KV-cache outputs "
            "change shape from step to step; TensorRT needs a decoder split into its two branches",
        ),
        ModelSpec("face-mesh.onnx", {}, min_cosine=0.99, deadline_ms=100, golden=dict, cpu_reason=_ONCE_PER_PORTRAIT),
        ModelSpec("iris.onnx", {}, min_cosine=0.99, deadline_ms=100, golden=dict, cpu_reason=_ONCE_PER_PORTRAIT),
        ModelSpec(
            "tts.onnx",
            {},
            min_cosine=0.99,
            deadline_ms=600,
            golden=dict,
            extra_files=("tts.onnx.json",),
            cpu_reason="Piper's text side: its output length depends on the data (NonZero, a duration-driven "
            "length) and it samples noise (RandomNormalLike), so its output cannot be sized ahead or validated",
        ),
        ModelSpec(
            "tts-vocoder.onnx",
            {
                "latent": (
                    (1, LATENT_CHANNELS, 1),
                    (1, LATENT_CHANNELS, VOCODER_OPT_FRAMES),
                    (1, LATENT_CHANNELS, VOCODER_FRAMES),
                ),
                "mask": ((1, 1, 1), (1, 1, VOCODER_OPT_FRAMES), (1, 1, VOCODER_FRAMES)),
            },
            min_cosine=0.99,
            deadline_ms=300,
            golden=_vocoder_golden,
        ),
    )
}

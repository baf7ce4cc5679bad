"""What calibrating each model means: its inputs, and the accuracy gate INT8 must pass against FP32.

Gates (measured on the held-apart set, INT8 = the Q/DQ model on ONNX Runtime):
- face: every face FP32 finds confidently found again, boxes of mean IoU >= 0.9, no new detections;
- text: mean embedding cosine >= 0.98 and the same top intent for every sentence;
- asr-encoder: word error rate within 1 point of FP32's (the decoder stays FP32);
Silero VAD has no table: INT8 missed its gate (speech decisions agreeing on >= 99% of frames)
even with all six of its convolutions in FP32 (0.988; 0.41 all-INT8), and it takes 0.2 ms a frame
anyway; it runs in FP16.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from engines.model_specs import SPEECH_RATE
from engines.runner import Runner
from engines.store.model_store import ModelStore

from calibration import data
from device.conversation.dialogue import BUILTINS
from device.conversation.knowledge import load_knowledge
from device.models.asr import PAD, SpeechRecognizer, word_error_rate
from device.models.faces import FaceDetector, box_iou, letterbox
from device.models.text_encoder import TextEncoder

Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class Gate:
    metric: str
    value: float
    threshold: str
    passed: bool
    quality: float  # higher is better; ranks candidates in the sensitivity sweep

    def as_dict(self) -> dict:
        return {"metric": self.metric, "value": round(self.value, 5), "threshold": self.threshold, "passed": self.passed}


@dataclass(frozen=True)
class Target:
    model: str
    dataset: Callable[[ModelStore, Path | None], data.Dataset]
    feeds: Callable[[ModelStore, list], list[Feeds]]
    gate: Callable[[ModelStore, Runner, Runner, list], Gate]
    sweep_ops: tuple[str, ...]  # op types whose nodes may be kept in FP32
    ops: tuple[str, ...] = ()  # op types to quantize; () = every op ONNX Runtime can quantize
    method: str = "entropy"  # the default range method (TensorRT's EntropyCalibration2, required for DLA)


# --- text -----------------------------------------------------------------------------------------

def _text_feeds(store: ModelStore, sentences: list[str]) -> list[Feeds]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(store.path("text-tokenizer.json")))
    out = []
    for sentence in sentences:
        encoded = tokenizer.encode(sentence)
        out.append({"input_ids": np.array([encoded.ids], np.int64), "attention_mask": np.array([encoded.attention_mask], np.int64)})
    return out


def _text_gate(store: ModelStore, fp32: Runner, int8: Runner, sentences: list[str]) -> Gate:
    reference, quantized = (TextEncoder(r, store.path("text-tokenizer.json")) for r in (fp32, int8))
    a, b = reference.embed(sentences), quantized.embed(sentences)
    cosines = np.sum(a * b, axis=1)
    cosine = float(np.mean(cosines))
    intents = (*BUILTINS, *load_knowledge())
    owners = np.array([i.name for i in intents for _ in i.examples])
    examples = [e for i in intents for e in i.examples]
    top_a = owners[np.argmax(a @ reference.embed(examples).T, axis=1)]
    top_b = owners[np.argmax(b @ quantized.embed(examples).T, axis=1)]
    changed = int(np.sum(top_a != top_b))
    passed = cosine >= 0.98 and changed == 0
    return Gate(f"mean cosine (min {cosines.min():.3f}), top intents changed", cosine, ">= 0.98, 0 changed", passed,
                cosine - changed)


# --- face -----------------------------------------------------------------------------------------

def _face_feeds(store: ModelStore, images: list) -> list[Feeds]:
    return [{"input": letterbox(image)[0]} for image in images]


def _best_overlap(box: tuple, others: list) -> float:
    return float(box_iou(np.array(box), np.array([o.box for o in others])).max()) if others else 0.0


CONFIDENT = 0.75  # faces FP32 is unsure of (scores near the 0.5 threshold) may flip either way


def _face_gate(store: ModelStore, fp32: Runner, int8: Runner, images: list) -> Gate:
    """INT8 finds every face FP32 finds confidently, with boxes of mean IoU >= 0.9 to FP32's, and
    finds nothing confidently where FP32 found nothing."""
    reference, quantized = FaceDetector(fp32), FaceDetector(int8)
    overlaps, new = [], 0
    for image in images:
        expected, got = reference.detect(image), quantized.detect(image)
        overlaps += [_best_overlap(f.box, got) for f in expected if f.score >= CONFIDENT]
        new += sum(1 for g in got if g.score >= CONFIDENT and _best_overlap(g.box, expected) < 0.5)
    lost = sum(1 for o in overlaps if o < 0.5)
    mean = float(np.mean(overlaps)) if overlaps else 0.0
    passed = bool(overlaps) and mean >= 0.9 and lost == 0 and new == 0
    return Gate(f"mean box IoU over {len(overlaps)} faces; lost, new", mean, ">= 0.9; 0 lost, 0 new", passed, mean - lost - new)


# --- speech ---------------------------------------------------------------------------------------

ENCODER_WINDOW = 4 * SPEECH_RATE  # ONNX Runtime's range collectors need one shape for every sample


def _encoder_feeds(store: ModelStore, clips: list) -> list[Feeds]:
    """Fixed 4 s windows of the padded clips (the last of each clip zero-padded)."""
    feeds = []
    for clip in clips:
        audio = np.pad(clip.audio, PAD)
        for start in range(0, len(audio), ENCODER_WINDOW):
            window = audio[start:start + ENCODER_WINDOW]
            feeds.append({"input_values": np.pad(window, (0, ENCODER_WINDOW - len(window)))[None, :]})
    return feeds


def _encoder_gate(store: ModelStore, fp32: Runner, int8: Runner, clips: list) -> Gate:
    from engines.onnxrt_runner import OnnxRuntimeRunner

    with OnnxRuntimeRunner("asr-decoder", store.path("asr-decoder.onnx"), threads=2) as decoder:
        vocabulary = store.path("asr-tokenizer.bin")
        reference, quantized = SpeechRecognizer(fp32, decoder, vocabulary), SpeechRecognizer(int8, decoder, vocabulary)
        scored = [c for c in clips if c.text]
        wer_fp32 = np.mean([word_error_rate(c.text, reference.transcribe(c.audio).text) for c in scored])
        wer_int8 = np.mean([word_error_rate(c.text, quantized.transcribe(c.audio).text) for c in scored])
    delta = float(wer_int8 - wer_fp32) * 100
    return Gate(f"WER points over FP32 ({wer_fp32 * 100:.1f}% -> {wer_int8 * 100:.1f}%)", delta, "<= 1.0", delta <= 1.0, -delta)


TARGETS: dict[str, Target] = {
    "face": Target("face.onnx", lambda store, d: data.photos(d), _face_feeds, _face_gate, ("Conv",)),
    # Only the MatMuls: quantizing the embedding lookup and the -10000 attention-mask bias ruins BERT;
    # and min-max ranges: entropy clips the activation outliers BERT depends on (mean cosine 0.86 vs 0.83
    # all-INT8, but 0.94 vs 0.975 with the feed-forward outputs in FP32).
    "text": Target("text.onnx", lambda store, d: data.sentences(d), _text_feeds, _text_gate, ("MatMul",), ("MatMul",),
                   method="minmax"),
    "asr-encoder": Target("asr-encoder.onnx", data.speech, _encoder_feeds, _encoder_gate, ("MatMul", "Conv"),
                          ("MatMul", "Conv")),
}

"""What calibrating each model means: its inputs, and the accuracy gate its INT8 emulation must pass
against FP32 (calibration.emulation), on the held-apart split:
- face: every face FP32 finds confidently found again, boxes of mean IoU >= 0.9, no new detections;
- text: mean embedding cosine >= 0.99, and the dialogue's choice (an intent, or asking to rephrase)
  unchanged for >= 99% of questions;
- asr-encoder: word error rate within 1 point (absolute) of FP32's, decoded in full by the FP32 decoder;
- vad: speech/non-speech decisions agree on >= 99% of frames, and every utterance the endpointer
  makes ends within one frame of where FP32's ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from engines.model_specs import FRAME, SPEECH_RATE
from engines.runner import Runner
from engines.store.model_store import ModelStore

from calibration import data
from device.conversation.dialogue import Dialogue
from device.conversation.endpointer import Endpointer
from device.conversation.knowledge import load_knowledge
from device.messages import Utterance
from device.models.asr import PAD, SpeechRecognizer, word_error_rate, words
from device.models.faces import FaceDetector, box_iou, letterbox
from device.models.text_encoder import TextEncoder
from device.models.vad import VoiceActivityDetector
from device.settings import EndpointSettings, load_settings

Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class Gate:
    metric: str
    value: float
    threshold: str
    passed: bool

    def as_dict(self) -> dict:
        return {
            "metric": self.metric,
            "value": round(self.value, 5),
            "threshold": self.threshold,
            "passed": self.passed,
        }


@dataclass(frozen=True)
class Target:
    """`reference`: what FP32 makes of the items, computed once per split and `gate`d against each
    INT8 emulation (a sweep tries several, a check two renderers)."""

    model: str
    dataset: Callable[[ModelStore, Path | None], data.Dataset]
    feeds: Callable[[ModelStore, list], list[Feeds]]
    reference: Callable[[ModelStore, Runner, list], Any]
    gate: Callable[[ModelStore, Any, Runner, list], Gate]
    method: str = "entropy"  # the default range method (TensorRT's EntropyCalibration2, required for DLA)
    samples: int = 64  # calibration inputs, spread evenly over the tuning split


# --- text -----------------------------------------------------------------------------------------


def _text_feeds(store: ModelStore, sentences: list[str]) -> list[Feeds]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(store.path("text-tokenizer.json")))
    out = []
    for sentence in sentences:
        encoded = tokenizer.encode(sentence)
        out.append(
            {
                "input_ids": np.array([encoded.ids], np.int64),
                "attention_mask": np.array([encoded.attention_mask], np.int64),
            }
        )
    return out


def _text_choices(store: ModelStore, runner: Runner, sentences: list[str]) -> tuple[np.ndarray, list[str | None]]:
    """The sentences' embeddings, and the intent (or None, "please rephrase") the dialogue (embedded
    knowledge base, no LLM) chooses for each."""
    encoder = TextEncoder(runner, store.path("text-tokenizer.json"))
    dialogue = Dialogue(encoder, load_knowledge(), load_settings().dialogue)
    return encoder.embed(sentences), [dialogue.answer(s).intent for s in sentences]


def _text_gate(store: ModelStore, reference: tuple, int8: Runner, sentences: list[str]) -> Gate:
    """Embeddings close to FP32's, and the dialogue choosing the same intent, or the same "please
    rephrase", as it does with FP32."""
    (a, intents), (b, quantized) = reference, _text_choices(store, int8, sentences)
    cosines = np.sum(a * b, axis=1)
    cosine = float(np.mean(cosines))
    same = float(np.mean([x == y for x, y in zip(intents, quantized)]))
    return Gate(
        f"mean cosine (min {cosines.min():.3f}); intent kept {same:.1%}",
        cosine,
        ">= 0.99; >= 99%",
        cosine >= 0.99 and same >= 0.99,
    )


# --- face -----------------------------------------------------------------------------------------


def _face_feeds(store: ModelStore, images: list) -> list[Feeds]:
    return [{"input": letterbox(image)[0]} for image in images]


def _best_overlap(box: tuple, others: list) -> float:
    return float(box_iou(np.array(box), np.array([o.box for o in others])).max()) if others else 0.0


CONFIDENT = 0.75  # faces FP32 is unsure of (scores near the 0.5 threshold) may flip either way


def _faces(store: ModelStore, runner: Runner, images: list) -> list[list]:
    detector = FaceDetector(runner)
    return [detector.detect(image) for image in images]


def _face_gate(store: ModelStore, reference: list[list], int8: Runner, images: list) -> Gate:
    """INT8 finds every face FP32 finds confidently, with boxes of mean IoU >= 0.9 to FP32's, and
    finds nothing confidently where FP32 found nothing."""
    overlaps, new = [], 0
    for expected, got in zip(reference, _faces(store, int8, images)):
        overlaps += [_best_overlap(f.box, got) for f in expected if f.score >= CONFIDENT]
        new += sum(1 for g in got if g.score >= CONFIDENT and _best_overlap(g.box, expected) < 0.5)
    lost = sum(1 for o in overlaps if o < 0.5)
    mean = float(np.mean(overlaps)) if overlaps else 0.0
    passed = bool(overlaps) and mean >= 0.9 and lost == 0 and new == 0
    return Gate(
        f"mean box IoU over {len(overlaps)} faces; {lost} lost, {new} new", mean, ">= 0.9; 0 lost, 0 new", passed
    )


# --- speech ---------------------------------------------------------------------------------------

ENCODER_WINDOW = 4 * SPEECH_RATE  # ONNX Runtime's range collectors need one shape for every sample


def _encoder_feeds(store: ModelStore, clips: list) -> list[Feeds]:
    """Fixed 4 s windows of the padded clips (the last of each clip zero-padded)."""
    feeds = []
    for clip in clips:
        audio = np.pad(clip.audio, PAD)
        for start in range(0, len(audio), ENCODER_WINDOW):
            window = audio[start : start + ENCODER_WINDOW]
            feeds.append({"input_values": np.pad(window, (0, ENCODER_WINDOW - len(window)))[None, :]})
    return feeds


def corpus_wer(recognizer: SpeechRecognizer, clips: list) -> float:
    """Word errors over all clips divided by their reference words."""
    scored = [c for c in clips if c.text]
    errors = sum(word_error_rate(c.text, recognizer.transcribe(c.audio).text) * len(words(c.text)) for c in scored)
    return errors / max(1, sum(len(words(c.text)) for c in scored))


def _encoder_wer(store: ModelStore, encoder: Runner, clips: list) -> float:
    """The corpus word error rate with `encoder`, decoded in full by the FP32 decoder."""
    from engines.onnxrt_runner import OnnxRuntimeRunner

    with OnnxRuntimeRunner("asr-decoder", store.path("asr-decoder.onnx"), threads=2) as decoder:
        return corpus_wer(SpeechRecognizer(encoder, decoder, store.path("asr-tokenizer.bin")), clips)


def _encoder_gate(store: ModelStore, wer_fp32: float, int8: Runner, clips: list) -> Gate:
    wer_int8 = _encoder_wer(store, int8, clips)
    delta = (wer_int8 - wer_fp32) * 100
    return Gate(f"WER points over FP32 ({wer_fp32 * 100:.1f}% -> {wer_int8 * 100:.1f}%)", delta, "<= 1.0", delta <= 1.0)


def _vad_feeds(store: ModelStore, clips: list) -> list[Feeds]:
    """The model's inputs frame by frame, with the recurrent state FP32 carries along."""
    from device.models import catalog

    vad = catalog.load_vad(store)
    feeds = []
    for clip in clips:
        vad.reset()
        for start in range(0, len(clip.audio) - FRAME + 1, FRAME):
            frame = clip.audio[start : start + FRAME]
            feeds.append(vad.feeds(frame))
            vad.probability(frame)
    return feeds


def _utterances(
    vad: VoiceActivityDetector, audio: np.ndarray, settings: EndpointSettings
) -> tuple[np.ndarray, list[Utterance]]:
    """Frame decisions and the utterances the daemon's endpointer (with `settings`) makes of `audio`."""
    audio = np.pad(audio, (0, SPEECH_RATE))  # a second of silence ends the last utterance
    probabilities = vad.probabilities(audio)
    endpointer = Endpointer(settings)
    found = [
        e
        for i, p in enumerate(probabilities)
        for e in endpointer.push(audio[i * FRAME : (i + 1) * FRAME], float(p))
        if isinstance(e, Utterance)
    ]
    return probabilities >= settings.vad_threshold, found


def _vad_decisions(store: ModelStore, runner: Runner, clips: list) -> list[tuple[np.ndarray, list[Utterance]]]:
    settings = load_settings().endpoint
    return [_utterances(VoiceActivityDetector(runner), clip.audio, settings) for clip in clips]


def _vad_gate(store: ModelStore, reference: list, int8: Runner, clips: list) -> Gate:
    agree, frames, moved = 0, 0, 0
    for (decided_a, ends_a), (decided_b, ends_b) in zip(reference, _vad_decisions(store, int8, clips)):
        agree += int(np.sum(decided_a == decided_b))
        frames += decided_a.size
        if len(ends_a) != len(ends_b):
            moved += max(len(ends_a), len(ends_b))
        else:
            moved += sum(abs(a.speech_end - b.speech_end) > FRAME for a, b in zip(ends_a, ends_b))
    share = agree / max(1, frames)
    return Gate(
        f"frames agreeing; {moved} utterance end(s) moved > 1 frame",
        share,
        ">= 0.99; 0 moved",
        share >= 0.99 and moved == 0,
    )


TARGETS: dict[str, Target] = {
    "face": Target("face.onnx", lambda store, d: data.photos(d), _face_feeds, _faces, _face_gate),
    # min-max ranges: entropy clips the activation outliers BERT depends on.
    "text": Target(
        "text.onnx", lambda store, d: data.sentences(d), _text_feeds, _text_choices, _text_gate, method="minmax"
    ),
    # Percentile ranges: with entropy ranges even 34 of 68 layers in FP16 missed the held-apart gate
    # (+4.3 WER points); with percentile ones, 7 pass it (docs/integrator/int8.md).
    "asr-encoder": Target(
        "asr-encoder.onnx", data.speech, _encoder_feeds, _encoder_wer, _encoder_gate, method="percentile"
    ),
    "vad": Target("vad.onnx", data.speech, _vad_feeds, _vad_decisions, _vad_gate, samples=2048),
}

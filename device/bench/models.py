"""`orin-avatar bench models`: per-model latency (p50/p95 after warm-up) and peak RSS.

Each model is measured in a fresh child process so its peak RSS is its own, on inputs like the
kiosk's: one 32 ms VAD frame, a 10 s spoken recording, one reply sentence, a 1280x720 camera frame
with a face, one visitor question.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from typing import Callable

import cv2
import numpy as np

from engines.errors import InputError
from engines.model_specs import FRAME, MODELS, SPEECH_RATE
from engines.store.model_store import ModelStore

from device.app import App
from device.audio_file import read_audio
from device.bench.stats import peak_rss_mb, percentiles_ms
from device.bundled import SAMPLE_PHOTO
from device.models import catalog

WARMUP = 3


def measure_models(app: App, names: list[str], runs: int) -> list[dict]:
    """Each model in a fresh child process (so its peak RSS is its own)."""
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        raise InputError(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    if runs < 1:
        raise InputError("--runs must be 1 or more")
    app.store.entries()  # a missing store is reported here, once, not in every child
    results = []
    context = multiprocessing.get_context("spawn")
    for name in names or WORKLOADS:
        print(f"measuring {name} ({runs} runs)...", file=sys.stderr, flush=True)
        with context.Pool(1) as pool:
            results.append(pool.apply(measure, (name, str(app.store.root), app.threads, runs)))
    return results


def measure(name: str, store_root: str, threads: int, runs: int) -> dict:
    """Runs in the child process."""
    store = ModelStore(store_root)
    label, call = WORKLOADS[name](store, threads)
    for _ in range(WARMUP):
        call()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return {"model": name, "input": label, "latency_ms": percentiles_ms(times), "peak_rss_mb": peak_rss_mb()}


def _vad(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    vad = catalog.load_vad(store, threads)
    frame = read_audio(store.path("samples/beckett.wav"))[SPEECH_RATE : SPEECH_RATE + FRAME]
    return "one 32 ms frame", lambda: vad.probability(frame)


def _asr_encoder(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    asr = catalog.load_asr(store, threads)
    audio = read_audio(store.path("samples/beckett.wav"))
    return f"{len(audio) / SPEECH_RATE:.1f} s recorded speech", lambda: asr.encode(audio)


def _asr_decoder(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    asr = catalog.load_asr(store, threads)
    audio = read_audio(store.path("samples/beckett.wav"))
    hidden = asr.encode(audio)
    return f"the transcript of {len(audio) / SPEECH_RATE:.1f} s", lambda: asr.decode(hidden, len(audio))


def _tts(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    tts = catalog.load_tts(store, threads)
    text = "The restrooms are on the second floor, next to the elevators."
    return "one 11-word sentence", lambda: list(tts.synthesize(text))


def _tts_vocoder(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    tts = catalog.load_tts(store, threads)
    feeds = MODELS["tts-vocoder"].golden()
    frames = feeds["latent"].shape[2]
    return f"a {frames}-frame piece ({frames * tts.hop / tts.sample_rate:.2f} s of audio)", lambda: tts.vocoder.infer(
        feeds
    )


def _face(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    faces = catalog.load_faces(store, threads)
    frame = np.full((720, 1280, 3), 90, np.uint8)
    frame[100:612, 384:896] = cv2.imread(str(SAMPLE_PHOTO))
    return "1280x720 frame, one face", lambda: faces.detect(frame)


def _text(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    text = catalog.load_text(store, threads)
    return "one visitor question", lambda: text.embed(["Where can I buy tickets for the exhibition?"])


def _end_of_turn(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    detector = catalog.load_end_of_turn(store, threads)
    audio = read_audio(store.path("samples/beckett.wav"))
    return "8 s window of recorded speech, features included", lambda: detector.probability(audio)


def _face_mesh(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    mesh, image = catalog.load_face_mesh(store, threads), cv2.imread(str(SAMPLE_PHOTO))
    face = catalog.load_faces(store, threads).detect(image)[0]
    return "the bundled photo's face: mesh and both irises", lambda: mesh.landmarks(image, face)


# One workload per model of engines.model_specs.MODELS, under its name.
WORKLOADS = {
    "vad": _vad,
    "asr-encoder": _asr_encoder,
    "asr-decoder": _asr_decoder,
    "tts": _tts,
    "tts-vocoder": _tts_vocoder,
    "face": _face,
    "text": _text,
    "end-of-turn": _end_of_turn,
    "face-mesh": _face_mesh,
    "iris": _face_mesh,
}

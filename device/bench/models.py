"""`orin-avatar bench models`: per-model latency (p50/p95 after warm-up) and peak RSS.

Each model is measured in a fresh child process so its peak RSS is its own, on inputs like the
kiosk's: one 32 ms VAD frame, a 10 s spoken recording, one reply sentence, a 1280x720 camera frame
with a face, one visitor question.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from typing import Callable

import numpy as np

from device.audio_file import read_audio
from device.bundled import SAMPLE_PHOTO
from device.bench.stats import peak_rss_mb, percentiles_ms
from device.commands.context import print_json, store_of, threads_of
from device.models import catalog
from engines.errors import InputError
from engines.store.model_store import ModelStore

WARMUP = 3


def register(kinds: argparse._SubParsersAction) -> None:
    bench = kinds.add_parser("models", help="latency and peak memory of each model on the CPU")
    bench.add_argument("names", nargs="*", metavar="MODEL",
                       help=f"models to measure (default all: {', '.join(catalog.MODEL_NAMES)})")
    bench.add_argument("--runs", type=int, default=20, help="timed runs per model after warm-up (default 20)")
    bench.add_argument("--json", action="store_true", help="print JSON instead of a table")
    bench.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    unknown = sorted(set(args.names) - set(catalog.MODEL_NAMES))
    if unknown:
        raise InputError(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(catalog.MODEL_NAMES)}")
    store, threads = store_of(args), threads_of(args)
    store.entries()  # a missing store is reported here, once, not in every child
    results = []
    context = multiprocessing.get_context("spawn")
    for name in args.names or catalog.MODEL_NAMES:
        print(f"measuring {name} ({args.runs} runs)...", file=sys.stderr, flush=True)
        with context.Pool(1) as pool:
            results.append(pool.apply(measure, (name, str(store.root), threads, args.runs)))
    if args.json:
        print_json({"threads": threads, "backend": "onnxruntime-cpu", "models": results})
    else:
        print(f"{'model':<6} {'input':<34} {'p50 ms':>8} {'p95 ms':>8} {'peak RSS MB':>12}")
        for r in results:
            print(f"{r['model']:<6} {r['input']:<34} {r['latency_ms']['p50']:>8.2f} {r['latency_ms']['p95']:>8.2f} {r['peak_rss_mb']:>12.1f}")
        print(f"(ONNX Runtime CPU, {threads} thread(s) per model, {args.runs} runs after {WARMUP} warm-up)")
    return 0


def measure(name: str, store_root: str, threads: int, runs: int) -> dict:
    """Runs in the child process."""
    store = ModelStore(store_root)
    label, call = _WORKLOADS[name](store, threads)
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
    frame = read_audio(store.path("samples/beckett.wav"))[16000:16512]
    return "one 32 ms frame", lambda: vad.probability(frame)


def _asr(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    asr = catalog.load_asr(store, threads)
    audio = read_audio(store.path("samples/beckett.wav"))
    return f"{len(audio) / 16000:.1f} s recorded speech", lambda: asr.transcribe(audio)


def _tts(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    tts = catalog.load_tts(store, threads)
    text = "The restrooms are on the second floor, next to the elevators."
    return "one 11-word sentence", lambda: list(tts.synthesize(text))


def _face(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    import cv2

    faces = catalog.load_faces(store, threads)
    frame = np.full((720, 1280, 3), 90, np.uint8)
    frame[100:612, 384:896] = cv2.imread(str(SAMPLE_PHOTO))
    return "1280x720 frame, one face", lambda: faces.detect(frame)


def _text(store: ModelStore, threads: int) -> tuple[str, Callable[[], object]]:
    text = catalog.load_text(store, threads)
    return "one visitor question", lambda: text.embed(["Where can I buy tickets for the exhibition?"])


_WORKLOADS = {"vad": _vad, "asr": _asr, "tts": _tts, "face": _face, "text": _text}

"""Commands integrators use on a robot to check one model at a time: transcribe, speak, detect-faces."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from engines.errors import InputError

from device.app import App
from device.audio_file import read_audio, write_wav
from device.commands.context import check_wav_out, print_json
from device.models import catalog
from device.models.faces import KEYPOINTS, MIN_IMAGE_SIDE


def register(commands: argparse._SubParsersAction) -> None:
    transcribe = commands.add_parser("transcribe", help="speech to text of an audio file (any rate or channels)")
    transcribe.add_argument("audio", type=Path, help="WAV or FLAC file")
    transcribe.add_argument("--json", action="store_true", help="print JSON")
    transcribe.set_defaults(run=_transcribe)

    speak = commands.add_parser("speak", help="synthesize speech with phoneme timings")
    speak.add_argument("text")
    speak.add_argument("--out", type=Path, required=True, help="WAV file to write")
    speak.add_argument("--json", action="store_true", help="print JSON (with per-phoneme timings)")
    speak.set_defaults(run=_speak)

    faces = commands.add_parser("detect-faces", help="face boxes, keypoints and scores in an image")
    faces.add_argument("image", type=Path)
    faces.add_argument("--json", action="store_true", help="print JSON")
    faces.set_defaults(run=_detect_faces)


def _transcribe(app: App, args: argparse.Namespace) -> int:
    audio = read_audio(args.audio)
    asr = catalog.load_asr(app.store, app.threads)
    started = time.perf_counter()
    transcript = asr.transcribe(audio)
    seconds = time.perf_counter() - started
    if args.json:
        print_json(
            {
                "file": str(args.audio),
                "text": transcript.text,
                "audio_seconds": round(transcript.audio_seconds, 3),
                "seconds": round(seconds, 3),
                "tokens": list(transcript.tokens),
            }
        )
    else:
        print(transcript.text)
    return 0


def _speak(app: App, args: argparse.Namespace) -> int:
    check_wav_out(args.out)
    tts = catalog.load_tts(app.store, app.threads)
    chunks = list(tts.synthesize(args.text))
    audio = np.concatenate([c.audio for c in chunks])
    write_wav(args.out, audio, tts.sample_rate)
    if args.json:
        offset, phonemes = 0, []
        for chunk in chunks:
            phonemes += [{"phoneme": p.phoneme, "start": offset + p.start, "samples": p.length} for p in chunk.phonemes]
            offset += len(chunk.audio)
        print_json(
            {
                "out": str(args.out),
                "sample_rate": tts.sample_rate,
                "seconds": round(len(audio) / tts.sample_rate, 3),
                "sentences": [c.text for c in chunks],
                "phonemes": phonemes,
            }
        )
    else:
        print(f"wrote {args.out}: {len(audio) / tts.sample_rate:.2f} s, {len(chunks)} sentence(s)")
    return 0


def _detect_faces(app: App, args: argparse.Namespace) -> int:
    import cv2

    if not args.image.is_file():
        raise InputError(f"{args.image}: no such image file")
    image = cv2.imread(str(args.image), cv2.IMREAD_COLOR)
    if image is None:
        raise InputError(f"{args.image} is not an image OpenCV can read (JPEG, PNG, BMP, ...)")
    if min(image.shape[:2]) < MIN_IMAGE_SIDE:
        raise InputError(
            f"{args.image} is {image.shape[1]}x{image.shape[0]} pixels; a camera frame is at least "
            f"{MIN_IMAGE_SIDE} pixels on each side"
        )
    faces = catalog.load_faces(app.store, app.threads).detect(image)
    rows = [
        {
            "box": [round(v, 1) for v in f.box],
            "score": round(f.score, 3),
            "keypoints": {name: [round(x, 1), round(y, 1)] for name, (x, y) in zip(KEYPOINTS, f.keypoints)},
        }
        for f in faces
    ]
    if args.json:
        print_json({"image": str(args.image), "width": image.shape[1], "height": image.shape[0], "faces": rows})
    else:
        print(f"{len(faces)} face(s) in {args.image} ({image.shape[1]}x{image.shape[0]})")
        for r in rows:
            print(f"  box {r['box']} score {r['score']}")
    return 0

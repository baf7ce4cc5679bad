"""Representative data for calibration, made from shipped material or read from a site's own.

Every model gets two disjoint sets: one to collect ranges on, one held apart for the accuracy
gates. Shipped material: the real recording and the product's own voice (speech), the bundled
photo with crops, flips, brightness and 16:9 placements (faces) and frames without a face, and
the kiosk's knowledge base (sentences). `--data DIR` replaces it with a site's WAV files, images
or text files (one sentence per line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engines.errors import InputError
from engines.model_specs import SPEECH_RATE
from engines.store.model_store import ModelStore

from device.audio_file import read_audio, resample
from device.bundled import SAMPLE_PHOTO
from device.conversation.dialogue import BUILTINS
from device.conversation.knowledge import load_knowledge

SENTENCES = [
    "Good afternoon, how can I help you today?", "The exhibition on the second floor closes at five.",
    "Please keep your ticket until the end of your visit.", "Guided tours start every hour at the front desk.",
    "Photography without flash is allowed in every gallery.", "The garden is open when the weather is good.",
    "Children must stay with an adult at all times.", "Lockers for bags are next to the cloakroom.",
]


@dataclass
class Dataset:
    """Inputs for one model: `calibrate` feeds the range collection, `held` the gates."""

    calibrate: list = field(default_factory=list)
    held: list = field(default_factory=list)


def split(items: list) -> Dataset:
    """Every third item is held apart."""
    return Dataset([x for i, x in enumerate(items) if i % 3 != 2], [x for i, x in enumerate(items) if i % 3 == 2])


def sentences(data: Path | None) -> Dataset:
    if data is not None:
        lines = [line.strip() for f in _files(data, (".txt",)) for line in f.read_text().splitlines() if line.strip()]
        return split(lines)
    intents = (*BUILTINS, *load_knowledge())
    examples = [e for intent in intents for e in intent.examples]
    answers = [intent.answer for intent in intents if intent.answer]
    return split(examples + answers + SENTENCES)


@dataclass(frozen=True)
class Speech:
    audio: np.ndarray  # 16 kHz mono
    text: str  # what is said ("" when unknown)


def speech(store: ModelStore, data: Path | None) -> Dataset:
    if data is not None:
        return split([Speech(read_audio(f), _transcript_of(f)) for f in _files(data, (".wav", ".flac"))])
    from device.models import catalog

    tts = catalog.load_tts(store, threads=2, variability=0.0)
    clips = []
    for i, text in enumerate(SENTENCES):
        audio = resample(np.concatenate([c.audio for c in tts.synthesize(text)]), tts.sample_rate, SPEECH_RATE)
        noise = np.random.default_rng(i).normal(0, 0.003, audio.size).astype(np.float32)
        clips.append(Speech(np.pad(audio * (0.3 + 0.1 * (i % 4)) + noise, 4000), text))
    beckett = read_audio(store.path("samples/beckett.wav"))
    clips.insert(2, Speech(beckett, "Ever tried. Ever failed. No matter. Try again. Fail again. Fail better."))
    return split(clips)


def _transcript_of(path: Path) -> str:
    text = path.with_suffix(".txt")
    return text.read_text().strip() if text.is_file() else ""


def photos(data: Path | None) -> Dataset:
    """BGR images; the gates compare INT8 with FP32 detections, so no labels are needed."""
    import cv2

    if data is not None:
        images = []
        for f in _files(data, (".jpg", ".jpeg", ".png", ".bmp")):
            image = cv2.imread(str(f), cv2.IMREAD_COLOR)
            if image is None:
                raise InputError(f"{f} is not an image OpenCV can read; remove it or convert it to JPEG or PNG")
            images.append(image)
        return split(images)
    photo = cv2.imread(str(SAMPLE_PHOTO))
    rng = np.random.default_rng(11)
    out = []
    for i in range(30):
        image = photo[:, ::-1] if i % 2 else photo
        size = int(rng.integers(300, 512))
        top, left = int(rng.integers(0, 512 - size + 1)), int(rng.integers(0, 512 - size + 1))
        crop = np.clip(image[top:top + size, left:left + size].astype(np.float32) * rng.uniform(0.6, 1.3), 0, 255).astype(np.uint8)
        frame = np.full((720, 1280, 3), int(rng.integers(30, 200)), np.uint8)
        scale = rng.uniform(0.6, 1.3)
        crop = cv2.resize(crop, (int(size * scale), int(size * scale)))
        y, x = int(rng.integers(0, 720 - crop.shape[0] + 1)), int(rng.integers(0, 1280 - crop.shape[1] + 1))
        frame[y:y + crop.shape[0], x:x + crop.shape[1]] = crop
        out.append(frame)
        if i % 3 == 0:  # a frame without a face: the photo's lower half, blurred and shifted
            empty = cv2.GaussianBlur(cv2.resize(photo[300:], (1280, 720)), (0, 0), 3 + i % 5)
            out.append(np.roll(empty, i * 37, axis=1))
    return split(out)


def _files(directory: Path, suffixes: tuple[str, ...]) -> list[Path]:
    if not directory.is_dir():
        raise InputError(f"--data {directory} is not a directory")
    files = sorted(p for p in directory.iterdir() if p.suffix.lower() in suffixes)
    if len(files) < 3:
        raise InputError(f"--data {directory} has {len(files)} file(s) of {', '.join(suffixes)}; "
                         "calibration needs at least 3 (one in three is held apart to check accuracy)")
    return files

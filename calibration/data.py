"""Calibration material: for each model, a tuning split (ranges, and the sensitivity sweep) and a
held-apart split (the accuracy gates only), kept apart from each other and from what the tests
assert on (the bundled visit, beckett.wav and the knowledge base's own examples are in neither).

Shipped material:
- text: visitor-style questions and remarks, none of them a knowledge-base example;
- speech: human readers from the pinned moonshine-voice wheel (Dickens' opening of A Tale of Two
  Cities, a scene of Beckett's Endgame, a short remark), cut at their pauses, and the questions above
  said by the four voices of `device.models.voices` with noise at 12-30 dB SNR;
- faces: the bundled photo with crops, flips, brightness and 16:9 placements, and frames without a face.
`--data DIR` replaces it with a site's WAV files (and .txt transcripts beside them), images or text
files (one sentence per line); one item in three is held apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engines.errors import InputError
from engines.model_specs import SPEECH_RATE
from engines.store.model_store import ModelStore

from device.audio_file import read_audio
from device.bundled import SAMPLE_PHOTO

QUESTIONS = [
    "Excuse me, is the museum busy today?",
    "Could you tell me where the gift shop is?",
    "Do I need to book the guided tour in advance?",
    "What is on the top floor?",
    "Are dogs allowed inside the building?",
    "Is there somewhere I can charge my phone?",
    "How long does it take to see everything?",
    "Can my kids touch the exhibits?",
    "Is there a student discount?",
    "Where does the tour start?",
    "Do you sell postcards?",
    "Can I bring my pushchair into the galleries?",
    "Is the garden open in the rain?",
    "Where do I leave my umbrella?",
    "Are there any lockers for my backpack?",
    "How late is the last entry?",
    "Does the ticket include the special exhibition?",
    "Is there an audio guide in Spanish?",
    "Where is the nearest bus stop?",
    "Can I pay with a card?",
    "Is there a water fountain nearby?",
    "What is the oldest thing you have?",
    "Are there benches where I can sit down?",
    "Can I come back in later with the same ticket?",
    "Is the cafe open on Sundays?",
    "Where can I change a baby's nappy?",
    "Do you have a lift to the second floor?",
    "My friend is waiting outside, can she come in for a minute?",
    "Is flash photography allowed?",
    "Hello, can you help me please?",
    "Thanks a lot, that was helpful.",
    "Sorry, I did not catch that.",
    "Could you speak a bit slower?",
    "What else should I see while I am here?",
    "Is there a family ticket for two adults and three children?",
    "Do members get in for free?",
    "When is the next film in the cinema room?",
    "Where can I find a map of the building?",
    "Is the exhibition suitable for young children?",
    "How do I get to the train station from here?",
    "Are there any vegetarian options in the restaurant?",
    "I think I have lost my glove somewhere.",
    "Is there a quiet room?",
    "Can I leave my bicycle at the entrance?",
    "Do you have hearing loops?",
    "Are the toilets on this floor?",
    "How far is the dinosaur hall?",
    "What time does the shop close?",
    "Can I get a receipt for my tickets?",
    "Is there a discount for seniors?",
    "Who painted the big picture in the hall?",
    "Do you run workshops for schools?",
    "Are there any events tonight?",
    "Where is the information desk?",
    "Can I eat my own lunch in the garden?",
    "Is there a taxi rank outside?",
    "What language do you speak?",
    "Can you recommend a good restaurant nearby?",
    "Is the roof terrace open today?",
    "How many floors does the building have?",
    "Is there a first aid room?",
    "Where can I buy a guidebook?",
    "Are there guided tours in French?",
    "Can I reserve a wheelchair for next week?",
    "Is photography allowed in the temporary exhibition?",
    "Where is the cloakroom?",
    "Do you have a children's trail?",
    "What is the best way to avoid the queues?",
    "Good morning, is it your first day?",
    "Are you able to call a member of staff?",
    "How old is this building?",
    "Where can I recycle my bottle?",
    "Can I book a table in the cafe?",
    "Is the planetarium show included?",
    "Do you close early on holidays?",
    "Is there a prayer room?",
    "Where is the entrance for groups?",
    "Can I bring a tripod?",
    "Are there any free exhibitions?",
    "What is the shortest route to the exit?",
    "Is there a place to fill my water bottle?",
    "Can I get a refund if I leave early?",
    "Do you have large print guides?",
    "How much is the car park for the whole day?",
    "Where do the school groups meet?",
    "Is the shop open to people without a ticket?",
    "Are you recording what I say?",
    "Which exhibition do people like the most?",
    "Is there an outdoor play area?",
    "See you later!",
]


@dataclass(frozen=True)
class Recording:
    """A stretch of a human reading in the store, cut at its pauses, and what is said in it."""

    file: str
    start_s: float
    end_s: float
    text: str  # "" where not transcribed (ranges and the VAD only)
    held: bool


RECORDINGS = (
    Recording(
        "samples/two_cities.wav",
        0.0,
        10.43,
        "It was the best of times, it was the worst of times, it was the "
        "age of wisdom, it was the age of foolishness, it was the epoch of belief",
        False,
    ),
    Recording(
        "samples/two_cities.wav",
        10.43,
        20.59,
        "it was the epoch of incredulity, it was the season of light, it "
        "was the season of darkness, it was the spring of hope, it was the winter of despair",
        True,
    ),
    Recording(
        "samples/two_cities.wav",
        20.59,
        32.54,
        "we had everything before us, we had nothing before us, we were "
        "all going direct to heaven, we were all going direct the other way, in short, the period was so far "
        "like the present period",
        False,
    ),
    Recording(
        "samples/two_cities.wav",
        32.54,
        44.37,
        "that some of its noisiest authorities insisted on its being "
        "received, for good or for evil, in the superlative degree of comparison only",
        True,
    ),
    Recording("samples/endgame.wav", 0.0, 14.0, "", False),
    Recording("samples/endgame.wav", 14.0, 28.3, "", True),
    Recording("samples/clone-test.wav", 0.0, 4.1, "", False),
)
SPOKEN = 36  # questions said by the synthetic voices (every third of them held apart)
NOISE_SNR_DB = (30, 20, 15, 12)


@dataclass
class Dataset:
    """Inputs for one model: `calibrate` feeds the range collection and the sensitivity sweep,
    `held` only the gates."""

    calibrate: list = field(default_factory=list)
    held: list = field(default_factory=list)


def split(items: list) -> Dataset:
    """Every third item is held apart."""
    return Dataset([x for i, x in enumerate(items) if i % 3 != 2], [x for i, x in enumerate(items) if i % 3 == 2])


def sentences(data: Path | None) -> Dataset:
    if data is not None:
        lines = [line.strip() for f in _files(data, (".txt",)) for line in f.read_text().splitlines() if line.strip()]
        return split(lines)
    return split(QUESTIONS)


@dataclass(frozen=True)
class Speech:
    audio: np.ndarray  # 16 kHz mono
    text: str  # what is said ("" when unknown)


def speech(store: ModelStore, data: Path | None) -> Dataset:
    if data is not None:
        return split([Speech(read_audio(f), _transcript_of(f)) for f in _files(data, (".wav", ".flac"))])
    dataset = Dataset()
    for recording in RECORDINGS:
        audio = read_audio(store.path(recording.file))[
            int(recording.start_s * SPEECH_RATE) : int(recording.end_s * SPEECH_RATE)
        ]
        (dataset.held if recording.held else dataset.calibrate).append(Speech(audio, recording.text))
    spoken = split(_spoken(store))
    dataset.calibrate += spoken.calibrate
    dataset.held += spoken.held
    return dataset


def _spoken(store: ModelStore) -> list[Speech]:
    """The first SPOKEN questions, voices and noise levels in rotation, with silence around them."""
    from device.models.voices import VOICES, load_voices, speak

    synthesizers = load_voices(store, threads=2)
    clips = []
    for i, text in enumerate(QUESTIONS[:SPOKEN]):
        audio, _, _ = speak(synthesizers, VOICES[i % len(VOICES)], text)
        audio = np.pad(audio * (0.3 + 0.1 * (i % 4)), (4000 + 800 * (i % 5), 4000))
        clips.append(Speech(with_noise(audio, NOISE_SNR_DB[i % len(NOISE_SNR_DB)], seed=i), text))
    return clips


def with_noise(audio: np.ndarray, snr_db: float, seed: int) -> np.ndarray:
    """`audio` with pink noise (power falling 3 dB an octave, like much hall noise) at `snr_db` below
    its speech power (measured where the audio is not silent)."""
    rng = np.random.default_rng(seed)
    spectrum = np.fft.rfft(rng.normal(0, 1, audio.size))
    spectrum[1:] /= np.sqrt(np.arange(1, spectrum.size))
    noise = np.fft.irfft(spectrum, audio.size).astype(np.float32)
    loud = audio[np.abs(audio) > 0.02 * np.abs(audio).max()]
    gain = np.sqrt(np.mean(loud**2) / np.mean(noise**2) / 10 ** (snr_db / 10))
    return (audio + gain * noise).astype(np.float32)


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
        crop = np.clip(
            image[top : top + size, left : left + size].astype(np.float32) * rng.uniform(0.6, 1.3), 0, 255
        ).astype(np.uint8)
        frame = np.full((720, 1280, 3), int(rng.integers(30, 200)), np.uint8)
        scale = rng.uniform(0.6, 1.3)
        crop = cv2.resize(crop, (int(size * scale), int(size * scale)))
        y, x = int(rng.integers(0, 720 - crop.shape[0] + 1)), int(rng.integers(0, 1280 - crop.shape[1] + 1))
        frame[y : y + crop.shape[0], x : x + crop.shape[1]] = crop
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
        raise InputError(
            f"--data {directory} has {len(files)} file(s) of {', '.join(suffixes)}; "
            "calibration needs at least 3 (one in three is held apart to check accuracy)"
        )
    return files

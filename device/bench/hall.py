"""A loud hall for the hearing evaluation: visitors' questions and other people's talk, through a room.

A reverberant shoebox (pyroomacoustics, RT60 0.5 s): the visitor 0.7 m in front of the microphone,
six other talkers 2-5 m away in every direction. Four of them are the synthetic voices saying the
split's babble sentences in their own order, two are readers from the model store, each split its
own recording (tuning: a human LibriVox reading; held-apart: Endgame, which moonshine's own script
synthesized with two ZipVoice voices). The babble's level is set by the signal-to-noise ratio over the visitor's
speech (their 10 ms blocks above -40 dBFS against the babble in the same blocks). The microphone is
one, or an array of several (the same room heard at each of them), each with its own hiss.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engines.model_specs import SPEECH_RATE

from device.audio_file import read_audio
from device.bench.pauses import SPLITS
from device.bundled import SAMPLES
from device.models.voices import VOICES, load_voices, speak
from device.sound.beamformer import MicArray
from device.sound.echo_room import ACTIVE_DB, block_power
from device.toml_file import tomllib

HALL_FILE = SAMPLES / "hall" / "hall.toml"
READERS = {"tuning": "samples/two_cities.wav", "held-apart": "samples/endgame.wav"}
RT60_S = 0.5
VISITOR_M = 0.7
TALKER_M = (2.0, 5.0)
# A MEMS microphone's self-noise is 29-33 dBA SPL; a visitor 0.7 m away speaks at 60-65 dB SPL there.
SELF_NOISE_DB = 30.0
LEAD_S, TAIL_S = 2.0, 2.0  # babble before and after each question


@dataclass(frozen=True)
class HallQuestion:
    text: str
    intent: str
    voice: str
    audio: np.ndarray  # 16 kHz, dry, as said

    @property
    def spoken(self) -> int:
        """The sample after the question's last sound (the room's echo of it goes on)."""
        loud = np.flatnonzero(np.abs(self.audio) > 0.02 * np.abs(self.audio).max())
        return int(loud[-1]) + 1


def load_questions(
    store, split: str, threads: int = 1, limit: int | None = None
) -> tuple[list[HallQuestion], list[np.ndarray]]:
    """The split's questions (voices in rotation; its first `limit` only, if given) and its six babble
    talkers' dry streams."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    listing = tomllib.loads(HALL_FILE.read_text())
    voices = load_voices(store, threads)
    rows = [q for q in listing["question"] if q["split"] == split][:limit]
    questions = [
        HallQuestion(
            q["text"], q["intent"], VOICES[i % len(VOICES)].name, speak(voices, VOICES[i % len(VOICES)], q["text"])[0]
        )
        for i, q in enumerate(rows)
    ]
    key = (store.root, split)
    if key not in _TALKERS:
        _TALKERS[key] = _talkers(store, split, voices, listing["babble"][split])
    return questions, list(_TALKERS[key])


# The talkers of a store's split, made once per process: the voices are pinned and speak without
# random variation, so the streams are always the same, and synthesizing them takes about 20 s of
# two cores (every hall measurement and its tests would pay it again).
_TALKERS: dict[tuple[Path, str], tuple[np.ndarray, ...]] = {}


def _talkers(store, split: str, voices, sentences: list[str]) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(SPLITS.index(split))
    talkers = []
    for voice in VOICES:  # each voice says every sentence once, in its own order, with short gaps
        order = rng.permutation(len(sentences))
        said = [speak(voices, voice, sentences[i])[0] for i in order]
        talkers.append(
            np.concatenate(
                [np.concatenate([s, np.zeros(int(rng.uniform(0.1, 0.5) * SPEECH_RATE), np.float32)]) for s in said]
            )
        )
    reader = read_audio(store.path(READERS[split]))
    talkers += [reader, np.roll(reader, len(reader) // 2)]
    for stream in talkers:
        stream.setflags(write=False)  # shared by every caller
    return tuple(talkers)


class Hall:
    """One room: the visitor's and each talker's path to the microphone, or to each microphone of an
    array (centred where the single microphone is, facing the visitor)."""

    def __init__(self, talkers: int, seed: int, array: MicArray | None = None) -> None:
        import pyroomacoustics as pra

        self.seed = seed  # which hall: what is heard in it (its babble, the microphones' hiss) is drawn from it too
        rng = np.random.default_rng(seed)
        size = np.array([14.0, 10.0, 4.0]) * rng.uniform(0.9, 1.1, 3)
        absorption, max_order = pra.inverse_sabine(RT60_S, size)
        room = pra.ShoeBox(size, fs=SPEECH_RATE, materials=pra.Material(absorption), max_order=min(max_order, 30))
        centre = np.array([size[0] / 2, size[1] / 2, 1.4])
        mouth = np.array([0.0, VISITOR_M, 0.15])  # a visitor's mouth, a little above the robot's microphone
        room.add_source(centre + mouth)
        for angle, distance in zip(rng.uniform(0, 2 * np.pi, talkers), rng.uniform(*TALKER_M, talkers)):
            room.add_source(centre + np.array([np.cos(angle) * distance, np.sin(angle) * distance, 0.2]))
        # The array's axes are the room's: the robot faces +y, its right is +x.
        room.add_microphone_array((centre + (np.zeros((1, 3)) if array is None else array.positions)).T)
        room.compute_rir()
        self.responses = [[np.asarray(r, np.float32) for r in per_mic] for per_mic in room.rir]  # [microphone][source]
        self.visitor_direction = mouth / np.linalg.norm(mouth)  # where the camera sees the visitor's face

    def visitor(self, audio: np.ndarray) -> np.ndarray:
        """(microphones, samples): the visitor's speech as each microphone hears it."""
        from scipy.signal import fftconvolve

        return np.stack([fftconvolve(audio, r[0])[: len(audio) + SPEECH_RATE // 2] for r in self.responses]).astype(
            np.float32
        )

    def babble(self, talkers: list[np.ndarray], length: int, rng: np.random.Generator) -> np.ndarray:
        """(microphones, `length`): everyone else talking at once, each from a random point of their stream."""
        from scipy.signal import fftconvolve

        mix = np.zeros((len(self.responses), length), np.float64)
        for index, stream in enumerate(talkers, start=1):
            start = int(rng.integers(len(stream)))
            piece = np.resize(np.roll(stream, -start), length)
            for mic, responses in enumerate(self.responses):
                mix[mic] += fftconvolve(piece, responses[index])[:length]
        return mix.astype(np.float32)


def microphone_noise(shape: tuple[int, ...], speech_dbfs: float, rng: np.random.Generator) -> np.ndarray:
    """Each microphone's own hiss, `SELF_NOISE_DB` under the visitor's speech: a superdirective array
    amplifies it at low frequencies, so leaving it out would flatter the array."""
    return (rng.standard_normal(shape) * 10 ** ((speech_dbfs - SELF_NOISE_DB) / 20)).astype(np.float32)


def at_snr(speech: np.ndarray, babble: np.ndarray, snr_db: float | None) -> np.ndarray:
    """`babble` scaled so that the speech is `snr_db` over it in the blocks where the speech sounds
    (None: no babble at all, the quiet room); with several microphones, as the first one hears them."""
    if snr_db is None:
        return np.zeros_like(babble)
    speech_power, babble_power = block_power(np.atleast_2d(speech)[0]), block_power(np.atleast_2d(babble)[0])
    active = speech_power > 10 ** (ACTIVE_DB / 10)
    gain = np.sqrt(
        speech_power[active].mean() / max(babble_power[: active.size][active].mean(), 1e-12) / 10 ** (snr_db / 10)
    )
    return (babble * gain).astype(np.float32)

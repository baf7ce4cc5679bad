"""Playing a visit through the conversation: questions as microphone frames, paced like a real
microphone, the visitor waiting for each answer before asking the next."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from engines.model_specs import FRAME, SPEECH_RATE

from device.audio_file import read_audio
from device.bundled import BUNDLED_VISIT
from device.conversation.turn_loop import Conversation
from device.sound.microphones import MicrophoneClock
from device.toml_file import tomllib

GAP_SECONDS = 0.6  # the visitor's pause after an answer before the next question


@dataclass(frozen=True)
class Question:
    audio: np.ndarray  # 16 kHz mono
    name: str
    text: str = ""  # what was said, when known
    intent: str = ""  # the intent it should get, when known


def bundled_questions() -> list[Question]:
    listing = tomllib.loads((BUNDLED_VISIT / "visit.toml").read_text())
    return [
        Question(read_audio(BUNDLED_VISIT / q["file"]), q["file"], q["text"], q["intent"]) for q in listing["question"]
    ]


def play_visit(
    conversation: Conversation,
    questions: list[Question],
    realtime: bool = True,
    noise_db: float | None = None,
    answer_timeout: float = 60.0,
) -> None:
    """Feed each question, then silence (or hall noise at `noise_db` dBFS) until it is answered. Not
    `realtime`: as fast as the conversation takes it, each pause's recognition and verdicts given the
    next frame (Conversation.finish_pause_work), so a run is the same on a fast machine or a loaded one."""
    clock = MicrophoneClock(realtime)
    rng = np.random.default_rng(7)
    level = 0.0 if noise_db is None else 10 ** (noise_db / 20)

    def feed(audio: np.ndarray) -> None:
        for start in range(0, len(audio) - FRAME + 1, FRAME):
            frame = audio[start : start + FRAME]
            if level:
                frame = frame + rng.normal(0, level, FRAME).astype(np.float32)
            clock.wait()
            conversation.feed(frame.astype(np.float32))
            if not realtime:
                conversation.finish_pause_work()

    silence = np.zeros(FRAME, np.float32)
    for question in questions:
        feed(question.audio)
        deadline = time.monotonic() + answer_timeout
        fed = 0
        # Silence until the endpoint is decided and the answer has been spoken.
        while (fed < 3 or not conversation.idle()) and time.monotonic() < deadline:
            feed(silence)
            fed += 1
        feed(np.zeros(int(GAP_SECONDS * SPEECH_RATE), np.float32))

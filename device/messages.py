"""The small typed messages the conversation stages pass to each other.

They are the shared vocabulary of the pipeline's stages (and the avatar's inbox), so this module
imports nothing of the product above the model specifications.
Sample positions are in the stream's own clock: microphone samples at 16 kHz for what the visitor
says, speaker samples at the voice's rate for what the robot says. An interruption is a message too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.model_specs import SPEECH_RATE


@dataclass(frozen=True)
class SpeechStarted:
    sample: int  # first sample of speech (before the pre-roll)


@dataclass(frozen=True)
class SpeechPaused:
    """A short silence after speech: the cue for speculative recognition."""

    heard: np.ndarray  # the utterance so far, pre-roll included, up to this pause's cue: what the
    # end-of-turn model reads. Its authors' runtime (pipecat) gives it the silence after the speech too,
    # and the model judges a question said straight through finished far more often with it
    # (docs/lab/end-of-turn.md).
    speech_end: int  # sample just after the last speech frame
    silence: int  # samples of `heard` after the last frame the VAD called speech (Utterance.audio's end)

    @property
    def audio(self) -> np.ndarray:
        """The utterance as it would end here (a view of `heard`): what recognition reads."""
        return self.heard[: len(self.heard) - self.silence]


@dataclass(frozen=True)
class EndOfTurnVerdict:
    """The end-of-turn model's judgement of the pause after `speech_end`."""

    speech_end: int  # the pause it judged: sample just after the last speech frame
    probability: float  # that the visitor has finished
    complete: bool  # probability at or above the threshold
    cost_ms: float  # features and inference


@dataclass(frozen=True)
class SpeechResumed:
    """The visitor went on talking: a speculative result is void."""


@dataclass(frozen=True)
class Utterance:
    """A finished utterance, decided by the endpointer."""

    audio: np.ndarray  # 16 kHz mono float32, pre-roll included, up to the last frame the VAD called speech
    # (past `speech_end` when the noise floor's margin did not count its last frames), no silence after
    speech_start: int
    speech_end: int  # sample just after the last speech frame
    decided: int  # sample at which the endpoint was decided (speech_end + hangover)
    audio_start: int  # sample of the stream where `audio` begins (the pre-roll's first)
    truncated: bool = False  # cut at the maximum utterance length

    @property
    def seconds(self) -> float:
        return (self.speech_end - self.speech_start) / SPEECH_RATE


@dataclass(frozen=True)
class Viseme:
    """A mouth shape from `sample` on, in speaker samples since the start of the reply."""

    sample: int
    shape: str


@dataclass(frozen=True)
class ReplyChunk:
    """A piece of a reply's sound, ready for the speaker: a sentence or, while it is being made, a
    piece of one. A sentence's first chunk carries its text and all its mouth shapes; the rest none."""

    turn: int
    index: int
    text: str
    audio: np.ndarray
    sample_rate: int
    start: int  # first sample of this chunk within the reply
    visemes: tuple[Viseme, ...]
    last: bool


@dataclass(frozen=True)
class Interrupt:
    """Stop speaking now: cancel synthesis, flush the speaker."""

    reason: str


@dataclass(frozen=True)
class ReplyPaused:
    """The visitor started talking over the reply (barge-in): the speaker fades out and waits."""

    turn: int  # the reply's turn


@dataclass(frozen=True)
class ReplyResumed:
    """It was only a cough or a backchannel ("mm-hm"): the reply goes on from where it paused."""

    turn: int


@dataclass(frozen=True)
class LookAt:
    """Where the visitor's face is, in camera coordinates normalised to -1..1 (None: nobody there)."""

    point: tuple[float, float] | None


@dataclass(frozen=True)
class Presence:
    """A visitor arrived (True) or left (False)."""

    engaged: bool


@dataclass
class TurnTimings:
    """Monotonic seconds of each step of one turn; fields are None until reached."""

    turn: int
    speech_end: float | None = None  # when the last speech sample arrived
    endpoint: float | None = None  # when the endpoint was decided
    asr_done: float | None = None
    dialogue_done: float | None = None
    first_chunk: float | None = None  # first TTS chunk synthesized
    first_audio: float | None = None  # first reply sample handed to the speaker
    speculative_hit: bool = False

    def stages_ms(self) -> dict[str, float | None]:
        """Durations in ms: each stage from the previous mark, and the whole turn."""

        def span(a, b):
            return None if a is None or b is None else round((b - a) * 1000, 1)

        return {
            "endpoint": span(self.speech_end, self.endpoint),
            "asr": span(self.endpoint, self.asr_done),
            "dialogue": span(self.asr_done, self.dialogue_done),
            "first_chunk": span(self.dialogue_done, self.first_chunk),
            "first_audio": span(self.first_chunk, self.first_audio),
            "processing": span(self.endpoint, self.first_audio),
            "turn": span(self.speech_end, self.first_audio),
        }

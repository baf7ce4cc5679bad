"""`orin-avatar bench hearing`: how well the robot understands visitors in a loud hall.

Each question of the split (`samples/hall/hall.toml`) is said in the hall (device/bench/hall.py) with
two seconds of babble before and after it, at each condition (the quiet room, then babble at 20, 10,
5 and 0 dB SNR), and heard as the daemon hears it: VAD and endpointer frame by frame, recognition of
each utterance (one that goes on within `rejoin_within_ms` of the one before heard with it, as the
conversation rejoins them), the dialogue's decision. Per condition: word error rate and intent accuracy (answered
right; also counted: asked back about the right intent, and wrong answers) of the utterance that holds
the question, utterances started by babble alone, and how long after the
question its utterance ended. Then a minute of babble alone, at the level it has at 10 dB: the
utterances it starts. Heard by one microphone, or by an array steered at the visitor.

With `own_span`, each question is recognised from its own span in the mix instead (OWN_SPAN_PAD_S
either side): what recognition and the dialogue make of the hall when the segmentation is perfect, so
that what the endpointer's cuts cost is told from what the recogniser loses (docs/lab/hearing.md).
"""

from __future__ import annotations

import sys

import numpy as np

from engines.errors import InputError
from engines.model_specs import FRAME, SPEECH_RATE

from device.bench.hall import LEAD_S, SPLITS, TAIL_S, Hall, at_snr, load_questions, microphone_noise
from device.conversation.endpointer import Endpointer
from device.conversation.kb_check import outcome, tally
from device.conversation.rejoin import heard_in_turns
from device.messages import Utterance
from device.models import catalog
from device.models.asr import word_error_rate, words
from device.sound.beamformer import HOP, Beamformer, MicArray, direction_angles
from device.sound.echo_room import active_rms

CONDITIONS: tuple[float | None, ...] = (None, 20.0, 10.0, 5.0, 0.0)  # None: the quiet room
SPEECH_DBFS = -26.0  # the visitor's speech level at the microphone
FLUSH_S = 3.0  # silence after a clip, so an utterance the babble kept open ends and is scored
BABBLE_ONLY_S = 60.0
HALL = 7  # the hall every figure of docs/lab/hearing.md is of: the seed of its room, its talkers' places, their babble
OWN_SPAN_PAD_S = 0.05  # a question's own span: its first to its last sample, and this much either side


def measure_hearing(
    app,
    split: str,
    conditions: tuple[float | None, ...] = CONDITIONS,
    limit: int | None = None,
    array: MicArray | None = None,
    own_span: bool = False,
    hall: int = HALL,
) -> dict:
    """`limit`: only the split's first questions (a quick look; they are in the order of the intents).
    `array`: heard through a microphone array whose beam the camera's face direction steers.
    `own_span`: each question recognised from its own span, not from the endpointer's utterances.
    `hall`: which hall (another room, talkers elsewhere, other babble): one hall's figures move by a
    question or two of 22 from another's, more than most settings do (docs/lab/hearing.md)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if limit is not None and limit < 1:
        raise InputError(f"--questions must be 1 or more, got {limit}")
    if hall < 0:
        raise InputError(f"--hall must be 0 or more, got {hall}")
    vad, asr = catalog.load_vad(app.store), catalog.load_asr(app.store, app.threads)
    dialogue = app.dialogue()
    questions, talkers = load_questions(app.store, split, app.threads, limit)
    room = Hall(len(talkers), hall, array)
    voiced = [_level(room.visitor(q.audio)) for q in questions]
    report = {
        "split": split,
        "threads": app.threads,
        "questions": len(questions),
        "own_span": own_span,
        "hall": hall,
        "conditions": [],
        "array": None
        if array is None
        else {"microphones": array.count, "radius_mm": round(float(np.linalg.norm(array.positions[0])) * 1000, 1)},
    }
    endpoint = app.settings.endpoint if array is None else app.settings.endpoint.through_array()
    rejoin_ms = endpoint.rejoin_within_ms if app.settings.bargein.enabled else 0  # the conversation rejoins only then
    segment = _own_span if own_span else lambda audio, on_axis_db, span: heard(audio, on_axis_db, vad, endpoint)
    for snr in conditions:
        print(f"hearing: {'quiet room' if snr is None else f'babble at {snr:g} dB'}...", file=sys.stderr, flush=True)
        rng, listen = (
            np.random.default_rng(hall),
            _Microphones(room, array),
        )  # each condition's own, whichever ran before
        rows = [
            _hear(
                q,
                speech,
                room.babble(talkers, _length(speech), rng),
                snr,
                listen,
                segment,
                asr,
                dialogue,
                endpoint,
                rejoin_ms,
            )
            for q, speech in zip(questions, voiced)
        ]
        report["conditions"].append(_summary(snr, rows))
    report["babble_only"] = _babble_only(room, talkers, voiced[0], _Microphones(room, array), vad, endpoint)
    return report


class _Microphones:
    """What the robot makes of the hall at its microphones: each one's hiss added, then the one
    microphone's signal, or the array's beam steered where the camera sees the visitor's face."""

    def __init__(self, hall: Hall, array: MicArray | None) -> None:
        self.array, self.direction = array, hall.visitor_direction
        self._hiss = np.random.default_rng(hall.seed + 2)

    def __call__(self, sound: np.ndarray) -> tuple[np.ndarray, list[float] | None]:
        """The signal the endpointer gets, and with an array each frame's `on_axis_db`."""
        sound = sound + microphone_noise(sound.shape, SPEECH_DBFS, self._hiss)
        if self.array is None:
            return sound[0], None
        beamformer = Beamformer(self.array, SPEECH_RATE)
        beamformer.steer(*direction_angles(self.direction))
        beam = beamformer.process(np.pad(sound, ((0, 0), (0, HOP))))[HOP:]
        hops = np.array(beamformer.on_axis_db)[1:]  # as the beam, one hop on
        per_frame = FRAME // HOP
        return beam, list(hops[: len(hops) // per_frame * per_frame].reshape(-1, per_frame).mean(axis=1))


def _level(speech: np.ndarray) -> np.ndarray:
    """Scaled so the first microphone hears it at SPEECH_DBFS."""
    return (speech * 10 ** (SPEECH_DBFS / 20) / max(active_rms(speech[0]), 1e-9)).astype(np.float32)


def _length(speech: np.ndarray) -> int:
    return int(LEAD_S * SPEECH_RATE) + speech.shape[-1] + int(TAIL_S * SPEECH_RATE)


def _overlap(utterance: Utterance, span: tuple[int, int]) -> int:
    return min(utterance.speech_end, span[1]) - max(utterance.speech_start, span[0])


def _hear(question, speech, babble, snr, listen, segment, asr, dialogue, settings, rejoin_ms) -> dict:
    """`segment`: the utterances made of the mix (`heard` or `_own_span`). `rejoin_ms`: utterances
    that go on within it are one question, as the conversation joins them."""
    lead = int(LEAD_S * SPEECH_RATE)
    placed = np.zeros(babble.shape, np.float32)
    placed[:, lead : lead + speech.shape[-1]] = speech
    span = (lead, lead + question.spoken)
    utterances = segment(*listen(placed + at_snr(placed, babble, snr)), span)
    overlaps = [_overlap(u, span) for u in utterances]
    questions = heard_in_turns(
        utterances, rejoin_ms, settings.max_utterance_s, dialogue, lambda audio: asr.transcribe(audio).text
    )
    best = max(questions, key=lambda q: _overlap(q[0], span)) if questions and max(overlaps) > 0 else None
    transcript = best[1] if best is not None else ""
    decision = dialogue.decide(transcript) if words(transcript) else None
    return {
        "text": question.text,
        "voice": question.voice,
        "expected": question.intent,
        "transcript": transcript,
        "kind": decision.kind if decision else None,
        "intent": decision.intent if decision else None,
        "outcome": outcome(decision, question.intent) if decision else "not heard",
        "wer": word_error_rate(question.text, transcript),
        "reference_words": len(words(question.text)),
        "false_utterances": sum(o <= 0 for o in overlaps),
        "rejoined": best is not None and all(best[0] is not u for u in utterances),
        "ended_ms": None if best is None else round((best[0].decided - span[1]) / SPEECH_RATE * 1000),
    }


def heard(audio: np.ndarray, on_axis_db: list[float] | None, vad, settings) -> list[Utterance]:
    """The utterances the VAD and the endpointer make of `audio` (with an array's `on_axis_db` per
    frame, or None), then of silence until they end."""
    endpointer = Endpointer(settings)
    vad.reset()
    audio = np.concatenate([audio, np.zeros(int(FLUSH_S * SPEECH_RATE), np.float32)])
    utterances = []
    for index in range(len(audio) // FRAME):
        frame = audio[index * FRAME : (index + 1) * FRAME]
        on_axis = on_axis_db[index] if on_axis_db is not None and index < len(on_axis_db) else None
        utterances += [
            e for e in endpointer.push(frame, vad.probability(frame), on_axis_db=on_axis) if isinstance(e, Utterance)
        ]
    return utterances


def _own_span(audio: np.ndarray, on_axis_db: list[float] | None, span: tuple[int, int]) -> list[Utterance]:
    """The question's own span of `audio` (samples `span`, padded) as its one utterance, ended as soon
    as it is over (`on_axis_db`, the array's per frame, is not needed to know it)."""
    pad = int(OWN_SPAN_PAD_S * SPEECH_RATE)
    start, end = max(0, span[0] - pad), min(len(audio), span[1] + pad)
    return [Utterance(audio[start:end], span[0], span[1], end, start)]


def _summary(snr: float | None, rows: list[dict]) -> dict:
    errors = sum(r["wer"] * r["reference_words"] for r in rows)
    ended = sorted(r["ended_ms"] for r in rows if r["ended_ms"] is not None)
    counts = tally(rows)  # a question not heard counts against every share
    return {
        "snr_db": snr,
        "wer": round(errors / max(1, sum(r["reference_words"] for r in rows)), 3),
        "intent_accuracy": round(counts["right"] / len(rows), 3),
        "right_or_asked": counts["right_or_asked"],
        "wrong": counts["wrong"],
        "heard": sum(r["ended_ms"] is not None for r in rows),
        "rejoined": sum(r["rejoined"] for r in rows),
        "false_utterances": sum(r["false_utterances"] for r in rows),
        "ended_after_question_ms_p50": ended[len(ended) // 2] if ended else None,
        "questions": rows,
    }


def _babble_only(hall: Hall, talkers, reference_speech: np.ndarray, listen, vad, settings) -> dict:
    """A minute of babble alone, as loud as at 10 dB under the first question: utterances it starts."""
    rng = np.random.default_rng(hall.seed + 1)
    length = int(BABBLE_ONLY_S * SPEECH_RATE)
    placed = np.zeros((reference_speech.shape[0], length), np.float32)
    placed[:, : reference_speech.shape[-1]] = reference_speech
    level = at_snr(placed, hall.babble(talkers, length, rng), 10.0)
    count = len(heard(*listen(level), vad, settings))
    return {
        "seconds": BABBLE_ONLY_S,
        "snr_db": 10.0,
        "utterances": count,
        "per_minute": round(count * 60 / BABBLE_ONLY_S, 1),
    }

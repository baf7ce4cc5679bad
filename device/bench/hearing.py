"""`orin-avatar bench hearing`: how well the robot understands visitors in a loud hall.

Each question of the split (`samples/hall/hall.toml`) is said in the hall (device/bench/hall.py) with
two seconds of babble before and after it, at each condition (the quiet room, then babble at 20, 10,
5 and 0 dB SNR), and heard as the daemon hears it: VAD and endpointer frame by frame, recognition of
each utterance, the dialogue's decision. Per condition: word error rate and intent accuracy (answered
right; also counted: asked back about the right intent, and wrong answers) of the utterance that holds
the question, utterances started by babble alone, and how long after the
question its utterance ended. Then a minute of babble alone, at the level it has at 10 dB: the
utterances it starts.
"""

from __future__ import annotations

import sys

import numpy as np

from engines.errors import InputError
from engines.model_specs import FRAME, SPEECH_RATE

from device.bench.hall import LEAD_S, SPLITS, TAIL_S, Hall, at_snr, load_questions
from device.conversation.endpointer import Endpointer
from device.conversation.kb_check import outcome, tally
from device.messages import Utterance
from device.models import catalog
from device.models.asr import word_error_rate, words
from device.sound.echo_room import active_rms

CONDITIONS: tuple[float | None, ...] = (None, 20.0, 10.0, 5.0, 0.0)  # None: the quiet room
SPEECH_DBFS = -26.0  # the visitor's speech level at the microphone
FLUSH_S = 3.0  # silence after a clip, so an utterance the babble kept open ends and is scored
BABBLE_ONLY_S = 60.0
SEED = 7


def measure_hearing(app, split: str, conditions: tuple[float | None, ...] = CONDITIONS, limit: int | None = None) -> dict:
    """`limit`: only the split's first questions (a quick look; they are in the order of the intents)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if limit is not None and limit < 1:
        raise InputError(f"--questions must be 1 or more, got {limit}")
    vad, asr = catalog.load_vad(app.store), catalog.load_asr(app.store, app.threads)
    dialogue = app.dialogue()
    questions, talkers = load_questions(app.store, split, app.threads, limit)
    hall = Hall(len(talkers), SEED)
    voiced = [_level(hall.visitor(q.audio)) for q in questions]
    report = {"split": split, "threads": app.threads, "questions": len(questions), "conditions": []}
    for snr in conditions:
        print(f"hearing: {'quiet room' if snr is None else f'babble at {snr:g} dB'}...", file=sys.stderr, flush=True)
        rng = np.random.default_rng(SEED)
        rows = [_hear(q, speech, hall.babble(talkers, _length(speech), rng), snr, vad, asr, dialogue, app.settings.endpoint)
                for q, speech in zip(questions, voiced)]
        report["conditions"].append(_summary(snr, rows))
    report["babble_only"] = _babble_only(hall, talkers, voiced[0], vad, app.settings.endpoint)
    return report


def _level(speech: np.ndarray) -> np.ndarray:
    return (speech * 10 ** (SPEECH_DBFS / 20) / max(active_rms(speech), 1e-9)).astype(np.float32)


def _length(speech: np.ndarray) -> int:
    return int(LEAD_S * SPEECH_RATE) + len(speech) + int(TAIL_S * SPEECH_RATE)


def _hear(question, speech, babble, snr, vad, asr, dialogue, settings) -> dict:
    lead = int(LEAD_S * SPEECH_RATE)
    placed = np.zeros(len(babble), np.float32)
    placed[lead:lead + len(speech)] = speech
    utterances = heard(placed + at_snr(placed, babble, snr), vad, settings)
    span = (lead, lead + question.spoken)
    overlaps = [min(u.speech_end, span[1]) - max(u.speech_start, span[0]) for u in utterances]
    best = utterances[int(np.argmax(overlaps))] if utterances and max(overlaps) > 0 else None
    transcript = asr.transcribe(best.audio).text if best is not None else ""
    decision = dialogue.decide(transcript) if words(transcript) else None
    return {"text": question.text, "voice": question.voice, "expected": question.intent, "transcript": transcript,
            "kind": decision.kind if decision else None, "intent": decision.intent if decision else None,
            "outcome": outcome(decision, question.intent) if decision else "not heard",
            "wer": word_error_rate(question.text, transcript),
            "reference_words": len(words(question.text)), "false_utterances": sum(o <= 0 for o in overlaps),
            "ended_ms": None if best is None else round((best.decided - span[1]) / SPEECH_RATE * 1000)}


def heard(audio: np.ndarray, vad, settings) -> list[Utterance]:
    """The utterances the VAD and the endpointer make of `audio`, then of silence until they end."""
    endpointer = Endpointer(settings)
    vad.reset()
    audio = np.concatenate([audio, np.zeros(int(FLUSH_S * SPEECH_RATE), np.float32)])
    utterances = []
    for index in range(len(audio) // FRAME):
        frame = audio[index * FRAME:(index + 1) * FRAME]
        utterances += [e for e in endpointer.push(frame, vad.probability(frame)) if isinstance(e, Utterance)]
    return utterances


def _summary(snr: float | None, rows: list[dict]) -> dict:
    errors = sum(r["wer"] * r["reference_words"] for r in rows)
    ended = sorted(r["ended_ms"] for r in rows if r["ended_ms"] is not None)
    counts = tally(rows)  # a question not heard counts against every share
    return {"snr_db": snr, "wer": round(errors / max(1, sum(r["reference_words"] for r in rows)), 3),
            "intent_accuracy": round(counts["right"] / len(rows), 3), "right_or_asked": counts["right_or_asked"],
            "wrong": counts["wrong"],
            "heard": sum(r["ended_ms"] is not None for r in rows),
            "false_utterances": sum(r["false_utterances"] for r in rows),
            "ended_after_question_ms_p50": ended[len(ended) // 2] if ended else None,
            "questions": rows}


def _babble_only(hall: Hall, talkers, reference_speech: np.ndarray, vad, settings) -> dict:
    """A minute of babble alone, as loud as at 10 dB under the first question: utterances it starts."""
    rng = np.random.default_rng(SEED + 1)
    length = int(BABBLE_ONLY_S * SPEECH_RATE)
    placed = np.zeros(length, np.float32)
    placed[:len(reference_speech)] = reference_speech
    level = at_snr(placed, hall.babble(talkers, length, rng), 10.0)
    count = len(heard(level, vad, settings))
    return {"seconds": BABBLE_ONLY_S, "snr_db": 10.0, "utterances": count, "per_minute": round(count * 60 / BABBLE_ONLY_S, 1)}

"""The end-of-turn evaluation: questions said straight through or with a hesitation mid-sentence.

Each question of `samples/pauses/pauses.toml` is synthesized once, whole, by the store's voice (so
the words before a hesitation keep the rising, unfinished melody of a sentence that goes on), and a
pause of 600-1000 ms is inserted at the marked word boundary, found from the voice's own phoneme
timings, with the four speakers of `device.models.voices`. Then each case is played
through the VAD and the endpointer as the daemon does, in simulated time: the model's verdict on a
pause reaches the endpointer after the time the model actually took (`cost_ms`), counted from the
moment recognition would start; with `[endpoint] wait_after_open_words` or `end_on_known_question`
the recogniser transcribes each pause as the speculative recognition does, its words (judged as the
conversation judges them, device/conversation/pause_words.py) arriving after the time it took. A case
passes when its utterance is not cut before the end of its
speech; for a straight question, the silence waited before the end is what the visitor feels.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from engines.model_specs import FRAME, SPEECH_RATE

from device.bundled import SAMPLES
from device.conversation.dialogue import Dialogue
from device.conversation.endpointer import SPECULATE_AFTER_MS, Endpointer
from device.conversation.pause_words import Words, judge_words, judges_words
from device.conversation.rejoin import heard_in_turns
from device.messages import SpeechPaused, Utterance
from device.models.voices import VOICES, Voice, load_voices, speak
from device.settings import EndpointSettings
from device.toml_file import tomllib

PAUSES_FILE = SAMPLES / "pauses" / "pauses.toml"
SPLITS = ("tuning", "held-apart")
PAUSES_MS = (600, 700, 800, 900, 1000)
LEAD_S, TAIL_S = 0.5, 2.0  # silence before and after each case
FRAME_MS = FRAME / SPEECH_RATE * 1000


@dataclass(frozen=True)
class PauseCase:
    text: str
    split: str
    voice: str
    pause_ms: int  # 0: said straight through
    audio: np.ndarray  # 16 kHz: lead silence, the speech (with its pause), tail silence
    speech_end: int  # sample just after the last sound of the question


def load_cases(store, split: str, threads: int = 1) -> list[PauseCase]:
    """Every question of `split` twice: straight through and with its pause; voices in rotation."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    texts = [u["text"] for u in tomllib.loads(PAUSES_FILE.read_text())["utterance"] if u["split"] == split]
    voices = load_voices(store, threads)
    cases = []
    for i, text in enumerate(texts):
        for pause_ms in (0, PAUSES_MS[i % len(PAUSES_MS)]):
            voice = VOICES[(2 * i + bool(pause_ms)) % len(VOICES)]
            cases.append(_case(voices, text, split, voice, pause_ms))
    return cases


def _case(voices: dict, text: str, split: str, voice: Voice, pause_ms: int) -> PauseCase:
    before, _, _ = text.partition("|")
    speech, chunk, rate = speak(voices, voice, text.replace("|", " ").replace("  ", " "))
    if pause_ms:  # inserted after the pitch shift, so it lasts what it says
        spaces = [p for p in chunk.phonemes if p.phoneme == " "]
        cut = round(
            spaces[len(before.split()) - 1].start * SPEECH_RATE / rate
        )  # the space after the last word before it
        speech = np.concatenate([speech[:cut], np.zeros(int(pause_ms / 1000 * SPEECH_RATE), np.float32), speech[cut:]])
    loud = np.flatnonzero(np.abs(speech) > 0.02 * np.abs(speech).max())
    lead = int(LEAD_S * SPEECH_RATE)
    whole = np.concatenate(
        [np.zeros(lead, np.float32), speech[: loud[-1] + 1], np.zeros(int(TAIL_S * SPEECH_RATE), np.float32)]
    )
    return PauseCase(text, split, voice.name, pause_ms, whole, int(lead + loud[-1] + 1))


@dataclass(frozen=True)
class CaseResult:
    case: PauseCase
    utterances: int  # how many utterances the endpointer made of it
    cut: bool  # an utterance ended before the question did
    waited_ms: float | None  # silence after the question before its end was decided
    verdicts: tuple[tuple[float, float], ...]  # (probability, cost_ms) per pause judged
    heard: tuple[tuple[str, float], ...] = ()  # (speculative words, cost_ms) per pause, when words are judged
    rejoined: bool | None = (
        None  # cut, and each later utterance went on with the one before (None: not cut, or not judged)
    )
    resumed_ms: tuple[float, ...] = ()  # per later utterance: from the end being decided to its speech's start


def evaluate(
    cases: list[PauseCase],
    vad,
    detector,
    settings: EndpointSettings,
    asr=None,
    recognition_ms: float | None = None,
    knows: Callable[[str, float], bool] | None = None,
    dialogue: Dialogue | None = None,
) -> list[CaseResult]:
    """Play each case through the VAD and the endpointer; `detector` None: the fixed hangover; `asr`
    (needed when words are judged or utterances rejoined): the speculative recognition of each pause,
    whose words arrive after the time it took, or after `recognition_ms` when given (a test's fixed
    clock); `knows` (needed with `end_on_known_question`): the dialogue is sure of its answer to the
    words; `dialogue` (needed with `rejoin_within_ms`): its decisions rejoin a cut question."""
    if (judges_words(settings) or settings.rejoin_within_ms) and asr is None:
        raise ValueError("wait_after_open_words, end_on_known_question and rejoin_within_ms need the recogniser")
    if settings.end_on_known_question and knows is None:
        raise ValueError("end_on_known_question needs the dialogue")
    if settings.rejoin_within_ms and dialogue is None:
        raise ValueError("rejoin_within_ms needs the dialogue")
    return [_play(case, vad, detector, settings, asr, recognition_ms, knows, dialogue) for case in cases]


def _play(
    case: PauseCase,
    vad,
    detector,
    settings: EndpointSettings,
    asr,
    recognition_ms: float | None,
    knows: Callable[[str, float], bool] | None,
    dialogue: Dialogue | None,
) -> CaseResult:
    endpointer = Endpointer(settings, judged=detector is not None)
    vad.reset()
    due: list[tuple[int, object]] = []  # (frame at which it arrives, verdict)
    words: list[tuple[int, int, Words]] = []  # (frame at which they arrive, their pause's speech_end, what they are)
    utterances: list[Utterance] = []
    verdicts, heard = [], []
    for index in range(len(case.audio) // FRAME):
        for arrival, verdict in [d for d in due if d[0] == index]:
            utterances += [e for e in endpointer.judge(verdict) if isinstance(e, Utterance)]
        for arrival, speech_end, kind in [w for w in words if w[0] == index]:
            utterances += [e for e in endpointer.heard(speech_end, kind) if isinstance(e, Utterance)]
        frame = case.audio[index * FRAME : (index + 1) * FRAME]
        for event in endpointer.push(frame, vad.probability(frame)):
            if isinstance(event, Utterance):
                utterances.append(event)
            elif isinstance(event, SpeechPaused):
                if detector is not None:
                    verdict = detector.judge(event.heard, event.speech_end)
                    verdicts.append((round(verdict.probability, 3), verdict.cost_ms))
                    due.append((index + math.ceil(verdict.cost_ms / FRAME_MS), verdict))
                if judges_words(settings):
                    began = time.perf_counter()
                    text = asr.transcribe(event.audio).text
                    cost_ms = (time.perf_counter() - began) * 1000 if recognition_ms is None else recognition_ms
                    heard.append((text, round(cost_ms, 1)))
                    words.append(
                        (index + math.ceil(cost_ms / FRAME_MS), event.speech_end, judge_words(text, settings, knows))
                    )
    cut = any(u.speech_end < case.speech_end - FRAME for u in utterances)
    last = utterances[-1] if utterances else None
    waited = None if last is None else (last.decided - case.speech_end) / SPEECH_RATE * 1000
    rejoined = _rejoined(utterances, settings, asr, dialogue) if cut and settings.rejoin_within_ms else None
    resumed = tuple(
        round((b.speech_start - a.decided) / SPEECH_RATE * 1000, 1) for a, b in zip(utterances, utterances[1:])
    )
    return CaseResult(case, len(utterances), cut, waited, tuple(verdicts), tuple(heard), rejoined, resumed)


def _rejoined(utterances: list[Utterance], settings: EndpointSettings, asr, dialogue: Dialogue) -> bool:
    """Each utterance after the first goes on with the question so far, as the conversation rejoins them."""
    questions = heard_in_turns(
        utterances,
        settings.rejoin_within_ms,
        settings.max_utterance_s,
        dialogue,
        lambda audio: asr.transcribe(audio).text,
    )
    return len(questions) == 1


def summary(results: list[CaseResult], wait_limit_ms: float = 400) -> dict:
    """The figures the issue's gates are about."""
    paused = [r for r in results if r.case.pause_ms]
    rejoined = [r for r in results if r.rejoined is not None]
    straight = [r for r in results if not r.case.pause_ms]
    waits = sorted(r.waited_ms for r in straight if r.waited_ms is not None)
    costs = [c for r in results for _, c in r.verdicts]
    resumed = [ms for r in paused for ms in r.resumed_ms]
    return {
        "cases": len(results),
        "paused_cut": int(sum(r.cut for r in paused)),
        "paused": len(paused),
        "straight_cut": int(sum(r.cut for r in straight)),
        "straight": len(straight),
        "cut_rejoined": {
            "paused": int(sum(bool(r.rejoined) for r in paused)),
            "straight": int(sum(bool(r.rejoined) for r in straight)),
            "judged": len(rejoined),
        },
        "resumed_ms": {
            "p50": round(float(np.percentile(resumed, 50)), 1) if resumed else None,
            "min": min(resumed) if resumed else None,
        },
        "straight_waiting_over_ms": {
            "limit": wait_limit_ms,
            "count": int(sum(w > wait_limit_ms for w in waits)),
            "share": round(sum(w > wait_limit_ms for w in waits) / max(1, len(straight)), 3),
        },
        "straight_wait_ms": {
            "p50": round(float(np.percentile(waits, 50)), 1) if waits else None,
            "p95": round(float(np.percentile(waits, 95)), 1) if waits else None,
        },
        "model_ms": {
            "p50": round(float(np.percentile(costs, 50)), 1) if costs else None,
            "p95": round(float(np.percentile(costs, 95)), 1) if costs else None,
        },
        "speculate_after_ms": SPECULATE_AFTER_MS,
    }


def measure_pauses(app, split: str) -> dict:
    """`bench pauses`: the fixed hangover and the end-of-turn model on one split, with the app's settings."""
    from device.models import catalog

    vad = catalog.load_vad(app.store)
    detector = catalog.load_end_of_turn(app.store, app.threads, app.settings.endpoint.end_of_turn_threshold)
    settings = app.settings.endpoint
    asr = catalog.load_asr(app.store, app.threads) if judges_words(settings) or settings.rejoin_within_ms else None
    dialogue = app.dialogue()
    knows = dialogue.knows if settings.end_on_known_question else None
    cases = load_cases(app.store, split, app.threads)
    report = {"split": split, "threads": app.threads, "settings": vars(settings).copy()}
    for name, judge in (("fixed_hangover", None), ("end_of_turn", detector)):
        results = evaluate(cases, vad, judge, settings, asr, knows=knows, dialogue=dialogue)
        report[name] = summary(results) | {"cases": [_row(r) for r in results]}
    return report


def _row(result: CaseResult) -> dict:
    case = result.case
    return {
        "text": case.text,
        "voice": case.voice,
        "pause_ms": case.pause_ms,
        "utterances": result.utterances,
        "cut": bool(result.cut),
        "waited_ms": None if result.waited_ms is None else round(result.waited_ms, 1),
        "verdicts": [list(v) for v in result.verdicts],
        "heard": [list(h) for h in result.heard],
        "rejoined": result.rejoined,
        "resumed_ms": list(result.resumed_ms),
    }

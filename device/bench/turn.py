"""`orin-avatar bench turn`: turn latency and where it goes, on the bundled questions or a site's own.

Each question goes through the same conversation the daemon runs (endpointing, speculative
recognition, dialogue, cached or streamed speech), fed at the microphone's real pace so the
hangover is real time, `--repeat` times. Stage times are consecutive spans, so they add up to
the turn latency (last speech sample -> first reply sample at the speaker).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

from engines.errors import InputError

from device.app import App
from device.audio_file import read_audio
from device.bench.stats import percentiles_ms
from device.conversation.report import turn_report
from device.conversation.visit import Question, play_visit
from device.models.voices import VOICES, load_voices, speak
from device.settings import Settings
from device.sound.speakers import RecordingSpeaker

SPANS = ("endpoint", "asr", "dialogue", "first_chunk", "first_audio")  # consecutive; they sum to "turn"


def site_questions(directory: Path) -> list[Question]:
    if not directory.is_dir():
        raise InputError(f"{directory} is not a directory of WAV files")
    files = sorted(p for p in directory.iterdir() if p.suffix.lower() in (".wav", ".flac"))
    if not files:
        raise InputError(f"{directory} has no .wav or .flac files; put one visitor question in each")
    return [Question(read_audio(p), p.name) for p in files]


# Questions nothing in the embedded knowledge base answers: `bench turn --llm` asks the LLM these.
OPEN_QUESTIONS = (
    "Who painted the Mona Lisa?",
    "Why is the sky blue?",
    "Tell me a fun fact about whales.",
    "What is the tallest mountain in the world?",
    "How does a steam train work?",
    "What should I read on a rainy day?",
)


def open_questions(app: App) -> list[Question]:
    """OPEN_QUESTIONS said by the pinned voice."""
    (voice,) = [v for v in VOICES if v.name == "joe"]
    synthesizers = load_voices(app.store, app.threads)
    return [
        Question(speak(synthesizers, voice, text)[0], f"open-{i + 1}", text) for i, text in enumerate(OPEN_QUESTIONS)
    ]


def turn_settings(app: App, cache: bool = True, llm_url: str = "") -> Settings:
    """The settings a `bench turn` run uses: without the speech cache, or with an LLM at `llm_url`
    (checked here, before a run of minutes)."""
    settings = app.settings
    if not cache:
        settings = dataclasses.replace(settings, tts=dataclasses.replace(settings.tts, cache=False))
    if llm_url:
        try:
            settings = dataclasses.replace(settings, llm=dataclasses.replace(settings.llm, url=llm_url))
        except ValueError as exc:
            raise InputError(f"--llm: {exc}") from None
    return settings


def measure_turns(app: App, settings: Settings, questions: list[Question], repeat: int) -> dict:
    """Ask every question `repeat` times through the daemon's conversation, at the microphone's pace."""
    if repeat < 1:
        raise InputError("--repeat must be 1 or more")
    threads = app.threads
    print(f"loading models ({threads} thread(s) per model)...", file=sys.stderr, flush=True)
    speakers: list[RecordingSpeaker] = []
    conversation = app.conversation(
        lambda rate: speakers.append(RecordingSpeaker(rate)) or speakers[-1],
        build_engines=False,
        settings=settings,
        keep_turns=None,
    )
    conversation.speech.wait_prepared()  # measure turns, not the start-up synthesis competing for the CPU
    try:
        for round_ in range(repeat):
            print(
                f"round {round_ + 1}/{repeat}: {len(questions)} question(s) in real time", file=sys.stderr, flush=True
            )
            play_visit(conversation, questions, realtime=True)
    finally:
        conversation.close()
        speakers[0].close()
    return build_report(
        questions,
        [turn_report(t) for t in conversation.turns],
        repeat,
        threads,
        settings.endpoint.hangover_ms,
        {name: r.backend for name, r in conversation.runners().items()},
        settings.tts.cache,
        settings.llm.url,
    )


def build_report(
    questions: list[Question],
    turns: list[dict],
    repeat: int,
    threads: int,
    hangover_ms: int,
    backend_of: dict[str, str],
    cache: bool,
    llm_url: str = "",
) -> dict:
    per_question = []
    answered = [t for t in turns if t["ms"]["turn"] is not None]
    for i, question in enumerate(questions):
        # Turns come in question order, round after round; a question may yield more than one turn
        # (a long pause splits it), so match by the order of answered turns where counts agree.
        mine = answered[i :: len(questions)] if len(answered) == len(questions) * repeat else []
        per_question.append(
            {
                "question": question.name,
                "transcripts": sorted({t["transcript"] for t in mine}),
                "intents": sorted({t["intent"] for t in mine}),
                "ms": {s: _p(mine, s) for s in (*SPANS, "processing", "turn")},
                "llm_first_token_ms": _first_token(mine),
            }
        )
    return {
        "device": _device(),
        "threads": threads,
        "hangover_ms": hangover_ms,
        "speech_cache": cache,
        "llm": llm_url or None,
        "llm_first_token_ms": _first_token(answered),
        "backends": backend_of,
        "repeat": repeat,
        "turns_answered": len(answered),
        "turns_heard": len(turns),
        "overall_ms": {s: _p(answered, s) for s in (*SPANS, "processing", "turn")},
        "questions": per_question,
        "turns": turns,
    }


def _p(turns: list[dict], stage: str) -> dict | None:
    values = [t["ms"][stage] / 1000 for t in turns if t["ms"][stage] is not None]
    return percentiles_ms(values) if values else None


def _first_token(turns: list[dict]) -> dict | None:
    """The LLM's time to first token over the turns it answered (the request sent -> its first word)."""
    values = [t["llm_first_token_ms"] / 1000 for t in turns if t.get("llm_first_token_ms") is not None]
    return percentiles_ms(values) if values else None


def _device() -> str:
    """The Jetson's model name, or the PC's CPU, so reports from different machines never mix."""
    model = Path("/proc/device-tree/model")
    if model.is_file():
        return model.read_text().strip("\x00\n")
    import os
    import re

    cpu = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
    return f"{cpu.group(1).strip() if cpu else 'unknown CPU'}, {os.cpu_count()} cores"


def print_report(report: dict) -> None:
    print(f"device: {report['device']}; backends: " + ", ".join(f"{k}={v}" for k, v in report["backends"].items()))
    print(
        f"{report['turns_answered']} turns answered of {report['turns_heard']} heard; "
        f"hangover {report['hangover_ms']} ms; "
        f"speech cache {'on' if report['speech_cache'] else 'off'}; LLM {report['llm'] or 'off'}"
    )
    columns = (*SPANS, "processing", "turn")
    print(f"{'question':<22} {'heard':<34} " + " ".join(f"{c:>11}" for c in (*columns, "llm_token")) + "   (p50 ms)")
    for q in report["questions"]:
        cells = " ".join(f"{q['ms'][c]['p50'] if q['ms'][c] else '-':>11}" for c in columns)
        token = q["llm_first_token_ms"]
        print(
            f"{q['question'][:22]:<22} {' / '.join(q['transcripts'])[:34]:<34} "
            f"{cells} {token['p50'] if token else '-':>11}"
        )
    for p in ("p50", "p95", "p99"):
        cells = " ".join(f"{report['overall_ms'][c][p] if report['overall_ms'][c] else '-':>11}" for c in columns)
        token = report["llm_first_token_ms"]
        print(f"{'all turns ' + p:<57} {cells} {token[p] if token else '-':>11}")
    if report["llm"]:
        print(
            "llm_token = the LLM's time to its first word; dialogue includes it; first_chunk = the rest of the first "
            "sentence and its synthesis"
        )


def plot_report(report: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install orin-avatar[plot]); no plot written", file=sys.stderr)
        return
    questions = [q for q in report["questions"] if q["ms"]["turn"]]
    figure, (bars, spread) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 1]})
    bottom = np.zeros(len(questions))
    for span in SPANS:
        values = np.array([q["ms"][span]["p50"] for q in questions])
        bars.bar([q["question"] for q in questions], values, bottom=bottom, label=span.replace("_", " "))
        bottom += values
    bars.set_ylabel("ms (p50), last speech sample -> first reply sample")
    bars.set_title(f"Where the time goes ({report['device']}, {report['threads']} thread(s))")
    bars.tick_params(axis="x", rotation=30)
    bars.legend()
    spread.hist([t["ms"]["turn"] for t in report["turns"] if t["ms"]["turn"] is not None], bins=15, color="tab:gray")
    spread.set_xlabel("turn latency, ms")
    spread.set_title(f"{report['turns_answered']} turns")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    print(f"wrote {path}")


def print_comparison(report: dict, earlier: dict) -> None:
    print("ratio to the earlier report (this / earlier; below 1 is faster):")
    for stage in (*SPANS, "processing", "turn"):
        now, then = report["overall_ms"].get(stage), earlier.get("overall_ms", {}).get(stage)
        if now and then and then["p50"]:
            print(f"  {stage:<12} p50 {now['p50'] / then['p50']:.2f}   p95 {now['p95'] / max(then['p95'], 1e-9):.2f}")
    if earlier.get("backends") != report["backends"]:
        print(f"  backends differ: earlier {earlier.get('backends')}, now {report['backends']}")

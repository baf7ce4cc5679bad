"""`orin-avatar ask` (dialogue only) and `orin-avatar demo` (a whole visit through the pipeline)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from engines.errors import InputError
from engines.files import write_atomic

from device.app import App
from device.audio_file import write_wav
from device.avatar.display import VideoFileSink
from device.avatar.playback import render_replies
from device.avatar.styles import open_style
from device.commands.context import print_json
from device.conversation.report import print_turn_table, turn_report
from device.conversation.visit import bundled_questions, play_visit
from device.sound.speakers import RecordingSpeaker


def register(commands: argparse._SubParsersAction) -> None:
    ask = commands.add_parser("ask", help="the dialogue's answer to a typed question (intent, score, answer)")
    ask.add_argument("question")
    ask.add_argument("--json", action="store_true", help="print JSON")
    ask.set_defaults(run=_ask)

    demo = commands.add_parser("demo", help="a bundled visitor conversation through the real pipeline on the CPU")
    demo.add_argument(
        "--out", type=Path, default=Path("out"), help="directory for the reply audio and latency.json (default out/)"
    )
    demo.add_argument(
        "--fast",
        action="store_true",
        help="feed the visit as fast as the machine can instead of at the microphone's pace, each pause's "
        "recognition given the next frame (for tests: the same turns on any machine; the latency "
        "figures are then not a kiosk's)",
    )
    demo.set_defaults(run=_demo)


def _avatar_video(app: App, turns, path: Path) -> list[Path]:
    """The avatar speaking every answer, lip-synced, with the answers' audio muxed in."""
    avatar = app.settings.avatar
    renderer = open_style(avatar, app.store, app.threads)
    sink = VideoFileSink(path, avatar.width, avatar.height, avatar.fps)
    replies = [
        (t.reply_audio, tuple(v for c in t.chunks for v in c.visemes), t.chunks[0].sample_rate)
        for t in turns
        if t.chunks
    ]
    soundtrack = render_replies(replies, renderer, sink, avatar.fps)
    return sink.close(soundtrack, replies[0][2] if replies else 22050)


def _ask(app: App, args: argparse.Namespace) -> int:
    if not args.question.strip():
        raise InputError("the question is empty; type what a visitor would ask")
    dialogue = app.dialogue()
    answer = dialogue.answer(args.question)
    ranking = dialogue.rank(args.question)[:3]
    if args.json:
        text = " ".join(answer.sentences())
        print_json(
            {
                "question": args.question,
                "intent": answer.intent,
                "score": round(answer.score, 3),
                "source": answer.source,
                "answer": text,
                "ranking": [{"intent": i, "score": round(s, 3)} for i, s in ranking],
            }
        )
    else:
        print(f"intent: {answer.intent} (score {answer.score:.2f}, {answer.source})")
        print("answer:", end="", flush=True)
        for sentence in answer.sentences():  # an LLM's reply as it streams in
            print(f" {sentence}", end="", flush=True)
        print()
        # in the order the dialogue weighs them (their two nearest examples), each with its nearest's score
        print("likeliest: " + ", ".join(f"{i} {s:.2f}" for i, s in ranking))
    return 0


def _demo(app: App, args: argparse.Namespace) -> int:
    settings, threads = app.settings, app.threads
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; give a directory for the replies, latency.json and avatar.mp4")
    out.mkdir(parents=True, exist_ok=True)
    print("loading models...", file=sys.stderr, flush=True)
    speakers: list[RecordingSpeaker] = []
    conversation = app.conversation(
        lambda rate: speakers.append(RecordingSpeaker(rate, realtime=not args.fast)) or speakers[-1],
        build_engines=False,
        keep_turns=None,
    )
    print("models on: " + ", ".join(f"{n} {r.backend}" for n, r in conversation.runners().items()), file=sys.stderr)
    questions = bundled_questions()
    print(
        f"playing {len(questions)} spoken questions {'as fast as possible' if args.fast else 'in real time'}...",
        file=sys.stderr,
        flush=True,
    )
    try:
        play_visit(conversation, questions, realtime=not args.fast)
    finally:
        conversation.close()
        speakers[0].close()
    turns = [turn_report(t) for t in conversation.turns]
    for turn, report in zip(conversation.turns, turns):
        if turn.chunks:
            write_wav(out / f"reply-{turn.id}.wav", turn.reply_audio, turn.chunks[0].sample_rate)
            report["audio"] = f"reply-{turn.id}.wav"
    rate = speakers[0].sample_rate
    write_wav(out / "replies.wav", np.concatenate([t.reply_audio for t in conversation.turns]), rate)
    latency = {"threads": threads, "hangover_ms": settings.endpoint.hangover_ms, "turns": turns}
    write_atomic(out / "latency.json", (json.dumps(latency, indent=2) + "\n").encode())
    print_turn_table(turns, expected=[q.intent for q in questions])
    video = _avatar_video(app, conversation.turns, out / "avatar.mp4")
    print(
        f"wrote {out}/latency.json, {out}/replies.wav, "
        f"one reply-N.wav per answer and {', '.join(str(p) for p in video)}"
    )
    fits = len(turns) == len(questions) and all(t["intent"] == q.intent for t, q in zip(turns, questions))
    return 0 if fits else 1

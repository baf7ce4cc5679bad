"""`orin-avatar kb check`: for operators, where the knowledge base's intents overlap and which of their
own questions land on the wrong intent."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from device.app import App
from device.commands.context import print_json
from device.conversation.kb_check import claimed_examples, judge, load_questions, tally, tally_line


def register(commands: argparse._SubParsersAction) -> None:
    kb = commands.add_parser("kb", help="check the knowledge base")
    kinds = kb.add_subparsers(dest="kind", required=True, metavar="KIND")
    check = kinds.add_parser(
        "check", help="examples another intent claims, and questions that go to the wrong intent (exit 1 if any)"
    )
    check.add_argument("--knowledge", type=Path, help="the knowledge base TOML (default: [dialogue] knowledge)")
    check.add_argument(
        "--questions",
        type=Path,
        help='a TOML file of questions = [["intent", "question"], ...] ("none": not answerable)',
    )
    check.add_argument("--json", action="store_true", help="print JSON")
    check.set_defaults(run=_check)


def _check(app: App, args: argparse.Namespace) -> int:
    settings = app.settings
    if args.knowledge is not None:
        settings = dataclasses.replace(
            settings, dialogue=dataclasses.replace(settings.dialogue, knowledge=str(args.knowledge))
        )
    dialogue = app.dialogue(settings=settings)
    claimed = claimed_examples(dialogue)
    rows = judge(dialogue, load_questions(args.questions, "questions", set(dialogue.intents))) if args.questions else []
    missed = [r for r in rows if r["outcome"] != "right"]
    if args.json:
        print_json(
            {
                "knowledge": settings.dialogue.knowledge or "embedded example",
                "intents": len(dialogue.intents),
                "claimed_examples": [dataclasses.asdict(c) for c in claimed],
                "questions": tally(rows) if rows else None,
                "missed": missed,
            }
        )
    else:
        _print(settings.dialogue.knowledge or "the embedded example", len(dialogue.intents), claimed, rows, missed)
    return 1 if claimed or any(r["outcome"] in ("wrong", "asked back wrong") for r in rows) else 0


def _print(knowledge: str, intents: int, claimed, rows: list[dict], missed: list[dict]) -> None:
    print(f"knowledge base: {knowledge} ({intents} intents with the built-ins)")
    if not claimed:
        print("  every example goes to its own intent")
    for c in claimed:
        print(
            f'  {c.intent}: "{c.example}" would go to {c.other} (nearest: "{c.other_example}", {c.score:.2f}; its own '
            f"intent's nearest: {c.own_score:.2f}); reword it or add examples that tell the two apart"
        )
    if not rows:
        return
    t = tally(rows)
    print(f"questions: {t['questions']}: {tally_line(t)}")
    for r in missed:
        did = {
            "answer": f"answered {r['intent']}",
            "ask_back": f"asked back about {r['intent']}",
            "rephrase": "asked to rephrase",
        }[r["kind"]]
        print(f'  {r["outcome"]}: "{r["question"]}" (expected {r["expected"]}) {did}, score {r["score"]:.2f}')

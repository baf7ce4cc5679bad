"""`orin-avatar bench intents`: unseen wording, typed. Each question of the split
(`samples/paraphrases.toml`) goes through the dialogue's decision (no LLM) and is scored as
`kb check` scores an operator's questions: right, asked back about the right intent, asked to
rephrase, asked back wrong, wrong. Per split and per expected intent.
"""

from __future__ import annotations

from pathlib import Path

from device.bench.pauses import SPLITS
from device.conversation.kb_check import NONE, judge, load_questions, tally

PARAPHRASES = Path(__file__).parent.parent / "samples" / "paraphrases.toml"


def measure_intents(app, split: str) -> dict:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    dialogue = app.dialogue()
    rows = judge(dialogue, load_questions(PARAPHRASES, split, set(dialogue.intents)))
    answerable = [r for r in rows if r["expected"] != NONE]
    return {
        "split": split,
        "threshold": app.settings.dialogue.threshold,
        "confident_threshold": app.settings.dialogue.confident_threshold,
        "answerable": tally(answerable),
        "not_answerable": tally([r for r in rows if r["expected"] == NONE]),
        "per_intent": {
            name: tally([r for r in answerable if r["expected"] == name])
            for name in sorted({r["expected"] for r in answerable})
        },
        "questions": rows,
    }

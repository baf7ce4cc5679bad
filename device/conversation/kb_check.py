"""Checking a knowledge base: examples another intent claims, and what the dialogue makes of a list of
questions with the intents they should get. For operators (`orin-avatar kb check`) and the benches
(`bench intents`, `bench hearing`), which score the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from device.conversation.dialogue import ASK_BACK, BUILTINS, REPHRASE, Decision, Dialogue, ranked
from device.conversation.knowledge import KnowledgeError
from device.toml_file import tomllib

NONE = "none"  # a question the kiosk has no answer for: asking again (or the LLM) is right
# What the dialogue did with a question, from best to worst; "asked back wrong" costs a "no" turn, "wrong"
# gives a visitor another intent's answer (or acts: tells the time when asked for the opening hours).
OUTCOMES = ("right", "asked back right", "rephrase", "asked back wrong", "wrong")


@dataclass(frozen=True)
class Claimed:
    """An example of `intent` that, itself left out, the dialogue would give to `other`: `score` is the
    similarity of `other`'s nearest example (`other_example`), `own_score` that of its own intent's."""

    intent: str
    example: str
    other: str
    other_example: str
    score: float
    own_score: float


def outcome(decision: Decision, expected: str) -> str:
    if decision.kind == REPHRASE:
        return "right" if expected == NONE else "rephrase"
    if decision.kind == ASK_BACK:
        return "asked back right" if decision.intent == expected else "asked back wrong"
    return "right" if decision.intent == expected else "wrong"


def judge(dialogue: Dialogue, questions: list[tuple[str, str]]) -> list[dict]:
    """Each (intent, question): the dialogue's decision and its outcome."""
    rows = []
    for expected, text in questions:
        decision = dialogue.decide(text)
        rows.append(
            {
                "question": text,
                "expected": expected,
                "kind": decision.kind,
                "intent": decision.intent,
                "score": round(decision.score, 3),
                "outcome": outcome(decision, expected),
            }
        )
    return rows


def tally(rows: list[dict]) -> dict:
    """Counts per outcome; `right_or_asked`: the share answered right or asked back about the right intent."""
    counts = {name: sum(r["outcome"] == name for r in rows) for name in OUTCOMES}
    return {
        "questions": len(rows),
        **counts,
        "right_or_asked": round((counts["right"] + counts["asked back right"]) / max(1, len(rows)), 3),
    }


def tally_line(counts: dict) -> str:
    """A tally in words, for the commands that print one."""
    return (
        f"right {counts['right']}, asked back right {counts['asked back right']}, "
        f"asked to rephrase {counts['rephrase']}, "
        f"asked back wrong {counts['asked back wrong']}, wrong {counts['wrong']}"
    )


def claimed_examples(dialogue: Dialogue) -> list[Claimed]:
    """The knowledge base's examples that, the example itself left out, the dialogue would give to
    another intent (ranked as the dialogue ranks, `ranked`): the intents overlap there. Leave-one-out
    over all examples, the built-ins' included."""
    owners = [(name, example) for name, intent in dialogue.intents.items() for example in intent.examples]
    vectors = dialogue.encoder.embed([example for _, example in owners])
    similarity = vectors @ vectors.T
    names = [name for name, _ in owners]
    builtins = {intent.name for intent in BUILTINS}
    found = []
    for row, (name, example) in enumerate(owners):
        if name in builtins:
            continue  # the built-ins' own examples are not the operator's to fix
        others = [n for n in range(len(owners)) if n != row]
        ranking = ranked([names[n] for n in others], similarity[row, others])
        other, score = ranking[0]
        if other != name:
            other_example = max((n for n in others if names[n] == other), key=lambda n: similarity[row, n])
            own_score = next((nearest for intent, nearest in ranking if intent == name), -1.0)
            found.append(Claimed(name, example, other, owners[other_example][1], score, own_score))
    return found


def load_questions(path: Path, key: str, intents: set[str]) -> list[tuple[str, str]]:
    """(intent, question) pairs from the TOML array `key` of `path`; every intent must be one of `intents`
    or "none"."""
    where = f"{path}, {key}"
    try:
        pairs = tomllib.loads(Path(path).read_text(encoding="utf-8")).get(key)
    except OSError as exc:
        raise KnowledgeError(f"cannot read the questions file {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise KnowledgeError(f"the questions file {path} is not valid TOML text: {exc}") from None
    if not isinstance(pairs, list) or not pairs:
        raise KnowledgeError(
            f'{where}: expected an array of ["intent", "question"] pairs, e.g. '
            f'{key} = [["restrooms", "Where is the loo?"]]'
        )
    for n, pair in enumerate(pairs, 1):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) and p.strip() for p in pair)):
            raise KnowledgeError(f'{where}, entry {n}: expected ["intent", "question"], got {pair!r}')
        if pair[0] not in intents and pair[0] != NONE:
            raise KnowledgeError(
                f"{where}, entry {n}: unknown intent {pair[0]!r}; the knowledge base and built-ins "
                f'have {", ".join(sorted(intents))}, and "none" marks a question it cannot answer'
            )
    return [(intent, question.strip()) for intent, question in pairs]

"""The operator's knowledge base: intents with example questions and an answer, from TOML.

Errors name the file, the line and the key, so an operator can fix a typo from the journal alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from engines.errors import OrinAvatarError

from device.toml_file import tomllib


EXAMPLE_FILE = Path(__file__).parent.parent / "knowledge" / "visitor_centre.toml"
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class KnowledgeError(OrinAvatarError):
    """The knowledge base file is unreadable or invalid."""


@dataclass(frozen=True)
class Intent:
    name: str
    examples: tuple[str, ...]
    answer: str


def load_knowledge(path: Path | None = None) -> tuple[Intent, ...]:
    """Intents of `path`, or of the embedded visitor-centre example."""
    path = Path(path) if path else EXAMPLE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KnowledgeError(f"cannot read the knowledge base {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise KnowledgeError(f"{path}: {exc}") from None
    unknown = set(data) - {"intent"}
    if unknown:
        raise KnowledgeError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; the file holds [[intent]] tables")
    tables = data.get("intent", [])
    if not isinstance(tables, list) or not tables:
        raise KnowledgeError(f"{path}: no [[intent]] tables; see {EXAMPLE_FILE} for the format")
    lines = [n + 1 for n, line in enumerate(text.splitlines()) if line.strip().startswith("[[intent]]")]
    intents, names = [], set()
    for table, line in zip(tables, lines):
        intent = _intent(table, f"{path}, line {line}")
        if intent.name in names:
            raise KnowledgeError(f"{path}, line {line}: intent name '{intent.name}' is used twice")
        names.add(intent.name)
        intents.append(intent)
    return tuple(intents)


def _intent(table: dict, where: str) -> Intent:
    unknown = set(table) - {"name", "examples", "answer"}
    if unknown:
        raise KnowledgeError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; an intent has name, examples, answer")
    name = table.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise KnowledgeError(f"{where}: 'name' must be a word of letters, digits, _ or -, got {name!r}")
    examples = table.get("examples")
    if not isinstance(examples, list) or not examples or not all(isinstance(e, str) and e.strip() for e in examples):
        raise KnowledgeError(f"{where}: intent '{name}' needs 'examples', a list of one or more questions")
    answer = table.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        raise KnowledgeError(f"{where}: intent '{name}' has no 'answer' (a non-empty string)")
    return Intent(name, tuple(e.strip() for e in examples), answer.strip())

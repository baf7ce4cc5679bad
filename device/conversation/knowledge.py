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
MAX_KNOWLEDGE_BYTES = (
    16 * 2**20
)  # 3,000 intents take about 1 MiB; a file far larger is a mistake, read whole it stalls the reload
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_HEADER = re.compile(r"^\s*\[\[\s*intent\s*\]\]")


class KnowledgeError(OrinAvatarError):
    """The knowledge base file is unreadable or invalid."""


@dataclass(frozen=True)
class Intent:
    name: str
    examples: tuple[str, ...]
    answer: str
    topic: str = ""  # how the robot names it when unsure: "Did you mean {topic}?"

    @property
    def ask_back(self) -> str:
        """The question that checks a guess: by the topic, else by the first example."""
        return f"Did you mean {self.topic}?" if self.topic else f"Did you ask: {self.examples[0]}"


def load_knowledge(path: Path | None = None) -> tuple[Intent, ...]:
    """Intents of `path`, or of the embedded visitor-centre example."""
    path = Path(path) if path else EXAMPLE_FILE
    if not path.is_file():  # a directory, a FIFO (would block the reader), a device: never read
        what = "does not exist" if not path.exists() else "is not a regular file"
        raise KnowledgeError(f"the knowledge base {path} {what}; give a TOML file of [[intent]] tables")
    size = path.stat().st_size
    if size > MAX_KNOWLEDGE_BYTES:
        raise KnowledgeError(
            f"the knowledge base {path} is {size / 2**20:.0f} MiB, more than the {MAX_KNOWLEDGE_BYTES // 2**20} MiB "
            "read; is it the right file? A knowledge base is a TOML file of [[intent]] tables"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KnowledgeError(f"cannot read the knowledge base {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise KnowledgeError(
            f"the knowledge base {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None
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
    # Where each intent starts, for messages: `[[intent]]` headers (spaces allowed inside the brackets);
    # intents written as inline tables have no header line and are named by their position.
    lines = [n + 1 for n, line in enumerate(text.splitlines()) if _HEADER.match(line)]
    places = (
        [f"line {n}" for n in lines]
        if len(lines) == len(tables)
        else [f"intent {i}" for i in range(1, len(tables) + 1)]
    )
    intents, names = [], set()
    for table, place in zip(tables, places):
        if not isinstance(table, dict):
            raise KnowledgeError(f"{path}, {place}: an intent is a table of name, examples, answer (and topic)")
        intent = _intent(table, f"{path}, {place}")
        if intent.name in names:
            raise KnowledgeError(f"{path}, {place}: intent name '{intent.name}' is used twice")
        names.add(intent.name)
        intents.append(intent)
    return tuple(intents)


def _intent(table: dict, where: str) -> Intent:
    unknown = set(table) - {"name", "examples", "answer", "topic"}
    if unknown:
        raise KnowledgeError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))}; an intent has name, examples, answer "
            "and optionally topic"
        )
    name = table.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise KnowledgeError(f"{where}: 'name' must be a word of letters, digits, _ or -, got {name!r}")
    examples = table.get("examples")
    if not isinstance(examples, list) or not examples or not all(isinstance(e, str) and e.strip() for e in examples):
        raise KnowledgeError(f"{where}: intent '{name}' needs 'examples', a list of one or more questions")
    answer = table.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        raise KnowledgeError(f"{where}: intent '{name}' has no 'answer' (a non-empty string)")
    topic = table.get("topic", "")
    if not isinstance(topic, str):
        raise KnowledgeError(f"{where}: intent '{name}' has a 'topic' that is not a string, got {topic!r}")
    return Intent(name, tuple(e.strip() for e in examples), answer.strip(), topic.strip())

"""What the LLM is told, and its reply taken once its first word is in.

The prompt grounds the LLM in the operator's knowledge base: the system prompt, the visit so far,
then the closest entries with the question. What changes least comes first, so a server that keeps
its last prompt's prefix (llama.cpp, vLLM, Ollama) only reads the new turn: the time to the first
word stays flat as a visit goes on.
"""

from __future__ import annotations

import logging
import threading
from typing import Iterable, Iterator

from device.conversation.knowledge import Intent
from device.conversation.llm import LlmClient, LlmError
from device.conversation.spoken_reply import SpokenReply
from device.settings import LlmSettings

log = logging.getLogger(__name__)


def grounded_prompt(
    settings: LlmSettings, question: str, closest: list[Intent], visit: Iterable[tuple[str, str]]
) -> list[dict[str, str]]:
    """The chat messages for `question`; `visit`: each earlier question and what the robot said to it."""
    facts = "\n".join(f"- {intent.examples[0]} {intent.answer}" for intent in closest)
    messages = [{"role": "system", "content": settings.system_prompt}]
    for asked, said in visit:
        if said:  # not an answer that was never said (heard while the robot spoke)
            messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": said}]
    grounded = f"Facts to answer from (never contradict them):\n{facts}\n\nQuestion: {question}" if facts else question
    return messages + [{"role": "user", "content": grounded}]


def first_words(llm: LlmClient, messages: list[dict[str, str]], cancelled: threading.Event) -> SpokenReply | None:
    """The LLM's reply once its first word is in, or None (the knowledge base answers)."""
    pieces = llm.stream(messages, cancelled)
    asked = llm.clock()
    try:
        first = next(pieces)
    except (StopIteration, LlmError) as exc:
        log.warning(
            "LLM at %s gave no usable answer (%s); the knowledge base answers",
            llm.settings.url,
            exc or "an empty reply",
        )
        pieces.close()
        return None
    return SpokenReply(_chain(first, pieces), llm.settings.max_words, round((llm.clock() - asked) * 1000, 1))


def _chain(first: str, rest: Iterator[str]) -> Iterator[str]:
    """`first`, then the rest of a stream (closing it when closed)."""
    try:
        yield first
        yield from rest
    finally:
        close = getattr(rest, "close", None)
        if close is not None:
            close()

"""An LLM's reply made fit to be spoken, sentence by sentence as it streams in.

LLMs write for screens: markdown, lists, links, emoji. A kiosk says its reply aloud, so markup is
dropped, list items become sentences, links keep their words and lose their address, bare URLs and
emoji are dropped. Each sentence is handed on as soon as it is complete (the first is spoken while
the rest is generated), and the reply ends at a sentence boundary near `max_words`.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from typing import Iterator

from device.conversation.llm import LlmCancelled, LlmCut
from device.conversation.speech_out import whole_sentences

log = logging.getLogger(__name__)

_CODE = re.compile(r"```.*?(?:```|$)", re.S)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.I)
_BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+")
_MARKUP = re.compile(r"[*_`#>|~]+|^\s*[-=]{3,}\s*$")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_EMOJI_CATEGORIES = {"So", "Sk", "Cs", "Co", "Cn"}
_JOINERS = {"\u200d", "\ufe0e", "\ufe0f", "\u20e3"}


def speakable(line: str) -> str:
    """One line of an LLM's text as plain words; a list item or heading becomes a sentence."""
    item = _BULLET.match(line) is not None or line.lstrip().startswith("#")
    line = _LINK.sub(r"\1", _BULLET.sub("", line))
    line = _MARKUP.sub(" ", _URL.sub(" ", line))
    line = "".join(c for c in line if c not in _JOINERS and unicodedata.category(c) not in _EMOJI_CATEGORIES)
    line = " ".join(line.split())
    if item and line and line[-1] not in ".!?:;,":
        line += "."
    return line


class SpokenReply:
    """Sentences of a streamed reply as they complete; `text` is what has been handed out so far
    (read by the dialogue for "repeat that" and the visit's memory once the reply is over)."""

    def __init__(self, pieces: Iterator[str], max_words: int, first_token_ms: float | None = None) -> None:
        self._pieces = pieces
        self.max_words = max_words
        self.first_token_ms = first_token_ms  # the request sent -> its first word (for reports)
        self.text = ""
        self._words = 0

    def sentences(self) -> Iterator[str]:
        """Complete sentences, as soon as each is; a reply cut short ends at its last full sentence."""
        pending = ""
        try:
            for piece in self._pieces:
                pending += piece
                complete, pending = _split_complete(pending)
                if len(pending.split()) > self.max_words:  # no sentence end in sight: a run-on is its own
                    complete, pending = complete + [speakable(pending)], ""
                for sentence in complete:
                    if (kept := self._hand_out(sentence)) is None:
                        return
                    yield kept
            for sentence in whole_sentences(speakable(pending)):  # the stream's end closes its last sentence
                if (kept := self._hand_out(sentence)) is None:
                    return
                yield kept
        except LlmCancelled:
            log.info("the LLM's reply was interrupted; its stream is closed")
        except LlmCut as exc:
            log.warning("the LLM's reply was cut short (%s); it ends at its last full sentence", exc)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the stream (the reply was interrupted, or is not wanted)."""
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()

    def _hand_out(self, sentence: str) -> str | None:
        """`sentence` (a first one longer than a whole reply cut to it), or None once the reply is long enough."""
        words = sentence.split()
        if self._words and self._words + len(words) > self.max_words:
            return None
        if len(words) > self.max_words:
            sentence = " ".join(words[: self.max_words]) + "."
        self._words += min(len(words), self.max_words)
        self.text = f"{self.text} {sentence}".strip()
        return sentence

    def __iter__(self) -> Iterator[str]:
        return self.sentences()


def _split_complete(text: str) -> tuple[list[str], str]:
    """The complete sentences at the start of `text` (whole lines, and sentences ended by . ! or ?
    and a space), and the rest, still being written."""
    complete = []
    if "\n" in text:
        lines, text = text.rsplit("\n", 1)
        if lines.count("```") % 2:  # inside a code block: wait for its end
            return [], lines + "\n" + text
        complete = [s for line in _CODE.sub(" ", lines).split("\n") for s in whole_sentences(speakable(line))]
    bullet = _BULLET.match(text)
    start = bullet.end() if bullet else 0
    ends = list(_SENTENCE_END.finditer(text, start))
    if ends and "```" not in text:
        cut = ends[-1].end()
        complete += whole_sentences(speakable(text[:cut]))
        text = text[cut:]
    return complete, text

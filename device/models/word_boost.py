"""Word boosting: greedy decoding leans toward the operator's words.

In a loud hall the recogniser's first choice for a word the knowledge base is about is often a
near miss ("wife I met" for "wifi network", "this portal" for "toilet"), and the second choice is
the right one. Each step, a candidate token among the decoder's best few that spells the beginning
of (or all of) a domain word gets a bonus on its logit: shallow fusion of the simplest language
model, a word list, in the style of keyword boosting in NeMo and WeNet. Written here because the
decoder is ours (greedy, with a KV cache) and no library boosts words in it.
"""

from __future__ import annotations

import re

import numpy as np

SPACE = "\u2581"  # SentencePiece's word-boundary mark
CANDIDATES = 10  # only the decoder's best few are boosted: a bonus never makes an unlikely token win
_LETTERS = re.compile(r"[a-z0-9']+")


class WordBoost:
    def __init__(self, words: set[str], vocabulary: list[bytes], bonus: float) -> None:
        """`words`: lower-case domain words; `vocabulary`: the recogniser's token byte strings."""
        self.bonus = bonus
        self._prefixes = frozenset(w[:i] for w in words for i in range(1, len(w) + 1))
        self._pieces = [p.decode("utf-8", errors="replace") for p in vocabulary]

    def apply(self, logits: np.ndarray, tokens: list[int]) -> np.ndarray:
        """`logits` of the next token with the bonus added where a candidate spells a domain word on."""
        partial = self._partial_word(tokens)
        boosted = logits.copy()
        for token in np.argpartition(logits, -CANDIDATES)[-CANDIDATES:]:
            if token < len(self._pieces) and self._continues(partial, self._pieces[token]):
                boosted[token] += self.bonus
        return boosted

    def _partial_word(self, tokens: list[int]) -> str | None:
        """The word being spelt by the last tokens ('' at a word boundary; None: not a letter run)."""
        text = ""
        for token in reversed(tokens):
            piece = self._pieces[token] if token < len(self._pieces) else ""
            text = piece + text
            if piece.startswith(SPACE):
                break
        word = text.lstrip(SPACE).lower()
        return word if _LETTERS.fullmatch(word) or not word else None

    def _continues(self, partial: str | None, piece: str) -> bool:
        if piece.startswith(SPACE):
            partial = ""
            piece = piece[1:]
        piece = piece.lower()
        if partial is None or not piece or not _LETTERS.fullmatch(piece):
            return False
        return partial + piece in self._prefixes


def domain_words(texts: list[str], shortest: int = 3) -> set[str]:
    """The words of `texts` worth boosting: lower case, at least `shortest` letters."""
    return {w for text in texts for w in _LETTERS.findall(text.lower()) if len(w) >= shortest}

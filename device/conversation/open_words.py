"""Words after which an English sentence has not ended: a visitor who stops after "Where is the" or
"Is it possible to" is looking for the next word, whatever their voice did.

The end-of-turn model judges a pause by its sound (docs/end-of-turn.md); the speculative recognition
of the same pause gives its words, and when the last one is an article, a possessive determiner, a
conjunction or an infinitive's "to", the pause waits `max_hangover_ms` (`[endpoint] wait_after_open_words`).
Prepositions, pronouns and quantifiers are not in the list: questions end on them ("What is this
for?", "Can you repeat that?", "Do you have any?").
"""

from __future__ import annotations

from device.models.asr import words

OPEN_WORDS = frozenset("a an the my your our their its every to and or but if because than whether".split())


def leaves_open(transcript: str) -> bool:
    """The transcript's last word leaves its sentence open (False with no words)."""
    said = words(transcript)
    return bool(said) and said[-1] in OPEN_WORDS

"""Choosing the answer: built-in intents, the operator's knowledge base, an optional LLM.

Questions are matched by meaning: the text encoder embeds every example question once, and a
visitor's question goes to the intent of its most similar example. Below the confidence
threshold the avatar asks the visitor to rephrase.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


from device.conversation.knowledge import Intent, KnowledgeError, load_knowledge
from device.conversation.llm import LlmClient
from device.models.text_encoder import TextEncoder
from device.settings import DialogueSettings

STOP, REPEAT, REPHRASE = "stop", "repeat", "rephrase"
# Built-ins that act (tell the time, stop talking...) need a closer match than an answer does:
# "Who won the game yesterday?" is 0.43 from "What day is it today?".
ACTION_THRESHOLD = 0.6
REPHRASE_ANSWER = "Sorry, I did not catch that. Could you ask me in another way?"

# Built-ins whose answers the code makes; greeting and goodbye are ordinary answers.
BUILTINS = (
    Intent("greeting", ("Hello!", "Hi there.", "Good morning.", "Hey robot."), "Hello! How can I help you?"),
    Intent("goodbye", ("Goodbye.", "Bye, thank you!", "See you later.", "Thanks, that is all."),
           "Goodbye, and enjoy your visit!"),
    Intent(REPEAT, ("Can you repeat that?", "Say that again, please.", "What did you say?", "Pardon?"), ""),
    Intent("time", ("What time is it?", "What is the time now?", "Do you know the time?"), ""),
    Intent("date", ("What is the date today?", "What day is it today?", "Which day is it?"), ""),
    Intent(STOP, ("Stop talking.", "Stop.", "Be quiet.", "That's enough.", "Shut up."), ""),
)


@dataclass(frozen=True)
class Answer:
    intent: str
    score: float
    text: str  # empty for 'stop'
    source: str  # builtin | knowledge | llm | fallback


class Dialogue:
    def __init__(self, encoder: TextEncoder, intents: tuple[Intent, ...], settings: DialogueSettings,
                 llm: LlmClient | None = None, clock: Callable[[], datetime.datetime] = datetime.datetime.now) -> None:
        self.encoder = encoder
        self.settings = settings
        self.llm = llm
        self.clock = clock
        self.last_answer = ""
        self._builtin_names = {i.name for i in BUILTINS}
        self._actions = {i.name for i in BUILTINS if not i.answer}
        self.load(intents)

    def load(self, intents: tuple[Intent, ...]) -> None:
        """Embed every example of the knowledge base (and the built-ins) once, then swap the new
        knowledge in as one unit, so a question asked meanwhile sees the old or the new, whole."""
        clash = sorted({i.name for i in intents} & {i.name for i in BUILTINS})
        if clash:
            raise KnowledgeError(f"intent name(s) {', '.join(clash)} are built in; give the knowledge base's intents other "
                                 "names (the built-ins: " + ", ".join(i.name for i in BUILTINS) + ")")
        by_name = {i.name: i for i in (*BUILTINS, *intents)}
        owners = [i.name for i in by_name.values() for _ in i.examples]
        examples = self.encoder.embed([e for i in by_name.values() for e in i.examples])
        self._knowledge = (by_name, owners, examples)

    def reload(self, path: Path | None) -> int:
        """Re-read the knowledge base; on any error the current one stays and the error is raised."""
        intents = load_knowledge(path)
        self.load(intents)
        return len(intents)

    @property
    def intents(self) -> dict[str, Intent]:
        return self._knowledge[0]

    def rank(self, question: str) -> list[tuple[str, float]]:
        """Intents by their best example's similarity to the question, best first."""
        _, owners, examples = self._knowledge
        scores = examples @ self.encoder.embed([question])[0]
        best: dict[str, float] = {}
        for owner, score in zip(owners, scores):
            best[owner] = max(best.get(owner, -1.0), float(score))
        return sorted(best.items(), key=lambda item: -item[1])

    def answer(self, question: str) -> Answer:
        intent, score = self.rank(question)[0]
        if intent in self._actions:
            if score >= ACTION_THRESHOLD:
                return self._remember(Answer(intent, score, self._builtin(intent), "builtin"))
            score = min(score, self.settings.threshold - 1e-6)  # not close enough: no match
        if self.llm is not None:
            text = self.llm.answer(question)
            if text:
                return self._remember(Answer("llm", score, text, "llm"))
        if score < self.settings.threshold:
            return self._remember(Answer(REPHRASE, score, REPHRASE_ANSWER, "fallback"))
        source = "builtin" if intent in self._builtin_names else "knowledge"
        return self._remember(Answer(intent, score, self.intents[intent].answer, source))

    def _builtin(self, intent: str) -> str:
        now = self.clock()
        if intent == "time":
            return f"It is {now.strftime('%I:%M %p').lstrip('0')}."
        if intent == "date":
            return f"Today is {now.strftime('%A, %B')} {now.day}."
        if intent == REPEAT:
            return self.last_answer or "I have not said anything yet. How can I help you?"
        return ""  # stop

    def _remember(self, answer: Answer) -> Answer:
        if answer.intent not in (REPEAT, STOP):
            self.last_answer = answer.text
        return answer

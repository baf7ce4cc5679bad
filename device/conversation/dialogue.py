"""Choosing the answer: built-in intents, the operator's knowledge base, an optional LLM.

Questions are matched by meaning: the text encoder embeds every example question once, and a
visitor's question goes to the intent whose two most similar examples are the nearest on average;
how sure the robot is, is its most similar example's similarity. Below `threshold` the avatar asks
the visitor to rephrase; between it and `confident_threshold` it asks back ("Did you mean the
restrooms?") and a yes answers that intent: a guess on a mis-heard or oddly worded question costs one
short turn instead of a wrong answer.

With an LLM, the knowledge base still comes first: a confident match (`[llm] knowledge_threshold`)
is the operator's own answer. The LLM answers the rest, told the closest entries of the knowledge
base and the turns of the current visit; its reply is streamed into speech (SpokenReply).
"""

from __future__ import annotations

import collections
import datetime
import functools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from device.conversation.grounding import first_words, grounded_prompt
from device.conversation.knowledge import Intent, KnowledgeError, load_knowledge
from device.conversation.llm import LlmClient
from device.conversation.spoken_reply import SpokenReply
from device.models.text_encoder import TextEncoder
from device.settings import DialogueSettings

STOP, REPEAT, REPHRASE, GOODBYE, ASK_BACK = "stop", "repeat", "rephrase", "goodbye", "ask_back"
# Built-ins that act (tell the time, stop talking...) need a closer match than an answer does:
# "Who won the game yesterday?" is 0.43 from "What day is it today?". Repeating is asked back about
# like an answer: saying the last reply again on a guess tells nothing wrong, and "I didn't hear you"
# is what visitors in a loud hall say in words no example has.
ACTION_THRESHOLD = 0.6
REPHRASE_ANSWER = "Sorry, I did not catch that. Could you ask me in another way?"
NOT_IT_ANSWER = "Sorry. What would you like to know?"  # "no" to an ask-back
# Answered without asking back when unsure: a wrong hello or goodbye costs little.
UNASKED = ("greeting", GOODBYE)
# An intent is as near as its two most similar examples on average, not its nearest alone: one
# example close in words ("Where are the lifts?" to "Is there a lift for strollers and
# wheelchairs?") no longer outvotes an intent two of whose examples agree. Chosen on the tuning
# split among 1 (the nearest alone), 2, 3 and 4 (docs/lab/hearing.md); an intent with one example has it alone.
AGREEING_EXAMPLES = 2
_YES = frozenset("yes yeah yep yup sure right correct exactly indeed please ok okay absolutely".split())
_NO = frozenset("no nope nah not wrong".split())

# Built-ins whose answers the code makes; greeting and goodbye are ordinary answers.
BUILTINS = (
    Intent("greeting", ("Hello!", "Hi there.", "Good morning.", "Hey robot."), "Hello! How can I help you?"),
    Intent(
        GOODBYE,
        ("Goodbye.", "Bye, thank you!", "See you later.", "Thanks, that is all.", "I'm leaving now."),
        "Goodbye, and enjoy your visit!",
    ),
    Intent(
        REPEAT,
        ("Can you repeat that?", "Say that again, please.", "What did you say?", "Pardon?", "I didn't catch that."),
        "",
        "that I say it again",
    ),
    Intent("time", ("What time is it?", "What is the time now?", "Do you know the time?"), ""),
    Intent("date", ("What is the date today?", "What day is it today?", "Which day is it?"), ""),
    Intent(STOP, ("Stop talking.", "Stop.", "Be quiet.", "That's enough.", "Shut up."), ""),
)


def ranked(owners: Sequence[str], similarities: Iterable[float]) -> list[tuple[str, float]]:
    """Intents, the likeliest first, from each example's owner and its similarity to a question: the
    one whose AGREEING_EXAMPLES most similar examples are the nearest on average. Each comes with its
    most similar example's similarity. The dialogue and `kb check` both rank with it, so they agree."""
    by_intent: dict[str, list[float]] = {}
    for owner, similarity in zip(owners, similarities):
        by_intent.setdefault(owner, []).append(float(similarity))
    nearest = {name: sorted(found, reverse=True)[:AGREEING_EXAMPLES] for name, found in by_intent.items()}
    likeliest = sorted(nearest, key=lambda name: -sum(nearest[name]) / len(nearest[name]))
    return [(name, nearest[name][0]) for name in likeliest]


@dataclass(frozen=True)
class Answer:
    intent: str
    score: float
    text: str  # empty for 'stop', and for an LLM's reply, which is streamed (`reply`)
    source: str  # builtin | knowledge | llm | fallback | ask_back | perception
    reply: SpokenReply | None = None  # the LLM's reply, its sentences arriving as it is generated
    about: str = ""  # of an ask-back: the intent it guesses

    @property
    def spoken(self) -> str:
        """What the robot says (of a streamed reply: what it has said so far)."""
        return self.reply.text if self.reply is not None else self.text

    def sentences(self) -> Iterable[str]:
        """The text to speak, as it becomes available."""
        return self.reply.sentences() if self.reply is not None else (self.text,)


@dataclass(frozen=True)
class Decision:
    """What the knowledge base and the built-ins make of a question: answer `intent`, ask back
    about it, or ask to rephrase (`kind` is "answer", ASK_BACK or REPHRASE)."""

    kind: str
    intent: str
    score: float


class Dialogue:
    def __init__(
        self,
        encoder: TextEncoder,
        intents: tuple[Intent, ...],
        settings: DialogueSettings,
        llm: LlmClient | None = None,
        clock: Callable[[], datetime.datetime] = datetime.datetime.now,
    ) -> None:
        self.encoder = encoder
        self.settings = settings
        self.llm = llm
        self.clock = clock
        self._last: Answer | None = None  # for "repeat that"
        self._unsaid = ""  # what an interrupted reply did not get to say ("repeat that" says it)
        self._guess: Decision | None = None  # the last ask-back, waiting for its yes or no
        # The current visit's questions and answers, for the LLM (owned by the thread that calls answer()).
        self._visit: collections.deque[tuple[str, Answer]] = collections.deque(
            maxlen=llm.settings.visit_turns if llm is not None else 0
        )
        self._builtin_names = {i.name for i in BUILTINS}
        self._actions = {i.name for i in BUILTINS if not i.answer}
        self._guarded = self._actions - {REPEAT}  # never asked back about: below ACTION_THRESHOLD, rephrase
        # The words before a pause are judged (`knows`) on the recognition thread and, when the pause
        # ends the turn, answered with the same transcript: embedded once (lru_cache takes a lock).
        self._embedded = functools.lru_cache(maxsize=8)(self._embed)
        self.load(intents)

    def load(self, intents: tuple[Intent, ...], between: Callable[[], None] = lambda: None) -> None:
        """Embed every example of the knowledge base (and the built-ins) once, then swap the new
        knowledge in as one unit, so a question asked meanwhile sees the old or the new, whole.
        `between` is called between batches (TextEncoder.embed): an exception it raises keeps the old."""
        clash = sorted({i.name for i in intents} & {i.name for i in BUILTINS})
        if clash:
            raise KnowledgeError(
                f"intent name(s) {', '.join(clash)} are built in; give the knowledge base's intents other "
                "names (the built-ins: " + ", ".join(i.name for i in BUILTINS) + ")"
            )
        by_name = {i.name: i for i in (*BUILTINS, *intents)}
        owners = [i.name for i in by_name.values() for _ in i.examples]
        examples = self.encoder.embed([e for i in by_name.values() for e in i.examples], between)
        self._knowledge = (by_name, owners, examples)

    def reload(self, path: Path | None, between: Callable[[], None] = lambda: None) -> int:
        """Re-read the knowledge base; on any error the current one stays and the error is raised."""
        intents = load_knowledge(path)
        self.load(intents, between)
        return len(intents)

    @property
    def intents(self) -> dict[str, Intent]:
        return self._knowledge[0]

    def rank(self, question: str) -> list[tuple[str, float]]:
        """Intents, the likeliest first: the one whose AGREEING_EXAMPLES most similar examples are the
        nearest on average. Each comes with its most similar example's similarity, which says how
        sure the robot is (the thresholds are in its terms)."""
        _, owners, examples = self._knowledge
        return ranked(owners, examples @ self._embedded(question))

    def _embed(self, question: str) -> np.ndarray:
        embedding = self.encoder.embed([question])[0]
        embedding.setflags(write=False)  # shared by the threads that ask
        return embedding

    def decide(self, question: str) -> Decision:
        """The knowledge base's and built-ins' verdict on `question`, without an LLM or the visit's memory."""
        return self._decided(self.rank(question))

    def sure(self, decision: Decision) -> bool:
        """An answer confident enough to act on without a doubt (not a guess answered for its low cost)."""
        return decision.kind == "answer" and decision.score >= self.settings.confident_threshold

    def knows(self, question: str, at_least: float = 0.0) -> bool:
        """The knowledge base, a greeting or a goodbye answers `question` with confidence, its similarity
        `at_least`. Never an action: "What time" (the time, 0.87) starts "What time do you open?", and
        acting on half a question is worse than waiting for the rest."""
        decision = self.decide(question)
        return self.sure(decision) and decision.intent not in self._actions and decision.score >= at_least

    def _decided(self, ranking: list[tuple[str, float]]) -> Decision:
        intent, score = ranking[0]
        if score < self.settings.threshold:
            return Decision(REPHRASE, intent, score)
        if intent in self._guarded:  # acting on a guess (the time for the opening hours) is worse than asking again
            return Decision("answer" if score >= ACTION_THRESHOLD else REPHRASE, intent, score)
        if score >= self.settings.confident_threshold or intent in UNASKED:
            return Decision("answer", intent, score)
        return Decision(ASK_BACK, intent, score)

    def answer(self, question: str, cancelled: threading.Event | None = None) -> Answer:
        """The answer to `question`; an LLM's reply starts streaming here (after its first word) and
        stops when `cancelled` is set."""
        guess, self._guess = self._guess, None
        if guess is not None:
            replied = _yes_or_no(question)
            if replied == "yes":
                return self._remember(question, self._answer_of(guess))
            if replied == "no":
                return self._remember(question, Answer(REPHRASE, guess.score, NOT_IT_ANSWER, "fallback"))
        ranking = self.rank(question)
        decision = self._decided(ranking)
        acts = decision.intent in self._actions and decision.kind != REPHRASE  # the LLM cannot tell the time
        if self.llm is not None and not acts and decision.score < self.llm.settings.knowledge_threshold:
            reply = self._ask_llm(question, ranking, cancelled or threading.Event())
            if reply is not None:
                return self._remember(question, Answer("llm", decision.score, "", "llm", reply))
        if decision.kind == REPHRASE:
            return self._remember(question, Answer(REPHRASE, decision.score, REPHRASE_ANSWER, "fallback"))
        if decision.kind == ASK_BACK:
            self._guess = decision
            return self._remember(
                question,
                Answer(
                    ASK_BACK, decision.score, self.intents[decision.intent].ask_back, "ask_back", about=decision.intent
                ),
            )
        return self._remember(question, self._answer_of(decision))

    def cut_short(self, unsaid: str) -> None:
        """The last reply was interrupted before `unsaid`: "repeat that" finishes it."""
        self._unsaid = unsaid

    def new_visit(self) -> None:
        """A visitor arrived: what the last one said is not theirs to build on."""
        self._visit.clear()
        self._guess = None

    def _answer_of(self, decision: Decision) -> Answer:
        intent = decision.intent
        if intent in self._builtin_names:
            return Answer(intent, decision.score, self.intents[intent].answer or self._builtin(intent), "builtin")
        return Answer(intent, decision.score, self.intents[intent].answer, "knowledge")

    def _ask_llm(
        self, question: str, ranking: list[tuple[str, float]], cancelled: threading.Event
    ) -> SpokenReply | None:
        """The LLM's reply once its first word is in, or None (the knowledge base answers)."""
        entries = self.llm.settings.grounding_entries
        closest = [self.intents[name] for name, _ in ranking if name not in self._builtin_names][:entries]
        visit = [(asked, answered.spoken) for asked, answered in self._visit]
        return first_words(self.llm, grounded_prompt(self.llm.settings, question, closest, visit), cancelled)

    def _builtin(self, intent: str) -> str:
        now = self.clock()
        if intent == "time":
            return f"It is {now.strftime('%I:%M %p').lstrip('0')}."
        if intent == "date":
            return f"Today is {now.strftime('%A, %B')} {now.day}."
        if intent == REPEAT:
            unsaid, self._unsaid = self._unsaid, ""
            return (
                unsaid
                or (self._last.spoken if self._last else "")
                or "I have not said anything yet. How can I help you?"
            )
        return ""  # stop

    def _remember(self, question: str, answer: Answer) -> Answer:
        if answer.intent not in (REPEAT, STOP) and answer.about != REPEAT:  # its yes repeats the reply before it
            self._last, self._unsaid = answer, ""
        if answer.intent == GOODBYE:
            self._visit.clear()
        elif answer.intent != STOP:
            self._visit.append((question, answer))
        return answer


def _yes_or_no(reply: str) -> str:
    """ "yes", "no" or "" of a short reply to an ask-back ("Yes please", "No, not that"); a longer one
    ("No, where is the cafe?") is a question of its own."""
    words = [w.strip(".,!?;:'\"") for w in reply.lower().split()]
    if len(words) > 4:
        return ""
    if any(w in _NO for w in words):
        return "no"
    return "yes" if any(w in _YES for w in words) else ""

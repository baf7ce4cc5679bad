"""The turns stage: each utterance's words become an answer, and the answer a reply.

It owns the `turns` thread and the dialogue (a new visit is a message in its inbox too). For each
utterance it waits for the transcript (words it is unsure of are heard again from the speech alone,
device/conversation/speech_alone.py), decides what the utterance is to the reply going on (a
visitor going on with the question before: device/conversation/rejoin.py; a backchannel or a
question said over it: the barge-in rules below), asks the dialogue and starts the reply. Without
barge-in, while the robot speaks only "stop" is acted on.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

import numpy as np

from device.conversation.dialogue import STOP, Dialogue
from device.conversation.pause_words import backchannel
from device.conversation.rejoin import heard_together
from device.conversation.replying import Replying
from device.conversation.speech_alone import surer_words
from device.conversation.turn import Turn, TurnBook
from device.messages import Interrupt
from device.models.asr import RecognitionStopped, SpeechRecognizer, Transcript
from device.settings import BargeInSettings

log = logging.getLogger(__name__)
NEW_VISIT = "new visit"  # the inbox's message: a visitor arrived, the dialogue forgets the last visit


class Answering:
    def __init__(
        self,
        asr: SpeechRecognizer,
        recognition: ThreadPoolExecutor,
        dialogue: Dialogue,
        replying: Replying,
        book: TurnBook,
        max_utterance_s: float,
        bargein: BargeInSettings | None,
        heartbeat: Callable[[], None],
    ) -> None:
        """`recognition`: the one thread recognition runs on; `heartbeat` is called at least every second."""
        self.asr = asr
        self.dialogue = dialogue
        self.listening = threading.Event()  # clear: answer nobody (no visitor engaged and listening is gated)
        self.listening.set()
        self._recognition = recognition
        self._replying = replying
        self._book = book
        self._max_utterance_s = max_utterance_s
        self._bargein = bargein
        self._heartbeat = heartbeat
        # (the turn, its recognition, the turn it began soon enough after to go on with) or NEW_VISIT, or None: stop
        self._inbox: queue.Queue[tuple[Turn, Future[Transcript], Turn | None] | str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="turns", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def answer(self, turn: Turn, heard: Future[Transcript], follows: Turn | None) -> None:
        """Answer `turn` once `heard` is in; `follows`: the turn it may go on with (from the feeding thread)."""
        self._inbox.put((turn, heard, follows))

    def new_visit(self) -> None:
        self._inbox.put(NEW_VISIT)

    @property
    def waiting(self) -> bool:
        """Utterances not yet taken up."""
        return not self._inbox.empty()

    def stop(self) -> None:
        self._inbox.put(None)
        self._thread.join(timeout=30)

    # --- the turns thread --------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            self._heartbeat()
            try:
                item = self._inbox.get(timeout=1.0)
            except queue.Empty:
                continue
            if item is None:
                return
            if item == NEW_VISIT:
                self.dialogue.new_visit()
                continue
            turn, heard, follows = item
            try:
                self._take(turn, heard, follows)
            except Exception:  # one bad turn must not end the conversation
                log.exception("turn %d failed", turn.id)
                if turn.barged_in:
                    self._replying.resume()  # a paused reply must not stay paused
                turn.ignored = "error"
                self._book.finish(turn)

    def _take(self, turn: Turn, heard: Future[Transcript], follows: Turn | None) -> None:
        try:
            transcript = heard.result()
        except RecognitionStopped:
            turn.ignored = "cut off and talked over"
            self._book.finish(turn)
            log.info("turn %d: a monologue cut at its maximum length gave way to the next utterance", turn.id)
            return
        turn.transcript = surer_words(transcript.text, turn.utterance, self._transcribe, self.dialogue)
        turn.timings.asr_done = time.monotonic()
        rejoined = follows is not None and self._rejoined(turn, follows)
        if rejoined and self._replying.state.speaking_turn is follows:
            if not self._answers_whole(turn, follows):
                return
        elif turn.barged_in and not self._barge_in_wins(turn):
            return
        if not turn.transcript:
            turn.ignored = "no words recognised"
            self._book.finish(turn)
            return
        self._reply(turn)

    def _reply(self, turn: Turn) -> None:
        cancel = threading.Event()
        answer = self.dialogue.answer(turn.transcript, cancel)
        turn.answer = answer
        turn.timings.dialogue_done = time.monotonic()  # of an LLM's reply: its first word is in
        if not self.listening.is_set() and answer.intent != STOP:
            turn.ignored = "no visitor engaged"
        elif answer.intent == STOP:
            self._replying.interrupt(Interrupt("the visitor asked to stop"))
        elif not self._replying.start(turn, cancel):
            turn.ignored = "heard while speaking"
        else:
            return
        self._book.finish(turn)
        if answer.reply is not None:
            answer.reply.close()  # not spoken: the LLM's stream is not wanted
        log.info(
            "turn %d: %r -> %s (%s)",
            turn.id,
            turn.transcript,
            answer.intent,
            turn.ignored or "stopped speaking",
            extra={"TURN_ID": turn.id, "INTENT": answer.intent},
        )

    def _rejoined(self, turn: Turn, first: Turn) -> bool:
        """The visitor went on after `first`'s utterance: when its words and these are one question
        (device/conversation/rejoin.py), this turn is that whole question, its audio recognised whole
        unless the robot would do the same with these words alone."""
        heard = heard_together(
            (first.utterance, first.transcript),
            (turn.utterance, turn.transcript),
            self._max_utterance_s,
            self.dialogue.decide,
            self._transcribe,
        )
        if heard is None:
            return False
        turn.utterance, turn.transcript = heard
        turn.timings.asr_done, turn.rejoined = time.monotonic(), True
        log.info("turn %d goes on with turn %d: %r", turn.id, first.id, turn.transcript)
        self._book.count("rejoined a question")
        return True

    def _transcribe(self, audio: np.ndarray) -> str:
        """Words of `audio`, recognised on the recognition thread (one recognizer, one thread at a time)."""
        return self._recognition.submit(self.asr.transcribe, audio).result().text

    def _answers_whole(self, turn: Turn, first: Turn) -> bool:
        """The reply to `first` (the first half) goes on if it answers the whole question too (False);
        else it is cut, and not kept for "repeat that" (it answered half a question), and the whole is answered."""
        said = first.answer
        answered = said is not None and said.source in ("knowledge", "builtin")
        if answered and self.dialogue.decide(turn.transcript).intent == said.intent:
            self._resume(turn, "the rest of the question it answers")
            return False
        self._cut(Interrupt("the visitor had not finished their question"), keep_unsaid=False)
        return True

    def _barge_in_wins(self, turn: Turn) -> bool:
        """An utterance that paused a reply: a cough, a backchannel, or a short utterance the dialogue cannot
        place (a mis-heard "mm-hm") lets the reply go on (False); anything else (a question, "stop") ends
        the reply, which is then answered as a turn of its own (True)."""
        if backchannel(turn.transcript):
            self._resume(turn, "a backchannel")
            return False
        speech_ms = turn.utterance.seconds * 1000
        decision = self.dialogue.decide(turn.transcript)
        if speech_ms < self._bargein.min_question_ms and decision.intent != STOP:
            self._resume(turn, "too short for a question")
            return False
        if speech_ms < self._bargein.sure_question_ms and not self.dialogue.sure(decision):
            self._resume(turn, "short, and not a question the robot knows")
            return False
        self._cut(Interrupt("the visitor talked over the reply"))
        self._book.count("barge-in: cut a reply")
        return True

    def _resume(self, turn: Turn, why: str) -> None:
        """The utterance said over the reply was not a new question: the reply goes on (if it paused it)."""
        if turn.barged_in:
            self._replying.resume()
        turn.ignored = f"said over the reply ({why})"
        self._book.finish(turn)
        log.info("turn %d: %r over the reply: %s, it goes on", turn.id, turn.transcript, why)

    def _cut(self, interrupt: Interrupt, keep_unsaid: bool = True) -> None:
        """End the paused reply for good and tell the dialogue what was not said (for "repeat that"),
        unless `keep_unsaid` is False."""
        cut = self._replying.cut(interrupt)
        if cut is not None and cut.unsaid and keep_unsaid:
            self.dialogue.cut_short(cut.unsaid)

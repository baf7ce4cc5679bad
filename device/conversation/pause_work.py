"""A pause's work: while the endpointer waits out a short silence, the utterance so far is recognised
(speculatively, so its words are in when the pause ends), its words are judged (open words, a known
question: device/conversation/pause_words.py) and the end-of-turn model is asked. Their results come
back to the feeding thread, which owns this object, as messages (`news`) it hands to the endpointer
frame by frame; the work itself runs on the recognition and end-of-turn threads."""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from device.conversation.endpointer import SPECULATE_AFTER_MS
from device.conversation.pause_words import Words, WordsJudged, judge_words, judges_words
from device.messages import EndOfTurnVerdict, SpeechPaused, Utterance
from device.models.asr import SpeechRecognizer, Transcript
from device.models.end_of_turn import EndOfTurnDetector
from device.settings import EndpointSettings

log = logging.getLogger(__name__)
# An end-of-turn model that takes longer than a pause has before the fixed hangover ends it, this many
# times in a row, shortens no pause and only slows the speculative recognition it shares the cores with
# (on the 2-core development PC: turn p50 691 ms with it against 357 without, docs/lab/end-of-turn.md): it
# is not asked again.
LATE_VERDICTS_TO_STOP = 3


@dataclass(frozen=True)
class Speculation:
    """A pause's recognition, started before the endpointer knows whether the utterance ends there."""

    speech_end: int
    samples: int  # of the audio it recognises (an utterance may take in more: Endpointer._finish)
    heard: Future[Transcript]
    stop: threading.Event  # set when the visitor talks on: its words are no longer wanted


@dataclass(frozen=True)
class PauseOutcome:
    """What the utterance that ended at a pause takes from that pause's work."""

    heard: Future[Transcript] | None  # the speculative recognition, when it heard this very utterance
    verdict: EndOfTurnVerdict | None  # the model's verdict on the pause, if it gave one
    words: Words | None  # what the words before the pause were, if they were judged in time


class PauseWork:
    """The work of the latest pause, and what came of it, for the feeding thread (its only user)."""

    def __init__(
        self,
        asr: SpeechRecognizer,
        recognition: ThreadPoolExecutor,
        settings: EndpointSettings,
        knows: Callable[[str, float], bool],
        end_of_turn: EndOfTurnDetector | None = None,
    ) -> None:
        """`recognition`: the one thread recognition runs on (the turns' own recognitions queue there
        too); `knows`: the dialogue's judgement of a question (pause_words.judge_words)."""
        self.asr = asr
        self.settings = settings
        self.end_of_turn = end_of_turn
        self._recognition = recognition
        self._knows = knows
        self._judge_pool = ThreadPoolExecutor(1, thread_name_prefix="end-of-turn") if end_of_turn is not None else None
        self._speculative: Speculation | None = None
        self._words_judged: Future[Words] | None = None  # what the speculative words are, judged after them
        self._words_given = -1  # the pause whose words the endpointer was last given
        self._words: Words | None = None  # what they were
        self._judging: Future | None = None
        self._verdicts: queue.SimpleQueue[EndOfTurnVerdict] = queue.SimpleQueue()  # end-of-turn thread -> here
        self._verdict: EndOfTurnVerdict | None = None  # the latest
        self._late_verdicts = 0  # in a row; at LATE_VERDICTS_TO_STOP the model is not asked again

    def start(self, pause: SpeechPaused) -> None:
        """At a short silence after speech: recognise what was said so far, judge its words, ask the model."""
        stop = threading.Event()
        heard = self._recognition.submit(self.asr.transcribe, pause.audio, stop)
        self._speculative = Speculation(pause.speech_end, len(pause.audio), heard, stop)
        if judges_words(self.settings):
            self._words_judged = self._recognition.submit(self._words_of, heard)
        if self._judge_pool is not None and self._late_verdicts < LATE_VERDICTS_TO_STOP:
            self._judging = self._judge_pool.submit(self._judge, pause)

    def drop(self) -> None:
        """The visitor went on: the pause's work is no longer wanted (a recognition under way stops
        at its next decoding step, work not started is not done)."""
        if self._speculative is not None:
            self._speculative.stop.set()
        for pending in self.pending():
            pending.cancel()  # only drops it if it has not started yet
        self._speculative = self._words_judged = self._judging = None

    def news(self) -> list[EndOfTurnVerdict | WordsJudged]:
        """The verdicts and the words' judgement that came in since the last frame, for the endpointer."""
        return self._take_verdicts() + self._take_words()

    def pending(self) -> list:
        """The current pause's recognition, words judgement and verdict still pending."""
        work = (self._speculative.heard if self._speculative else None, self._words_judged, self._judging)
        return [pending for pending in work if pending is not None]

    def words_so_far(self) -> str | None:
        """The words recognised before the current pause, once they are in (None before that, or when
        there is no pause or its recognition failed)."""
        heard = self._speculative.heard if self._speculative is not None else None
        if heard is None or not heard.done() or heard.cancelled() or heard.exception() is not None:
            return None
        return heard.result().text

    def take(self, utterance: Utterance) -> PauseOutcome:
        """The utterance ended: what it takes from the work of the pause it ended at."""
        speculative = self._speculative
        self._speculative = self._words_judged = None
        verdict = self._verdict
        heard_it = speculative is not None and (speculative.speech_end, speculative.samples) == (
            utterance.speech_end,
            len(utterance.audio),
        )
        return PauseOutcome(
            speculative.heard if heard_it else None,
            verdict if verdict is not None and verdict.speech_end == utterance.speech_end else None,
            self._words if self._words_given == utterance.speech_end else None,
        )

    def close(self) -> None:
        if self._judge_pool is not None:
            self._judge_pool.shutdown(wait=True)

    def _words_of(self, heard: Future[Transcript]) -> Words:
        """On the recognition thread, right after the pause's words: what they are. The dialogue's text
        encoder runs here, not on the feeding thread, which must never wait for it."""
        if heard.cancelled() or heard.exception() is not None:
            return Words.OTHER
        return judge_words(heard.result().text, self.settings, self._knows)

    def _take_words(self) -> list[WordsJudged]:
        """With `wait_after_open_words` or `end_on_known_question`: the current pause's words, once judged
        (open words hold the pause open, a question the robot is sure of ends it sooner)."""
        if self._speculative is None or self._words_judged is None:
            return []
        speech_end, judged = self._speculative.speech_end, self._words_judged
        if speech_end == self._words_given or not judged.done():
            return []
        self._words_given = speech_end
        self._words = Words.OTHER if judged.cancelled() or judged.exception() is not None else judged.result()
        return [WordsJudged(speech_end, self._words)]

    def _judge(self, pause: SpeechPaused) -> None:
        """On the end-of-turn thread: a failing model leaves the pause to the fixed hangover."""
        try:
            self._verdicts.put(self.end_of_turn.judge(pause.heard, pause.speech_end))
        except Exception:
            log.exception("the end-of-turn model failed; this pause gets the fixed hangover")

    def _take_verdicts(self) -> list[EndOfTurnVerdict]:
        """The verdicts that arrived since the last frame."""
        verdicts = []
        while True:
            try:
                verdict = self._verdicts.get_nowait()
            except queue.Empty:
                return verdicts
            self._verdict = verdict
            verdicts.append(verdict)
            late = verdict.cost_ms >= self.settings.hangover_ms - SPECULATE_AFTER_MS
            self._late_verdicts = self._late_verdicts + 1 if late else 0
            if self._late_verdicts == LATE_VERDICTS_TO_STOP:
                log.warning(
                    "the end-of-turn model took longer than the fixed hangover leaves it %d times in a row "
                    "(the last %.0f ms): it is not asked again until a restart, and pauses get the fixed "
                    "hangover",
                    LATE_VERDICTS_TO_STOP,
                    verdict.cost_ms,
                )

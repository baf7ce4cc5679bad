"""The replying stage: an answer's sentences become sound on the speaker, and a reply is held,
resumed or cut when the visitor talks over it.

It owns the `speech` thread, which synthesizes a reply sentence by sentence (an LLM's as its
sentences stream in) and hands the chunks to the speaker. The other stages act on the reply only
through this object's methods, which go through the one `TurnState` (device/conversation/turn_state.py):
the turns thread starts and cuts replies, the feeding thread holds them the moment the visitor talks.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from device.conversation.speech_out import SpeechOut, unsaid
from device.conversation.turn import Turn, TurnBook
from device.conversation.turn_state import TurnState
from device.messages import Interrupt, ReplyPaused, ReplyResumed
from device.sound.speakers import Speaker

log = logging.getLogger(__name__)
CUT_WAIT_S = 5.0  # a cut reply's speech thread ends within this (it stops at the next block)


class Replying:
    def __init__(self, speech: SpeechOut, speaker: Speaker, book: TurnBook, observer: Callable[[object], None]) -> None:
        self.speech = speech
        self.speaker = speaker
        self.state: TurnState[Turn] = TurnState()
        self._book = book
        self._observer = observer
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="speech")

    def start(self, turn: Turn, cancel: threading.Event) -> bool:
        """Start speaking `turn`'s answer unless a reply is already going (check and start are one step);
        `cancel` (which the answer's stream, if any, already watches) is what an interruption sets."""
        if not self.state.start(turn, cancel, self.speaker.busy):
            return False
        self._pool.submit(self._reply, turn, cancel)
        return True

    def say_phrase(self, phrase: str) -> None:
        """Queue `phrase` on the speaker at once, not as a turn (the start-up phrase)."""
        for chunk in list(self.speech.chunks(0, [phrase], threading.Event())):
            self._observer(chunk)
            self.speaker.play(chunk)

    def hold(self, why: str) -> Turn | None:
        """The visitor talks over the reply: it is held now (a fade, the mouth closes); its turn, if this held it."""
        turn = self.state.pause()
        if turn is None:
            return None
        self.speaker.hold()
        self._observer(ReplyPaused(turn.id))
        self._book.count("barge-in: paused a reply")
        log.info(
            "turn %d: the visitor talks over the reply (%s); paused %.2f s into it",
            turn.id,
            why,
            self.speaker.played / self.speaker.sample_rate,
        )
        return turn

    def resume(self) -> None:
        """What held the reply was no question: it goes on."""
        speaking = self.state.resume()
        self.speaker.resume()
        if speaking is not None:
            self._observer(ReplyResumed(speaking.id))

    def interrupt(self, message: Interrupt) -> None:
        """End the reply now (its speech thread stops at the next block, the speaker drops what it has)."""
        log.info("interrupt: %s", message.reason)
        self.state.cancel()
        self.speaker.stop()
        self._observer(message)

    def cut(self, message: Interrupt) -> Turn | None:
        """End the reply for good and wait until its speech thread and the speaker are done with it;
        the turn that was cut, if one was speaking."""
        cut = self.state.speaking_turn
        self.interrupt(message)
        self.state.wait_finished(CUT_WAIT_S)
        self.speaker.wait_idle(CUT_WAIT_S)  # the speaker drops its blocks on its own thread
        return cut

    def close(self) -> None:
        self.state.cancel()
        self.speaker.stop()
        self.speech.stop_preparing()

    def join(self) -> None:
        self._pool.shutdown(wait=True)

    # --- the speech thread -------------------------------------------------------------------

    def _reply(self, turn: Turn, cancel: threading.Event) -> None:
        try:
            for chunk in self.speech.chunks(turn.id, turn.answer.sentences(), cancel):
                if cancel.is_set():
                    break
                if not turn.chunks:
                    turn.timings.first_chunk = time.monotonic()
                self.speaker.play(chunk)
                self._observer(chunk)
                if not turn.chunks:
                    turn.timings.first_audio = time.monotonic()
                turn.chunks.append(chunk)
            while self.speaker.busy and not cancel.is_set():
                self.speaker.wait_idle(0.05)
            turn.interrupted = cancel.is_set()
            if turn.interrupted:
                self._record_cut(turn)
        except Exception:  # say so: a reply that cannot be spoken must not vanish without a word
            turn.ignored = "could not be spoken"
            log.exception("turn %d: the reply %r could not be spoken", turn.id, turn.answer.spoken[:200])
        finally:
            self.state.finished(turn)
            self._book.finish(turn)
            _log_reply(turn)

    def _record_cut(self, turn: Turn) -> None:
        """How much of an interrupted reply was played, and its text from the first sentence not played whole."""
        played = self.speaker.played
        turn.played_s = round(played / self.speaker.sample_rate, 2)
        fixed = turn.answer.reply is None  # else an LLM's stream: only what came is known
        turn.unsaid = unsaid(turn.chunks, played, turn.answer.text if fixed else None)
        log.info("turn %d cut after %.1f s of its reply; not said: %r", turn.id, turn.played_s, turn.unsaid[:80])


def _log_reply(turn: Turn) -> None:
    ms = turn.timings.stages_ms()
    log.info(
        "turn %d: %r -> %s (%.2f, %s) answered in %s ms%s",
        turn.id,
        turn.transcript,
        turn.answer.intent,
        turn.answer.score,
        turn.answer.source,
        ms["turn"],
        ", interrupted" if turn.interrupted else "",
        extra={
            "TURN_ID": turn.id,
            "INTENT": turn.answer.intent,
            "STAGE": "reply",
            "LATENCY_MS": ms["turn"],
            "ASR_MS": ms["asr"],
        },
    )

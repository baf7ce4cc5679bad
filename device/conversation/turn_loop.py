"""The turn loop: microphone audio in; transcripts, answers, reply audio and timings out.

`Conversation` wires three stages, each the owner of its thread and its state, which pass each other
turns and messages (docs/developer/architecture.md):
- listening (device/conversation/listening.py), on the thread that feeds the microphone: echo
  canceller, VAD, endpointer and the work of each pause (recognition started speculatively at a short
  silence, on the `asr` thread; the end-of-turn model's verdict, on `end-of-turn`); it holds a reply
  the moment the visitor talks over it;
- turns (device/conversation/answering.py), on `turns`: transcript -> dialogue -> reply, a visitor
  going on with their question (rejoin), what an utterance said over a reply does to it;
- replying (device/conversation/replying.py), on `speech`: sentences -> synthesis -> speaker, and the
  reply held, resumed or cut.
How long a pause ends a turn is the turn-taking policies' call (device/conversation/turn_taking.py).
The reply those threads act on, and the phase `status` shows, are kept by one `TurnState`
(device/conversation/turn_state.py); the turns by one `TurnBook` (device/conversation/turn.py).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from engines.runner import Runner

from device.conversation.answering import Answering
from device.conversation.dialogue import Answer, Dialogue
from device.conversation.endpointer import EndpointSettings
from device.conversation.listening import Listening
from device.conversation.replying import Replying
from device.conversation.speech_out import SpeechOut
from device.conversation.turn import KEEP_TURNS, TurnBook
from device.conversation.turn_state import Phase
from device.messages import Interrupt, TurnTimings, Utterance
from device.models.asr import SpeechRecognizer
from device.models.end_of_turn import EndOfTurnDetector
from device.models.vad import VoiceActivityDetector
from device.settings import BargeInSettings
from device.sound.echo_canceller import EchoCanceller
from device.sound.speakers import Speaker


class Conversation:
    def __init__(
        self,
        vad: VoiceActivityDetector,
        asr: SpeechRecognizer,
        dialogue: Dialogue,
        speech: SpeechOut,
        speaker: Speaker,
        endpoint: EndpointSettings,
        heartbeat: Callable[[], None] = lambda: None,
        observer: Callable[[object], None] = lambda message: None,
        keep_turns: int | None = KEEP_TURNS,
        end_of_turn: EndOfTurnDetector | None = None,
        bargein: BargeInSettings | None = None,
        echo: EchoCanceller | None = None,
    ) -> None:
        """`heartbeat` is called by the turns thread at least every second while it is alive;
        `observer` sees the messages the avatar follows (SpeechStarted, Utterance, ReplyChunk,
        ReplyPaused, ReplyResumed, Interrupt), from whichever thread made them. Without `end_of_turn`
        every pause gets the fixed hangover; without `bargein` (or with it disabled) a reply is not
        paused by speech; `echo` cleans the microphone's audio before the VAD,
        with the speaker's blocks as its far end."""
        self.vad, self.asr, self.dialogue, self.speech, self.speaker = vad, asr, dialogue, speech, speaker
        self.end_of_turn = end_of_turn
        self.bargein = bargein if bargein is not None and bargein.enabled else None
        self.echo = echo
        if echo is not None:
            speaker.taps.append(echo.played)
        self.book = TurnBook(keep_turns)
        self.turns = self.book.turns
        self._recognition = ThreadPoolExecutor(1, thread_name_prefix="asr")
        self.replying = Replying(speech, speaker, self.book, observer)
        self.answering = Answering(
            asr,
            self._recognition,
            dialogue,
            self.replying,
            self.book,
            endpoint.max_utterance_s,
            self.bargein,
            heartbeat,
        )
        self.listening = Listening(
            vad,
            endpoint,
            (asr, self._recognition),
            end_of_turn,
            self.answering,
            self.replying,
            self.book,
            observer,
            self.bargein,
            echo,
        )
        self.answering.start()

    def feed(self, audio: np.ndarray, captured_at: float | None = None, on_axis_db: float | None = None) -> None:
        """SPEECH_RATE mono float32 microphone audio as it arrives, in blocks of any length (a sound card's
        10 ms blocks, or FRAME-sample frames); `captured_at`: the sound card's time of its first sample (ADC
        time), when it gives one (the echo canceller places the far end by it); `on_axis_db`: from a
        microphone array, how much of the frame came from where its beam points (the endpointer's
        Endpointer.push). A sound over a reply is judged on each 10 ms block as it comes; the VAD and the
        endpointer get whole FRAMEs."""
        self.listening.feed(audio, captured_at, on_axis_db)

    def finish_pause_work(self) -> None:
        """Wait until the current pause's recognition, its words' judgement and the end-of-turn verdict
        are done (the feeding thread, between frames). Audio played faster than a microphone outruns
        them, and every pause would end on the fixed hangover; waiting gives each the next frame, as
        a live conversation on a machine fast enough for them has it."""
        self.listening.finish_pause_work()

    def warm_up(self, phrase: str) -> None:
        """Say `phrase` once at the start, the microphone already running: the echo canceller learns the
        room from it, so the first visitor's reply is not the first it hears (a fresh AEC3 leaves enough
        echo for that reply to pause itself at loud echo; docs/lab/bargein.md). Not a turn; the microphone
        is cleaned but not listened to until the phrase and its echo are over."""
        if self.echo is None or not phrase:
            return
        self.listening.saying_phrase = True  # nobody is listened to from now, while the phrase is made
        try:
            self.replying.say_phrase(phrase)
            self.listening.phrase_queued()  # the speaker is busy by now
        finally:
            self.listening.saying_phrase = False

    @property
    def heard_samples(self) -> int:
        """Microphone samples listened to so far: where the next frame's sample positions start (the
        start-up phrase's frames are not counted)."""
        return self.listening.heard_samples

    @property
    def warming_up(self) -> bool:
        """The start-up phrase or its echo is still in the microphone: nobody is listened to."""
        return self.listening.warming_up

    def announce(self, intent: str, text: str) -> bool:
        """Say `text` unprompted (a greeting when a visitor arrives); False if the robot is busy."""
        if self.replying.state.replying or self.speaker.busy:
            return False
        now = time.monotonic()
        silence = Utterance(np.zeros(0, np.float32), 0, 0, 0, 0)
        timings = TurnTimings(0, speech_end=now, endpoint=now, asr_done=now, dialogue_done=now)
        turn = self.book.open(silence, timings, Answer(intent, 1.0, text, "perception"))
        if not self.replying.start(turn, threading.Event()):
            turn.ignored = "busy speaking"
            self.book.finish(turn)
            return False
        return True

    def tally(self) -> dict[str, int]:
        """Turns finished since the start: answered, and ignored by reason (for status and the soak bench)."""
        return self.book.tally()

    def new_visit(self) -> None:
        """A visitor arrived (from any thread): the dialogue starts a new visit's memory."""
        self.answering.new_visit()

    def set_listening(self, listening: bool) -> None:
        """Answer visitors (True), or nobody until a visitor is engaged (False); from any thread."""
        (self.answering.listening.set if listening else self.answering.listening.clear)()

    def runners(self) -> dict[str, Runner]:
        """Each model's runner, for reports of which backend serves it."""
        runners = {
            "vad": self.vad.runner,
            "asr-encoder": self.asr.encoder,
            "asr-decoder": self.asr.decoder,
            "tts": self.speech.tts.front,
            "tts-vocoder": self.speech.tts.vocoder,
            "text": self.dialogue.encoder.runner,
        }
        return runners | ({"end-of-turn": self.end_of_turn.runner} if self.end_of_turn is not None else {})

    def idle(self) -> bool:
        """No utterance being heard, recognised or answered, and the speaker silent."""
        return self.phase() == Phase.IDLE and not self.speaker.busy

    def phase(self) -> Phase:
        """Idle, listening, thinking, speaking or interrupted (for status), from any thread."""
        answering = self.answering.waiting or not self.book.all_done()
        return self.replying.state.phase(hearing=self.listening.endpointer.speaking, answering=answering)

    def interrupt(self, message: Interrupt) -> None:
        """End the reply being spoken (from any thread)."""
        self.replying.interrupt(message)

    def close(self) -> None:
        """Stop now: the reply being spoken is cut (a SIGTERM must not wait for it), the cache stops filling."""
        self.replying.close()
        self.answering.stop()
        self._recognition.shutdown(wait=True)
        self.listening.close()
        self.replying.join()

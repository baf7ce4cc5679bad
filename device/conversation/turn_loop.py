"""The turn loop: microphone audio in; transcripts, answers, reply audio and timings out.

Threads and what each owns:
- the caller feeds microphone audio as it arrives (`feed`, 10 ms blocks or 32 ms frames): the echo
  canceller and the sound onset run there on each block, the VAD and the endpointer on each whole
  frame (well under 1 ms a frame), so nothing heavy ever sits in the capture path;
- `asr`: one recognition at a time, started speculatively at a short silence after speech so it
  runs while the hangover elapses; a result whose audio the visitor then extended is dropped;
- `end-of-turn`: the end-of-turn model's verdict on that same pause, sent back to the caller's
  thread as a message (the endpointer has one owner) to shorten or lengthen the hangover (a pause's
  work: device/conversation/pause_work.py);
- `turns`: waits for each utterance's transcript (words it is unsure of are heard again from the
  speech alone, device/conversation/speech_alone.py), asks the dialogue (which it owns: a new visit
  is a message in its queue too), starts the reply;
- `speech`: synthesizes the reply sentence by sentence (an LLM's as its sentences stream in) and
  hands chunks to the speaker.

Barge-in: the microphone's audio first loses the robot's own voice (the echo canceller, whose far
end is what the speaker plays). A sound starting over a reply (`sound_onset_db`,
device/conversation/sound_onset.py) or `min_speech_ms` of visitor speech (`speech_over_room_db` louder
than the room during replies, device/conversation/reply_room.py: a hall's talk is speech too) pauses
it at once (the feeding thread holds the speaker: a fade, the mouth closes), unless the canceller is
settling (its far end just came back from silence, or was lost: it may let echo through); a sound no
utterance follows lets it go on. The utterance that paused it ends only after `hold_hangover_ms` of silence
(a question with a
pause is heard whole) unless its words so far are a backchannel; the turns thread, once the
utterance is recognised, lets a cough or a backchannel ("mm-hm") resume the reply, or cuts the
reply (what was played is recorded; "repeat that" says the rest) and answers the new question.
A visitor who goes on within `rejoin_within_ms` of the end of what they said (they only paused;
device/conversation/rejoin.py) is heard with it: the reply to the first half is cut, unless it
answers the whole question too, and the whole is answered. Without barge-in, while the robot
speaks only "stop" is acted on. The reply those threads act on, and the phase `status` shows, are
kept by one `TurnState` (device/conversation/turn_state.py).
"""

from __future__ import annotations

import collections
import logging
import queue
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from engines.model_specs import FRAME, SPEECH_RATE
from engines.runner import Runner

from device.conversation.dialogue import STOP, Answer, Dialogue
from device.conversation.endpointer import Endpointer, EndpointSettings
from device.conversation.pause_words import Words
from device.conversation.pause_work import PauseWork
from device.conversation.rejoin import heard_together, resumes
from device.conversation.reply_room import ReplyRoom
from device.conversation.sound_onset import SoundOnset
from device.conversation.speech_alone import surer_words
from device.conversation.speech_out import SpeechOut, unsaid
from device.conversation.turn_state import Phase, TurnState
from device.messages import (
    EndOfTurnVerdict,
    Interrupt,
    ReplyChunk,
    ReplyPaused,
    ReplyResumed,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    TurnTimings,
    Utterance,
)
from device.models.asr import RecognitionStopped, SpeechRecognizer, Transcript
from device.models.end_of_turn import EndOfTurnDetector
from device.models.vad import VoiceActivityDetector
from device.settings import BargeInSettings
from device.sound.echo_canceller import EchoCanceller
from device.sound.speakers import Speaker

log = logging.getLogger(__name__)
NEW_VISIT = "new visit"  # the turns thread's message: a visitor arrived, the dialogue forgets the last visit
KEEP_TURNS = 10  # turns kept (with their reply audio) for status, which shows them; None: every turn (demo, bench)
# Said over a reply, these keep it going: listeners' acknowledgements, not questions.
BACKCHANNELS = frozenset(
    "mm hm hmm mhm mmhmm mmhm uh huh uhhuh aha ah oh okay ok yeah yes yep right sure alright "
    "i see wow cool nice great".split()
)
CUT_WAIT_S = 5.0  # a cut reply's speech thread ends within this (it stops at the next block)
# A reply a sound paused (before the VAD heard speech) goes on unless an utterance starts within this:
# once the reply is silent the VAD hears the visitor's words without the echo, in 100-300 ms.
SOUND_CONFIRM_MS = 480
# Without the start-up phrase, a sound pauses a reply only once the echo canceller has had this much
# playback: on its first reply AEC3 leaves 25-32 dB of echo (from the second on, 36 dB rising to 55),
# and in the daemon's echo-room test what it let through started a sound 0.86 s into the first reply.
# The phrase teaches it the room before the first reply (47-66 dB on it), so after the phrase a sound
# pauses any reply.
SOUND_AFTER_PLAYBACK_S = 12.0
# After the start-up phrase has played, the microphone is listened to once its echo has died away.
WARM_UP_TAIL_S = 0.5


@dataclass
class Turn:
    """Everything about one visitor utterance and the robot's reply."""

    id: int
    utterance: Utterance
    timings: TurnTimings
    transcript: str = ""
    answer: Answer | None = None
    chunks: list[ReplyChunk] = field(default_factory=list)
    end_of_turn: EndOfTurnVerdict | None = None  # the verdict that ended it, if one did
    pause_words: Words | None = None  # what the words before the pause that ended it were, if judged
    ignored: str = ""  # why no reply was given, if none was
    interrupted: bool = False
    barged_in: bool = False  # heard over a reply, which it paused
    rejoined: bool = (
        False  # it went on with the utterance before it: `utterance` and its transcript are the whole question
    )
    played_s: float | None = None  # of the reply, when it was cut
    unsaid: str = ""  # the reply's text not (wholly) played when it was cut
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def reply_audio(self) -> np.ndarray:
        return np.concatenate([c.audio for c in self.chunks]) if self.chunks else np.zeros(0, np.float32)


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
        self.vad = vad
        self.asr = asr
        self.dialogue = dialogue
        self.speech = speech
        self.speaker = speaker
        self.endpointer = Endpointer(endpoint, judged=end_of_turn is not None)
        self.end_of_turn = end_of_turn
        self.bargein = bargein if bargein is not None and bargein.enabled else None
        self.echo = echo
        if echo is not None:
            speaker.taps.append(echo.played)
        self._barge_frames = (
            max(endpoint.frames(bargein.min_speech_ms), endpoint.frames(endpoint.onset_ms)) if self.bargein else 0
        )
        self._speech_run = 0  # consecutive speech frames (feeding thread)
        self._barging = False  # the utterance being heard paused a reply (feeding thread)
        self._room = ReplyRoom()  # the echo-cancelled microphone's level during replies (feeding thread)
        self._sound = SoundOnset(bargein.sound_onset_db) if self.bargein and bargein.sound_onset_db > 0 else None
        self._unconfirmed = 0  # frames since a sound paused the reply and no utterance started (feeding thread)
        self._confirm_frames = endpoint.frames(SOUND_CONFIRM_MS)
        self.state: TurnState[Turn] = TurnState()
        self._sound_after_s = (
            SOUND_AFTER_PLAYBACK_S  # the canceller's playback before a sound may pause a reply (feeding thread)
        )
        self._last_turn: Turn | None = None  # the last utterance's turn, which the next may go on with (feeding thread)
        # The recognition of the last utterance when it was cut at max_utterance_s, and its stop (feeding thread)
        self._cut_off: tuple[Future[Transcript], threading.Event] | None = None
        # The daemon keeps the last turns (for `status`), not every turn of weeks with its reply audio.
        self.turns: collections.deque[Turn] = collections.deque(maxlen=keep_turns)
        self._turn_count = 0
        self._tally: dict[str, int] = {}
        self.heartbeat = heartbeat
        self.observer = observer
        self._listening = threading.Event()  # clear: answer nobody (no visitor engaged and listening is gated)
        self._listening.set()
        self._frame = 0
        self._saying_phrase = False  # the start-up phrase is being made and queued (the thread that calls warm_up)
        self._warm_up_tail = 0  # samples still not listened to after the start-up phrase (feeding thread, once started)
        self._heard = np.zeros(0, np.float32)  # cleaned samples not yet a whole FRAME (feeding thread)
        self._arrivals: collections.deque[float] = collections.deque(
            maxlen=endpoint.frames(endpoint.max_utterance_s * 1000) + 64
        )
        self._asr_pool = ThreadPoolExecutor(1, thread_name_prefix="asr")
        self._pause_work = PauseWork(
            asr, self._asr_pool, self.endpointer, dialogue.knows, end_of_turn
        )  # (feeding thread)
        self._speech_pool = ThreadPoolExecutor(1, thread_name_prefix="speech")
        # (the turn, its recognition, the turn it began soon enough after to go on with) or NEW_VISIT, or None: stop
        self._pending: queue.Queue[tuple[Turn, Future[Transcript], Turn | None] | str | None] = queue.Queue()
        self._lock = threading.Lock()  # turn numbering and the tally
        self._turn_thread = threading.Thread(target=self._turns, name="turns", daemon=True)
        self._turn_thread.start()

    # --- the caller's side: microphone audio in ----------------------------------------------

    def feed(self, audio: np.ndarray, captured_at: float | None = None, on_axis_db: float | None = None) -> None:
        """SPEECH_RATE mono float32 microphone audio as it arrives, in blocks of any length (a sound card's
        10 ms blocks, or FRAME-sample frames); `captured_at`: the sound card's time of its first sample (ADC
        time), when it gives one (the echo canceller places the far end by it); `on_axis_db`: from a
        microphone array, how much of the frame came from where its beam points (the endpointer's
        Endpointer.push). A sound over a reply is judged on each 10 ms block as it comes; the VAD and the
        endpointer get whole FRAMEs."""
        arrived = time.monotonic()
        if self.echo is not None:
            audio = self.echo.clean(audio, captured_at)
        if self.warming_up:  # not on the conversation's timeline: its frames start after the phrase
            self._room.hear(self.echo.newest, learn=self.speaker.busy)  # the room's level starts on the phrase
            if self._warm_up_tail > 0 and not self.speaker.busy:
                self._warm_up_tail = max(0, self._warm_up_tail - len(audio))
                if not self._warm_up_tail:
                    self._sound_after_s = 0.0  # the canceller has learnt the room on the phrase
            return
        if self.bargein is not None:
            self._listen_for_sound(self.echo.newest if self.echo is not None else audio)  # a sound's start 10 ms sooner
        self._heard = np.concatenate([self._heard, audio]) if len(self._heard) else audio
        while len(self._heard) >= FRAME:
            frame, self._heard = self._heard[:FRAME], self._heard[FRAME:]
            self._hear_frame(frame, arrived, on_axis_db)

    def _listen_for_sound(self, newest: np.ndarray) -> None:
        """The room's level learnt on the canceller's newest blocks while a reply plays, and a sound
        starting on them pauses it (not while the canceller settles: it may let echo through)."""
        settling = self.echo is not None and self.echo.settling
        blocks = self._room.hear(newest, learn=self.state.replying and not self.speaker.held and not settling)
        if self._sound is not None and self._sound.push(blocks, judged=not settling and self._echo_settled()):
            self._pause_reply(by_speech=False)

    def _hear_frame(self, frame: np.ndarray, arrived: float, on_axis_db: float | None) -> None:
        """One FRAME of the cleaned microphone: the VAD, barge-in by speech, the endpointer."""
        self._arrivals.append(arrived)
        self._frame += 1
        probability = self.vad.probability(frame)
        events = self._pause_work.events()
        if self.bargein is not None:
            settling = self.echo is not None and self.echo.settling
            self._watch_for_speech(self._speech_over_room(frame, probability) and not settling)
            if self._barging:
                self.endpointer.wait_longer(self._held_pause_ms())
        for event in events + self.endpointer.push(
            frame, probability, over_floor=not self.state.replying, on_axis_db=on_axis_db
        ):
            if isinstance(event, (SpeechStarted, Utterance)):
                self.observer(event)
            if isinstance(event, SpeechPaused):
                self._pause_work.start(event)
            elif isinstance(event, SpeechResumed):
                self._pause_work.drop()
            elif isinstance(event, Utterance):
                self._submit(event)
        if self._unconfirmed:
            self._confirm_sound()

    def finish_pause_work(self) -> None:
        """Wait until the current pause's recognition, its words' judgement and the end-of-turn verdict
        are done (the feeding thread, between frames). Audio played faster than a microphone outruns
        them, and every pause would end on the fixed hangover; waiting gives each the next frame, as
        a live conversation on a machine fast enough for them has it."""
        wait(self._pause_work.pending())

    def _watch_for_speech(self, speech: bool) -> None:
        """Enough speech over a reply (already left out while the canceller settles) pauses it now; so
        does a reply that starts while the visitor talks (they went on after a pause)."""
        self._speech_run = self._speech_run + 1 if speech else 0
        if self._speech_run >= self._barge_frames:  # a reply held already stays as it is (TurnState.pause)
            self._pause_reply(by_speech=True)

    def _pause_reply(self, by_speech: bool) -> None:
        """Speech or a sound over the reply: hold it now; the turns thread decides what follows once the
        utterance is recognised (a sound no utterance follows lets it go on: `_confirm_sound`)."""
        turn = self.state.pause()
        if turn is None:
            return
        self.speaker.hold()
        self._barging = True
        self._unconfirmed = 0 if by_speech or self.endpointer.speaking else 1
        self.observer(ReplyPaused(turn.id))
        self._count("barge-in: paused a reply")
        log.info(
            "turn %d: the visitor talks over the reply (%s); paused %.2f s into it",
            turn.id,
            "speech" if by_speech else "a sound",
            self.speaker.played / self.speaker.sample_rate,
        )

    def _speech_over_room(self, frame: np.ndarray, probability: float) -> bool:
        """Speech (the VAD's) that is louder than the room during replies: a hall's talk is speech too,
        and in talk 10 dB under the visitor, without this it paused up to 10 of 16 replies (docs/lab/bargein.md)."""
        margin = self.bargein.speech_over_room_db
        return probability >= self.endpointer.settings.vad_threshold and (
            margin == 0 or self._room.louder(frame, margin)
        )

    def _echo_settled(self) -> bool:
        return self.echo is None or self.echo.far_end_s >= self._sound_after_s

    def _confirm_sound(self) -> None:
        """A sound paused the reply: an utterance starting keeps it paused (the turns thread decides, as
        for speech); none within SOUND_CONFIRM_MS (a knock, a cough the VAD does not take for speech)
        lets the reply go on."""
        if self.endpointer.speaking:
            self._unconfirmed = 0
        elif self._unconfirmed < self._confirm_frames:
            self._unconfirmed += 1
        else:
            self._unconfirmed, self._barging = 0, False
            self._unpause()
            self._count("barge-in: a sound, not speech")
            log.info("the sound that paused the reply was not speech; it goes on")

    def _held_pause_ms(self) -> int:
        """The silence that ends the utterance holding a reply: `hold_hangover_ms`, so a question with a
        pause is heard whole, unless the words before this pause (the speculative recognition's) are a
        backchannel ("mm-hm"): then the usual hangover, and the reply goes on sooner. (Not when no word
        was recognised: double talk can leave a question's first words unrecognisable.)"""
        text = self._pause_work.words_so_far()
        if text is None:
            return self.bargein.hold_hangover_ms
        return 0 if _words(text) and _backchannel(text) else self.bargein.hold_hangover_ms

    def warm_up(self, phrase: str) -> None:
        """Say `phrase` once at the start, the microphone already running: the echo canceller learns the
        room from it, so the first visitor's reply is not the first it hears (a fresh AEC3 leaves enough
        echo for that reply to pause itself at loud echo; docs/lab/bargein.md). Not a turn; the microphone
        is cleaned but not listened to until the phrase and its echo are over."""
        if self.echo is None or not phrase:
            return
        self._saying_phrase = True  # nobody is listened to from now, while the phrase is made
        try:
            for chunk in list(self.speech.chunks(0, [phrase], threading.Event())):
                self.observer(chunk)
                self.speaker.play(chunk)
            self._warm_up_tail = int(WARM_UP_TAIL_S * SPEECH_RATE)  # the speaker is busy by now
        finally:
            self._saying_phrase = False

    @property
    def heard_samples(self) -> int:
        """Microphone samples listened to so far: where the next frame's sample positions start (the
        start-up phrase's frames are not counted)."""
        return self._frame * FRAME

    @property
    def warming_up(self) -> bool:
        """The start-up phrase or its echo is still in the microphone: nobody is listened to."""
        return self._saying_phrase or self._warm_up_tail > 0

    def announce(self, intent: str, text: str) -> bool:
        """Say `text` unprompted (a greeting when a visitor arrives); False if the robot is busy."""
        if self.state.replying or self.speaker.busy:
            return False
        now = time.monotonic()
        with self._lock:
            turn = self._new_turn(
                Utterance(np.zeros(0, np.float32), 0, 0, 0, 0),
                TurnTimings(0, speech_end=now, endpoint=now, asr_done=now, dialogue_done=now),
            )
            turn.answer = Answer(intent, 1.0, text, "perception")
        if not self._start_reply(turn, threading.Event()):
            turn.ignored = "busy speaking"
            self._finish(turn)
            return False
        return True

    def tally(self) -> dict[str, int]:
        """Turns finished since the start: answered, and ignored by reason (for status and the soak bench)."""
        with self._lock:
            return dict(self._tally)

    def _finish(self, turn: Turn) -> None:
        self._count(f"ignored: {turn.ignored}" if turn.ignored else "interrupted" if turn.interrupted else "answered")
        turn.done.set()

    def _count(self, key: str) -> None:
        with self._lock:
            self._tally[key] = self._tally.get(key, 0) + 1

    def new_visit(self) -> None:
        """A visitor arrived (from any thread): the dialogue starts a new visit's memory."""
        self._pending.put(NEW_VISIT)

    def set_listening(self, listening: bool) -> None:
        """Answer visitors (True), or nobody until a visitor is engaged (False); from any thread."""
        (self._listening.set if listening else self._listening.clear)()

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
        answering = not self._pending.empty() or not all(t.done.is_set() for t in list(self.turns))
        return self.state.phase(hearing=self.endpointer.speaking, answering=answering)

    def interrupt(self, message: Interrupt) -> None:
        log.info("interrupt: %s", message.reason)
        self.state.cancel()
        self.speaker.stop()
        self.observer(message)

    def close(self) -> None:
        """Stop now: the reply being spoken is cut (a SIGTERM must not wait for it), the cache stops filling."""
        self.state.cancel()
        self.speaker.stop()
        self.speech.stop_preparing()
        self._pending.put(None)
        self._turn_thread.join(timeout=30)
        self._asr_pool.shutdown(wait=True)
        self._pause_work.close()
        self._speech_pool.shutdown(wait=True)

    def _submit(self, utterance: Utterance) -> None:
        now = time.monotonic()
        timings = TurnTimings(0, endpoint=now, speech_end=self._arrival_of(utterance.speech_end // FRAME - 1))
        outcome, stop = self._pause_work.take(utterance), threading.Event()
        if outcome.heard is not None:
            future, timings.speculative_hit = outcome.heard, True
        else:
            future = self._asr_pool.submit(self.asr.transcribe, utterance.audio, stop)
        self._give_way(utterance, future, stop)
        with self._lock:
            turn = self._new_turn(utterance, timings)
        turn.barged_in, self._barging = self._barging, False
        last, self._last_turn = self._last_turn, turn
        follows = (
            last
            if self.bargein is not None
            and last is not None
            and resumes(last.utterance.speech_end, utterance.speech_start, self.endpointer.settings.rejoin_within_ms)
            else None
        )
        turn.end_of_turn, turn.pause_words = outcome.verdict, outcome.words
        self._pending.put((turn, future, follows))

    def _give_way(self, utterance: Utterance, future: Future[Transcript], stop: threading.Event) -> None:
        """A monologue cut at max_utterance_s (babble in a loud hall, mostly) whose recognition is still
        running stops for the utterance after it: its recognition takes about a third of its length
        on the one recognition thread (60 s of babble held the next question 18 s)."""
        if self._cut_off is not None and not self._cut_off[0].done():
            self._cut_off[1].set()
        self._cut_off = (future, stop) if utterance.truncated else None

    def _new_turn(self, utterance: Utterance, timings: TurnTimings) -> Turn:
        """Numbered in order, whichever thread (microphone, perception) makes it; under self._lock."""
        self._turn_count += 1
        timings.turn = self._turn_count
        turn = Turn(timings.turn, utterance, timings)
        self.turns.append(turn)
        return turn

    def _start_reply(self, turn: Turn, cancel: threading.Event) -> bool:
        """Start speaking `turn`'s answer unless a reply is already going (check and start are one step);
        `cancel` (which the answer's stream, if any, already watches) is what an interruption sets."""
        if not self.state.start(turn, cancel, self.speaker.busy):
            return False
        self._speech_pool.submit(self._reply, turn, cancel)
        return True

    def _arrival_of(self, frame: int) -> float:
        back = self._frame - 1 - frame
        return self._arrivals[-1 - back] if 0 <= back < len(self._arrivals) else self._arrivals[0]

    # --- the turns thread --------------------------------------------------------------------

    def _turns(self) -> None:
        while True:
            self.heartbeat()
            try:
                item = self._pending.get(timeout=1.0)
            except queue.Empty:
                continue
            if item is None:
                return
            if item == NEW_VISIT:
                self.dialogue.new_visit()
                continue
            turn, future, follows = item
            try:
                self._take_turn(turn, future, follows)
            except Exception:  # one bad turn must not end the conversation
                log.exception("turn %d failed", turn.id)
                if turn.barged_in:
                    self._unpause()  # a paused reply must not stay paused
                turn.ignored = "error"
                self._finish(turn)

    def _take_turn(self, turn: Turn, future: Future[Transcript], follows: Turn | None) -> None:
        try:
            heard = future.result()
        except RecognitionStopped:
            turn.ignored = "cut off and talked over"
            self._finish(turn)
            log.info("turn %d: a monologue cut at its maximum length gave way to the next utterance", turn.id)
            return
        turn.transcript = surer_words(heard.text, turn.utterance, self._transcribe, self.dialogue)
        turn.timings.asr_done = time.monotonic()
        rejoined = follows is not None and self._rejoined(turn, follows)
        if rejoined and self.state.speaking_turn is follows:
            if not self._answers_whole(turn, follows):
                return
        elif turn.barged_in and not self._barge_in_wins(turn):
            return
        if not turn.transcript:
            turn.ignored = "no words recognised"
            self._finish(turn)
            return
        cancel = threading.Event()
        answer = self.dialogue.answer(turn.transcript, cancel)
        turn.answer = answer
        turn.timings.dialogue_done = time.monotonic()  # of an LLM's reply: its first word is in
        if not self._listening.is_set() and answer.intent != STOP:
            turn.ignored = "no visitor engaged"
            self._finish(turn)
        elif answer.intent == STOP:
            self.interrupt(Interrupt("the visitor asked to stop"))
            self._finish(turn)
        elif not self._start_reply(turn, cancel):
            turn.ignored = "heard while speaking"
            self._finish(turn)
        else:
            return
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
            self.endpointer.settings.max_utterance_s,
            self.dialogue.decide,
            self._transcribe,
        )
        if heard is None:
            return False
        turn.utterance, turn.transcript = heard
        turn.timings.asr_done, turn.rejoined = time.monotonic(), True
        log.info("turn %d goes on with turn %d: %r", turn.id, first.id, turn.transcript)
        self._count("rejoined a question")
        return True

    def _transcribe(self, audio: np.ndarray) -> str:
        """Words of `audio`, recognised on the recognition thread (one recognizer, one thread at a time)."""
        return self._asr_pool.submit(self.asr.transcribe, audio).result().text

    def _answers_whole(self, turn: Turn, first: Turn) -> bool:
        """The reply to `first` (the first half) goes on if it answers the whole question too (False);
        else it is cut, and not kept for "repeat that" (it answered half a question), and the whole is answered."""
        said = first.answer
        answered = said is not None and said.source in ("knowledge", "builtin")
        if answered and self.dialogue.decide(turn.transcript).intent == said.intent:
            self._resume(turn, "the rest of the question it answers")
            return False
        self._cut_reply(Interrupt("the visitor had not finished their question"), keep_unsaid=False)
        return True

    def _barge_in_wins(self, turn: Turn) -> bool:
        """An utterance that paused a reply: a cough, a backchannel, or a short utterance the dialogue cannot
        place (a mis-heard "mm-hm") lets the reply go on (False); anything else (a question, "stop") ends
        the reply, which is then answered as a turn of its own (True)."""
        if _backchannel(turn.transcript):
            self._resume(turn, "a backchannel")
            return False
        speech_ms = turn.utterance.seconds * 1000
        decision = self.dialogue.decide(turn.transcript)
        if speech_ms < self.bargein.min_question_ms and decision.intent != STOP:
            self._resume(turn, "too short for a question")
            return False
        if speech_ms < self.bargein.sure_question_ms and not self.dialogue.sure(decision):
            self._resume(turn, "short, and not a question the robot knows")
            return False
        self._cut_reply(Interrupt("the visitor talked over the reply"))
        self._count("barge-in: cut a reply")
        return True

    def _resume(self, turn: Turn, why: str) -> None:
        """The utterance said over the reply was not a new question: the reply goes on (if it paused it)."""
        if turn.barged_in:
            self._unpause()
        turn.ignored = f"said over the reply ({why})"
        self._finish(turn)
        log.info("turn %d: %r over the reply: %s, it goes on", turn.id, turn.transcript, why)

    def _unpause(self) -> None:
        speaking = self.state.resume()
        self.speaker.resume()
        if speaking is not None:
            self.observer(ReplyResumed(speaking.id))

    def _cut_reply(self, interrupt: Interrupt, keep_unsaid: bool = True) -> None:
        """End the paused reply for good, wait for its speech thread, and tell the dialogue what was
        not said (for "repeat that"), unless `keep_unsaid` is False."""
        cut = self.state.speaking_turn
        self.interrupt(interrupt)
        self.state.wait_finished(CUT_WAIT_S)
        self.speaker.wait_idle(
            CUT_WAIT_S
        )  # its thread ends on the cancel; the speaker drops its blocks on its own thread
        if cut is not None and cut.unsaid and keep_unsaid:
            self.dialogue.cut_short(cut.unsaid)

    # --- the speech thread -------------------------------------------------------------------

    def _reply(self, turn: Turn, cancel: threading.Event) -> None:
        try:
            for chunk in self.speech.chunks(turn.id, turn.answer.sentences(), cancel):
                if cancel.is_set():
                    break
                if not turn.chunks:
                    turn.timings.first_chunk = time.monotonic()
                self.speaker.play(chunk)
                self.observer(chunk)
                if not turn.chunks:
                    turn.timings.first_audio = time.monotonic()
                turn.chunks.append(chunk)
            turn.interrupted = cancel.is_set()
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
            self._finish(turn)
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

    def _record_cut(self, turn: Turn) -> None:
        """How much of an interrupted reply was played, and its text from the first sentence not played whole."""
        played = self.speaker.played
        turn.played_s = round(played / self.speaker.sample_rate, 2)
        fixed = turn.answer.reply is None  # else an LLM's stream: only what came is known
        turn.unsaid = unsaid(turn.chunks, played, turn.answer.text if fixed else None)
        log.info("turn %d cut after %.1f s of its reply; not said: %r", turn.id, turn.played_s, turn.unsaid[:80])


def _backchannel(transcript: str) -> bool:
    """Nothing but acknowledgements ("mm-hm", "okay", "yeah") or no words at all (a cough)."""
    return all(word in BACKCHANNELS for word in _words(transcript))


def _words(transcript: str) -> list[str]:
    return re.findall(r"[a-z]+", transcript.lower())

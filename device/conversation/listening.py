"""The listening stage: microphone audio in, utterances out, and a reply held the moment the visitor
talks over it.

It runs on the caller's thread, the one that feeds the microphone's audio (`feed`: a sound card's
10 ms blocks or 32 ms frames), and owns everything on that path: the echo canceller's output, the
room's level during replies, the VAD, the endpointer (its owner: nothing else changes it) and the work of each pause
(device/conversation/pause_work.py), whose results come back here as messages. Nothing heavy runs
here: the VAD and the endpointer take well under 1 ms a frame.

Barge-in: the microphone's audio first loses the robot's own voice (the echo canceller, whose far
end is what the speaker plays). A sound starting over a reply (`sound_onset_db`,
device/conversation/sound_onset.py) or `min_speech_ms` of visitor speech (`speech_over_room_db` louder
than the room during replies, device/conversation/reply_room.py: a hall's talk is speech too) holds
it at once, unless the canceller is settling (its far end just came back from silence, or was
lost: it may let echo through); a sound no utterance follows lets it go on. The utterance that held
it ends only after `hold_hangover_ms` of silence (a question with a pause is heard whole) unless its
words so far are a backchannel; the turns stage decides the rest once it is recognised.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Callable

import numpy as np

from engines.model_specs import FRAME, SPEECH_RATE

from device.conversation.answering import Answering
from device.conversation.endpointer import Endpointer, EndpointSettings
from device.conversation.pause_words import WordsJudged, backchannel, spoken_words
from device.conversation.pause_work import PauseWork
from device.conversation.rejoin import resumes
from device.conversation.reply_room import ReplyRoom
from device.conversation.replying import Replying
from device.conversation.sound_onset import SoundOnset
from device.conversation.turn import Turn, TurnBook
from device.messages import SpeechPaused, SpeechResumed, SpeechStarted, TurnTimings, Utterance
from device.models.asr import SpeechRecognizer, Transcript
from device.models.end_of_turn import EndOfTurnDetector
from device.models.vad import VoiceActivityDetector
from device.settings import BargeInSettings
from device.sound.echo_canceller import EchoCanceller

log = logging.getLogger(__name__)
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


class Listening:
    def __init__(
        self,
        vad: VoiceActivityDetector,
        endpoint: EndpointSettings,
        recognition: tuple[SpeechRecognizer, ThreadPoolExecutor],
        end_of_turn: EndOfTurnDetector | None,
        answering: Answering,
        replying: Replying,
        book: TurnBook,
        observer: Callable[[object], None],
        bargein: BargeInSettings | None = None,
        echo: EchoCanceller | None = None,
    ) -> None:
        """`recognition`: the recognizer and the one thread it runs on (the turns stage's too)."""
        self.vad = vad
        self.endpointer = Endpointer(endpoint, judged=end_of_turn is not None)
        self.echo = echo
        self.bargein = bargein
        self._asr, self._recognition = recognition
        self._pause_work = PauseWork(self._asr, self._recognition, endpoint, answering.dialogue.knows, end_of_turn)
        self._answering = answering
        self._replying = replying
        self._book = book
        self._observer = observer
        self._barge_frames = (
            max(endpoint.frames(bargein.min_speech_ms), endpoint.frames(endpoint.onset_ms)) if bargein else 0
        )
        self._speech_run = 0  # consecutive speech frames
        self._barging = False  # the utterance being heard held a reply
        self._room = ReplyRoom()  # the echo-cancelled microphone's level during replies
        self._sound = SoundOnset(bargein.sound_onset_db) if bargein and bargein.sound_onset_db > 0 else None
        self._unconfirmed = 0  # frames since a sound held the reply and no utterance started
        self._confirm_frames = endpoint.frames(SOUND_CONFIRM_MS)
        self._sound_after_s = SOUND_AFTER_PLAYBACK_S  # the canceller's playback before a sound may hold a reply
        self._last_turn: Turn | None = None  # the last utterance's turn, which the next may go on with
        # The recognition of the last utterance when it was cut at max_utterance_s, and its stop
        self._cut_off: tuple[Future[Transcript], threading.Event] | None = None
        self._frame = 0
        self.saying_phrase = False  # the start-up phrase is being made and queued (set by the thread saying it)
        self._warm_up_tail = 0  # samples still not listened to after the start-up phrase
        self._heard = np.zeros(0, np.float32)  # cleaned samples not yet a whole FRAME
        self._arrivals: collections.deque[float] = collections.deque(
            maxlen=endpoint.frames(endpoint.max_utterance_s * 1000) + 64
        )

    def feed(self, audio: np.ndarray, captured_at: float | None = None, on_axis_db: float | None = None) -> None:
        """See Conversation.feed."""
        arrived = time.monotonic()
        if self.echo is not None:
            audio = self.echo.clean(audio, captured_at)
        if self.warming_up:  # not on the conversation's timeline: its frames start after the phrase
            self._room.hear(self.echo.newest, learn=self._replying.speaker.busy)  # the room's level starts on it
            if self._warm_up_tail > 0 and not self._replying.speaker.busy:
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

    def phrase_queued(self) -> None:
        """The start-up phrase is on the speaker: listen again once it and its echo are over."""
        self._warm_up_tail = int(WARM_UP_TAIL_S * SPEECH_RATE)

    @property
    def warming_up(self) -> bool:
        """The start-up phrase or its echo is still in the microphone: nobody is listened to."""
        return self.saying_phrase or self._warm_up_tail > 0

    @property
    def heard_samples(self) -> int:
        return self._frame * FRAME

    def finish_pause_work(self) -> None:
        wait(self._pause_work.pending())

    def close(self) -> None:
        self._pause_work.close()

    def _listen_for_sound(self, newest: np.ndarray) -> None:
        """The room's level learnt on the canceller's newest blocks while a reply plays, and a sound
        starting on them holds it (not while the canceller settles: it may let echo through)."""
        settling = self.echo is not None and self.echo.settling
        replying = self._replying.state.replying and not self._replying.speaker.held
        blocks = self._room.hear(newest, learn=replying and not settling)
        if self._sound is not None and self._sound.push(blocks, judged=not settling and self._echo_settled()):
            self._hold_reply(by_speech=False)

    def _hear_frame(self, frame: np.ndarray, arrived: float, on_axis_db: float | None) -> None:
        """One FRAME of the cleaned microphone: the VAD, barge-in by speech, the endpointer."""
        self._arrivals.append(arrived)
        self._frame += 1
        probability = self.vad.probability(frame)
        events = []
        for news in self._pause_work.news():
            if isinstance(news, WordsJudged):
                events += self.endpointer.heard(news.speech_end, news.words)
            else:
                events += self.endpointer.judge(news)
        if self.bargein is not None:
            settling = self.echo is not None and self.echo.settling
            self._watch_for_speech(self._speech_over_room(frame, probability) and not settling)
            if self._barging:
                self.endpointer.hold_for(self._held_pause_ms())
        replying = self._replying.state.replying
        for event in events + self.endpointer.push(frame, probability, over_floor=not replying, on_axis_db=on_axis_db):
            if isinstance(event, (SpeechStarted, Utterance)):
                self._observer(event)
            if isinstance(event, SpeechPaused):
                self._pause_work.start(event)
            elif isinstance(event, SpeechResumed):
                self._pause_work.drop()
            elif isinstance(event, Utterance):
                self._submit(event)
        if self._unconfirmed:
            self._confirm_sound()

    def _watch_for_speech(self, speech: bool) -> None:
        """Enough speech over a reply (already left out while the canceller settles) holds it now; so
        does a reply that starts while the visitor talks (they went on after a pause)."""
        self._speech_run = self._speech_run + 1 if speech else 0
        if self._speech_run >= self._barge_frames:  # a reply held already stays as it is (TurnState.pause)
            self._hold_reply(by_speech=True)

    def _hold_reply(self, by_speech: bool) -> None:
        """Speech or a sound over the reply: hold it now; the turns stage decides what follows once the
        utterance is recognised (a sound no utterance follows lets it go on: `_confirm_sound`)."""
        if self._replying.hold("speech" if by_speech else "a sound") is None:
            return
        self._barging = True
        self._unconfirmed = 0 if by_speech or self.endpointer.speaking else 1

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
        """A sound held the reply: an utterance starting keeps it held (the turns stage decides, as for
        speech); none within SOUND_CONFIRM_MS (a knock, a cough the VAD does not take for speech) lets
        the reply go on."""
        if self.endpointer.speaking:
            self._unconfirmed = 0
        elif self._unconfirmed < self._confirm_frames:
            self._unconfirmed += 1
        else:
            self._unconfirmed, self._barging = 0, False
            self._replying.resume()
            self._book.count("barge-in: a sound, not speech")
            log.info("the sound that paused the reply was not speech; it goes on")

    def _held_pause_ms(self) -> int:
        """The silence that ends the utterance holding a reply: `hold_hangover_ms`, so a question with a
        pause is heard whole, unless the words before this pause (the speculative recognition's) are a
        backchannel ("mm-hm"): then the usual hangover, and the reply goes on sooner. (Not when no word
        was recognised: double talk can leave a question's first words unrecognisable.)"""
        text = self._pause_work.words_so_far()
        if text is None:
            return self.bargein.hold_hangover_ms
        return 0 if spoken_words(text) and backchannel(text) else self.bargein.hold_hangover_ms

    def _submit(self, utterance: Utterance) -> None:
        """An utterance ended: its turn is opened and goes to the turns stage with its recognition."""
        now = time.monotonic()
        timings = TurnTimings(0, endpoint=now, speech_end=self._arrival_of(utterance.speech_end // FRAME - 1))
        outcome, stop = self._pause_work.take(utterance), threading.Event()
        if outcome.heard is not None:
            heard, timings.speculative_hit = outcome.heard, True
        else:
            heard = self._recognition.submit(self._asr.transcribe, utterance.audio, stop)
        self._give_way(utterance, heard, stop)
        turn = self._book.open(utterance, timings)
        turn.barged_in, self._barging = self._barging, False
        turn.end_of_turn, turn.pause_words = outcome.verdict, outcome.words
        last, self._last_turn = self._last_turn, turn
        within = self.endpointer.settings.rejoin_within_ms
        goes_on = self.bargein is not None and last is not None
        follows = last if goes_on and resumes(last.utterance.speech_end, utterance.speech_start, within) else None
        self._answering.answer(turn, heard, follows)

    def _give_way(self, utterance: Utterance, heard: Future[Transcript], stop: threading.Event) -> None:
        """A monologue cut at max_utterance_s (babble in a loud hall, mostly) whose recognition is still
        running stops for the utterance after it: its recognition takes about a third of its length
        on the one recognition thread (60 s of babble held the next question 18 s)."""
        if self._cut_off is not None and not self._cut_off[0].done():
            self._cut_off[1].set()
        self._cut_off = (heard, stop) if utterance.truncated else None

    def _arrival_of(self, frame: int) -> float:
        back = self._frame - 1 - frame
        return self._arrivals[-1 - back] if 0 <= back < len(self._arrivals) else self._arrivals[0]

"""The turns stage (device/conversation/answering.py) on its own: what an utterance does to the reply
going on, given its words. Real dialogue, voice, recogniser and speaker (paced like a sound card); the
utterances come straight to the stage, so no VAD or endpointer runs and each case takes seconds. The
whole loop, from the microphone, is tested in test_bargein.py, test_rejoin.py and test_conversation.py."""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from device.audio_file import resample
from device.conversation.answering import Answering
from device.conversation.dialogue import Dialogue
from device.conversation.knowledge import load_knowledge
from device.conversation.replying import Replying
from device.conversation.speech_out import SpeechOut
from device.conversation.turn import TurnBook
from device.messages import TurnTimings, Utterance
from device.models.asr import Transcript, words
from device.settings import load_settings
from device.sound.speakers import RecordingSpeaker


class Stage:
    """The turns stage with the replying stage it drives, and a way to hand it what a visitor said."""

    def __init__(self, asr, text_encoder, tts) -> None:
        settings = load_settings()
        self.tts = tts
        self.book = TurnBook(None)
        self.speaker = RecordingSpeaker(tts.sample_rate, realtime=True)
        self.replying = Replying(SpeechOut(tts), self.speaker, self.book, lambda message: None)
        self.recognition = ThreadPoolExecutor(1)
        dialogue = Dialogue(text_encoder, load_knowledge(), settings.dialogue)
        self.answering = Answering(
            asr, self.recognition, dialogue, self.replying, self.book, 15.0, settings.bargein, lambda: None
        )
        self.answering.start()
        self.heard_at = 0  # the stream's sample where the next utterance starts

    def says(self, text: str, over_reply: bool = False, follows=None, gap_ms: int = 2000):
        """The visitor's utterance `text` (said by the voice, its words as recognised); `over_reply`:
        it held the reply, as the listening stage does when speech starts over it."""
        audio = resample(self.tts.say(text), self.tts.sample_rate, 16000)
        start = self.heard_at + gap_ms * 16
        utterance = Utterance(audio, start, start + len(audio), start + len(audio) + 6400, start)
        self.heard_at = start + len(audio)
        now = time.monotonic()
        turn = self.book.open(utterance, TurnTimings(0, speech_end=now, endpoint=now))
        if over_reply:
            turn.barged_in = self.replying.hold("speech") is not None
        heard: Future = Future()
        heard.set_result(Transcript(text, (), len(audio) / 16000))
        self.answering.answer(turn, heard, follows)
        deadline = time.monotonic() + 30  # until the stage has taken it: ended, or its reply begun
        while not (turn.done.is_set() or self.replying.state.speaking_turn is turn) and time.monotonic() < deadline:
            time.sleep(0.01)
        return turn

    def speaking(self, turn) -> bool:
        deadline = time.monotonic() + 10
        while not self.speaker.busy and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.replying.state.speaking_turn is turn and self.speaker.busy

    def close(self) -> None:
        self.replying.close()
        self.answering.stop()
        self.recognition.shutdown(wait=True)
        self.replying.join()
        self.speaker.close()


@pytest.fixture
def stage(asr, text_encoder, tts):
    made = Stage(asr, text_encoder, tts)
    yield made
    made.close()


def test_a_backchannel_over_the_reply_lets_it_go_on(stage):
    reply = stage.says("How much is a ticket?")
    assert stage.speaking(reply)
    nod = stage.says("Mm-hm.", over_reply=True)
    assert nod.barged_in and nod.ignored.startswith("said over the reply")
    assert not stage.speaker.held and stage.replying.state.speaking_turn is reply
    assert reply.done.wait(30) and not reply.interrupted


def test_a_question_over_the_reply_cuts_it_and_is_answered(stage):
    reply = stage.says("How much is a ticket?")
    assert stage.speaking(reply)
    question = stage.says("Excuse me, where are the restrooms?", over_reply=True)
    assert reply.done.wait(10) and reply.interrupted and reply.unsaid
    assert question.answer.intent == "restrooms" and stage.speaking(question)


def test_stop_ends_the_reply_and_is_not_answered(stage):
    reply = stage.says("How much is a ticket?")
    assert stage.speaking(reply)
    stop = stage.says("Stop talking.", over_reply=True)
    assert reply.done.wait(10) and reply.interrupted
    assert stop.answer.intent == "stop" and not stop.chunks


def test_the_rest_of_a_question_is_heard_with_its_start(stage):
    """The visitor paused after "Excuse me, can you tell me": its words and the rest are one question,
    recognised whole; the reply to the first half (an ask-back) is cut and the whole answered."""
    first = stage.says("Excuse me, can you tell me")
    held = stage.replying.state.replying
    rest = stage.says("where the restrooms are?", over_reply=held, follows=first, gap_ms=900)
    assert rest.rejoined and words(rest.transcript)[:2] == ["excuse", "me"], rest.transcript
    assert rest.answer.intent == "restrooms"
    assert first.done.wait(10) and (first.interrupted or not held)


def test_nobody_engaged_is_not_answered(stage):
    stage.answering.listening.clear()
    turn = stage.says("How much is a ticket?")
    assert turn.ignored == "no visitor engaged" and not turn.chunks and stage.speaker.take().size == 0

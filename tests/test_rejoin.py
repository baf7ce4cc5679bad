"""A visitor who goes on after the robot took their pause for the end: the two utterances are one question."""

import dataclasses
import time

import numpy as np
import pytest

from engines.model_specs import FRAME, SPEECH_RATE

from device.audio_file import resample
from device.conversation.dialogue import Dialogue
from device.conversation.knowledge import load_knowledge
from device.conversation.rejoin import Rejoined, heard_in_turns, rejoin, resumes
from device.conversation.speech_out import SpeechOut
from device.conversation.turn_loop import Conversation
from device.messages import Interrupt, Utterance
from device.settings import load_settings
from device.sound.speakers import RecordingSpeaker
from tests.conftest import ENDPOINT
from tests.test_bargein import _feeder


@pytest.fixture(scope="module")
def dialogue(text_encoder) -> Dialogue:
    return Dialogue(text_encoder, load_knowledge(), load_settings().dialogue)


def test_speech_goes_on_with_the_utterance_only_within_the_window():
    end = 10 * SPEECH_RATE
    assert resumes(end, end + SPEECH_RATE * 12 // 10, 1200)
    assert not resumes(end, end + SPEECH_RATE * 12 // 10 + 1, 1200)
    assert not resumes(end, end - FRAME, 1200)  # began before it ended: not after it
    assert not resumes(end, end + FRAME, 0)  # off


def test_the_words_are_one_question_when_the_knowledge_base_places_them_so(dialogue):
    # the rest of a question: joined (asked back about directions alone and together: the same answer)
    assert rejoin("Do you have a map?", "For the building,", dialogue.decide) == Rejoined(
        "Do you have a map For the building,", True
    )
    # only asked back about alone (the wifi), answered together: joined, and not the same answer
    assert rejoin("What is the password?", "For the wireless network.", dialogue.decide) == Rejoined(
        "What is the password For the wireless network.", False
    )
    # a question of its own after another: not joined (together they score lower, as the first question)
    assert rejoin("What are your opening hours?", "Where are the restrooms?", dialogue.decide) is None
    # a thank-you said as the answer starts: one question with the one being answered (not a goodbye)
    whole = rejoin("Where can I park?", "Thank you.", dialogue.decide)
    assert whole is not None and not whole.same_answer and dialogue.decide(whole.text).intent == "parking"
    assert dialogue.decide("Thank you.").intent != "parking"
    # a greeting, then the question: the same question as the question alone
    assert rejoin("Hello,", "What time do you open tomorrow?", dialogue.decide) == Rejoined(
        "Hello What time do you open tomorrow?", True
    )
    assert rejoin("Where can I park?", "", dialogue.decide) is None  # a cough: nothing to go on with


def _said(tts, text: str) -> np.ndarray:
    return resample(tts.say(text), tts.sample_rate, SPEECH_RATE).astype(np.float32) * 0.5


def _hesitate(conversation: Conversation, tts, first: str, then: str) -> None:
    """At the microphone's pace: `first`, 700 ms of silence (the fixed hangover ends it; its reply starts
    about then), `then`, and silence until the second utterance is answered or let go."""
    feed = _feeder(conversation)
    silence = np.zeros(FRAME, np.float32)
    feed(
        np.concatenate(
            [
                np.zeros(SPEECH_RATE // 2, np.float32),
                _said(tts, first),
                np.zeros(int(0.7 * SPEECH_RATE), np.float32),
                _said(tts, then),
            ]
        )
    )
    deadline = time.monotonic() + 20
    while len(conversation.turns) < 2 or not (conversation.turns[1].answer or conversation.turns[1].ignored):
        assert time.monotonic() < deadline, [(t.transcript, t.ignored) for t in conversation.turns]
        feed(silence)


@pytest.mark.parametrize("case", ["cut", "goes on", "too long"])
def test_a_visitor_who_goes_on_after_the_end_is_heard_whole(vad, asr, dialogue, tts, case, monkeypatch):
    """The real conversation with barge-in (a headset: no canceller): "Is there a place" is answered
    (food) before the visitor goes on "where I can park my car?": that reply is cut, not kept for
    "repeat that", and the whole question answered (parking, as the new words alone: not recognised
    again). "What is the password" is answered (the wifi) before "for the wireless network" (alone only
    asked back about): the whole is recognised again as one, the same question as the one answered, so
    its reply goes on. Two utterances longer together than one may be are not joined: the second is a
    question of its own."""
    recognised = []  # the length of every audio recognised
    transcribe = asr.transcribe
    monkeypatch.setattr(
        asr, "transcribe", lambda audio, stop=None: recognised.append(len(audio)) or transcribe(audio, stop)
    )
    interrupts = []
    endpoint = dataclasses.replace(ENDPOINT, rejoin_within_ms=1200, max_utterance_s=2.5 if case == "too long" else 15.0)
    bargein = dataclasses.replace(load_settings().bargein, enabled=True)
    conversation = Conversation(
        vad,
        asr,
        dialogue,
        SpeechOut(tts),
        RecordingSpeaker(tts.sample_rate, realtime=True),
        endpoint,
        bargein=bargein,
        observer=lambda m: interrupts.append(m) if isinstance(m, Interrupt) else None,
    )
    try:
        if case == "cut":
            _hesitate(conversation, tts, "Is there a place?", "Where I can park my car?")
            first, whole = conversation.turns[0], conversation.turns[1]
            assert first.answer.intent == "food" and first.done.wait(10) and first.interrupted
            assert whole.rejoined and whole.transcript.lower().startswith("is there a place")
            assert whole.utterance.speech_start == first.utterance.speech_start  # recognised whole, from its start
            assert whole.utterance.seconds > first.utterance.seconds + 1.0
            assert len(whole.utterance.audio) not in recognised  # the same question as its new words alone
            assert whole.answer.intent == "parking" and not whole.ignored
            assert [m.reason for m in interrupts] == ["the visitor had not finished their question"]
            assert conversation.tally()["rejoined a question"] == 1
            assert (
                dialogue.answer("Can you repeat that?").spoken == dialogue.intents["parking"].answer
            )  # not the cut food
        elif case == "too long":
            _hesitate(conversation, tts, "Is there a place?", "Where I can park my car?")
            first, then = conversation.turns[0], conversation.turns[1]
            assert first.utterance.seconds + then.utterance.seconds > endpoint.max_utterance_s  # else it tests nothing
            assert not then.rejoined and then.answer.intent == "parking" and then.transcript.lower().startswith("where")
            assert first.done.wait(10) and first.interrupted and "rejoined a question" not in conversation.tally()
        else:
            _hesitate(conversation, tts, "What is the password?", "For the wireless network.")
            first, rest = conversation.turns[0], conversation.turns[1]
            assert first.answer.intent == "wifi" and rest.rejoined
            assert len(rest.utterance.audio) in recognised  # both utterances' audio, recognised as one
            assert rest.ignored == "said over the reply (the rest of the question it answers)"
            assert first.done.wait(20) and not first.interrupted and interrupts == []
            assert conversation.speaker.played >= len(first.reply_audio)  # said to its end
    finally:
        conversation.close()
        conversation.speaker.close()


def test_the_benches_hear_utterances_as_the_conversation_joins_them(asr, dialogue, tts):
    """`heard_in_turns` (bench hearing and pauses replay the daemon with it): a piece said within the
    window after a question goes on with it when the knowledge base makes one question of them; a
    question of its own right after stays apart, as does one said after the window."""

    def utterance(text: str, start_s: float) -> Utterance:
        audio = _said(tts, text)
        start = int(start_s * SPEECH_RATE)
        return Utterance(audio, start, start + len(audio), start + len(audio) + SPEECH_RATE * 4 // 10, start)

    def hear(*utterances: Utterance, within_ms: int = 1200) -> list:
        return heard_in_turns(list(utterances), within_ms, 15.0, dialogue, lambda audio: asr.transcribe(audio).text)

    first = utterance("Do you have a map?", 0.5)
    rest = utterance("For the building,", first.speech_end / SPEECH_RATE + 0.7)
    late = utterance("Where are the restrooms?", rest.speech_end / SPEECH_RATE + 1.3)
    questions = hear(first, rest, late)
    assert [q[0].speech_start for q in questions] == [first.speech_start, late.speech_start]
    assert questions[0][0].speech_end == rest.speech_end and questions[0][1].lower().startswith("do you have a map")
    assert [dialogue.decide(text).intent for _, text in questions] == ["directions", "restrooms"]
    assert len(hear(first, rest, within_ms=0)) == 2
    hours = utterance("What are your opening hours?", 0.5)  # a question of its own right after another: apart
    assert len(hear(hours, utterance("Where are the restrooms?", hours.speech_end / SPEECH_RATE + 0.7))) == 2

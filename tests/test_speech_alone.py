"""Words the dialogue is unsure of, heard again from the visitor's speech alone."""

import numpy as np
import pytest

from engines.model_specs import SPEECH_RATE

from device.conversation.dialogue import Dialogue
from device.conversation.knowledge import load_knowledge
from device.conversation.speech_alone import SPEECH_PAD_MS, speech_alone, surer_words
from device.messages import Utterance
from device.models.voices import VOICES, load_voices, speak
from device.settings import load_settings

PAD = SPEECH_PAD_MS * SPEECH_RATE // 1000


@pytest.fixture(scope="module")
def dialogue(text_encoder) -> Dialogue:
    return Dialogue(text_encoder, load_knowledge(), load_settings().dialogue)


@pytest.fixture(scope="module")
def voices(store):
    return load_voices(store, threads=2)


def test_the_speech_alone_is_the_audio_from_the_first_to_the_last_speech_frame_and_a_little_either_side():
    audio = np.arange(SPEECH_RATE, dtype=np.float32)  # one second of the stream, from sample 5000 on
    utterance = Utterance(audio, speech_start=9000, speech_end=15000, decided=20000, audio_start=5000)
    alone = speech_alone(utterance)
    assert alone[0] == 9000 - 5000 - PAD and alone[-1] == 15000 - 5000 + PAD - 1
    early = Utterance(audio, speech_start=5000 + PAD // 2, speech_end=5000 + SPEECH_RATE, decided=0, audio_start=5000)
    assert speech_alone(early)[0] == 0 and len(speech_alone(early)) == SPEECH_RATE  # as far as the audio goes


def _recognitions(asr):
    """The real recogniser, its calls counted."""
    calls = []

    def transcribe(audio: np.ndarray) -> str:
        calls.append(len(audio))
        return asr.transcribe(audio).text

    return transcribe, calls


def test_talk_before_the_question_is_left_out_when_the_words_with_it_leave_the_robot_unsure(asr, dialogue, voices):
    """Another talker's words just before the visitor's, in the utterance's audio: heard with them the
    question is only asked back about; its speech alone is answered."""
    talk = speak(voices, VOICES[1], "So what did she say")[0].astype(np.float32)
    question = speak(voices, VOICES[0], "Do you have wifi?")[0].astype(np.float32)
    gap = np.zeros(SPEECH_RATE * 3 // 10, np.float32)
    audio = np.concatenate([talk, gap, question])
    start = len(talk) + len(gap)
    utterance = Utterance(audio, speech_start=start, speech_end=len(audio), decided=len(audio) + 6400, audio_start=0)
    transcribe, calls = _recognitions(asr)
    as_cut = transcribe(audio)
    assert not dialogue.sure(dialogue.decide(as_cut)), as_cut  # the talk's words leave it unsure
    words = surer_words(as_cut, utterance, transcribe, dialogue)
    assert calls == [len(audio), len(audio) - start + PAD]  # recognised again: the speech alone
    decision = dialogue.decide(words)
    assert decision.intent == "wifi" and dialogue.sure(decision), words


def test_words_the_robot_is_sure_of_are_not_recognised_again(asr, dialogue, voices):
    question = speak(voices, VOICES[0], "Where can I find a toilet?")[0].astype(np.float32)
    utterance = Utterance(
        question, speech_start=PAD, speech_end=len(question) - PAD, decided=len(question), audio_start=0
    )
    transcribe, calls = _recognitions(asr)
    as_cut = transcribe(question)
    assert surer_words(as_cut, utterance, transcribe, dialogue) == as_cut and len(calls) == 1

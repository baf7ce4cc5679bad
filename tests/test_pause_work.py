"""A pause's work (device/conversation/pause_work.py) with the real recogniser and the pinned voice:
its words go only to the utterance that ended at that pause (its recognition only when it heard that
utterance's very audio), and a visitor who goes on drops it."""

import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np
import pytest

from engines.model_specs import FRAME

from device.audio_file import resample
from device.conversation.pause_words import Words, WordsJudged
from device.conversation.pause_work import PauseWork
from device.messages import SpeechPaused, Utterance
from tests.conftest import ENDPOINT

SETTINGS = dataclasses.replace(ENDPOINT, wait_after_open_words=True)


@pytest.fixture
def recognition():
    pool = ThreadPoolExecutor(1, thread_name_prefix="asr")
    yield pool
    pool.shutdown(wait=True)


def _pause(tts, text: str) -> SpeechPaused:
    """`text` said, then one frame of silence: the cue at which the conversation starts the work."""
    speech = resample(tts.say(text), tts.sample_rate, 16000)
    speech = np.concatenate([np.zeros(4000, np.float32), speech[: len(speech) // FRAME * FRAME]])
    return SpeechPaused(np.concatenate([speech, np.zeros(FRAME, np.float32)]), len(speech), FRAME)


def _utterance(pause: SpeechPaused, speech_end: int) -> Utterance:
    return Utterance(pause.audio, 0, speech_end, speech_end + 12 * FRAME, 0)


def test_the_pause_words_go_to_the_utterance_that_ended_there(asr, tts, recognition):
    work = PauseWork(asr, recognition, SETTINGS, knows=lambda words, at_least: False)
    pause = _pause(tts, "Is it possible to")
    work.start(pause)
    wait(work.pending())
    # the feeding thread's next frame: the words' judgement comes as a message for the endpointer
    assert work.news() == [WordsJudged(pause.speech_end, Words.OPEN)]
    assert "possible" in work.words_so_far().lower()
    outcome = work.take(_utterance(pause, pause.speech_end))
    assert outcome.heard is not None and "possible" in outcome.heard.result().text.lower()
    assert outcome.words == Words.OPEN and outcome.verdict is None, outcome.heard.result().text  # no model asked

    work.start(pause)  # the same words, but the utterance went on past this pause
    wait(work.pending())
    work.news()
    later = work.take(_utterance(pause, pause.speech_end + 10 * FRAME))
    assert later.heard is None and later.words is None and work.pending() == []

    work.start(pause)  # ended there, but its audio takes in a last syllable under the hall's margin
    wait(work.pending())
    work.news()
    longer = Utterance(pause.heard, 0, pause.speech_end, pause.speech_end + 12 * FRAME, 0)
    taken = work.take(longer)
    assert taken.heard is None and taken.words == Words.OPEN  # recognised again whole; the pause's words stand


def test_a_visitor_who_goes_on_drops_the_pause_work(asr, tts, recognition):
    """Work not started yet is not done: the recognition thread is busy (a turn's own recognition)."""
    busy = threading.Event()
    recognition.submit(busy.wait, 30)
    work = PauseWork(asr, recognition, SETTINGS, knows=lambda words, at_least: False)
    pause = _pause(tts, "Can you tell me")
    work.start(pause)
    queued = work.pending()
    assert len(queued) == 2  # the recognition and its words' judgement; no end-of-turn model
    work.drop()
    busy.set()
    assert all(future.cancelled() for future in queued)
    assert work.pending() == [] and work.words_so_far() is None and work.news() == []
    assert work.take(_utterance(pause, pause.speech_end)).heard is None

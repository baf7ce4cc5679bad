"""Endpointing, frame in and events out, on VAD probabilities chosen frame by frame."""

import numpy as np
import pytest

from device.conversation.endpointer import Endpointer, EndpointSettings
from device.messages import SpeechPaused, SpeechResumed, SpeechStarted, Utterance
from engines.model_specs import FRAME

SETTINGS = EndpointSettings(vad_threshold=0.5, onset_ms=64, hangover_ms=320, pre_roll_ms=128, max_utterance_s=2.0)


def run(pattern: str, settings: EndpointSettings = SETTINGS) -> list[tuple[int, object]]:
    """'S' is a speech frame, '.' a silent one; each frame's samples hold its index."""
    endpointer = Endpointer(settings)
    events = []
    for i, mark in enumerate(pattern):
        frame = np.full(FRAME, i, np.float32)
        events += [(i, e) for e in endpointer.push(frame, 0.9 if mark == "S" else 0.1)]
    return events


def frames_of(utterance: Utterance) -> list[int]:
    return [int(v) for v in utterance.audio[::FRAME]]


def test_utterance_with_pre_roll_ends_after_the_hangover():
    events = run("....." + "SSSSSS" + "..........")
    kinds = [type(e).__name__ for _, e in events]
    assert kinds == ["SpeechStarted", "SpeechPaused", "Utterance"]
    (_, started), (paused_at, paused), (ended_at, utterance) = events
    assert started.sample == 5 * FRAME
    assert paused_at == 13 and paused.speech_end == 11 * FRAME  # after 96 ms (3 frames) of silence
    assert ended_at == 11 + 10 - 1  # the tenth silent frame (320 ms) decides
    assert frames_of(utterance) == list(range(1, 11))  # 4 frames (128 ms) of pre-roll, then the speech
    assert utterance.speech_start == 5 * FRAME and utterance.speech_end == 11 * FRAME
    assert not utterance.truncated
    assert np.array_equal(paused.audio, utterance.audio)  # the speculative audio is the final audio


def test_a_pause_shorter_than_the_hangover_is_bridged():
    events = run("SSSS" + "......" + "SSSS" + "..........")
    kinds = [type(e).__name__ for _, e in events]
    assert kinds == ["SpeechStarted", "SpeechPaused", "SpeechResumed", "SpeechPaused", "Utterance"]
    assert frames_of(events[-1][1]) == list(range(0, 14))


def test_a_click_shorter_than_the_onset_starts_nothing():
    assert run("..S...S...S..") == []


def test_a_monologue_is_cut_at_the_maximum_and_listening_goes_on():
    events = run("S" * 150)
    utterances = [e for _, e in events if isinstance(e, Utterance)]
    assert utterances and all(u.truncated for u in utterances)
    assert all(len(u.audio) <= 2.0 * 16000 for u in utterances)
    assert sum(isinstance(e, SpeechStarted) for _, e in events) == len(utterances) + 1


@pytest.mark.parametrize("key, value", [("vad_threshold", 1.5), ("hangover_ms", -1), ("max_utterance_s", 0.5)])
def test_settings_are_validated(key, value):
    fields = dict(vad_threshold=0.5, onset_ms=64, hangover_ms=400, pre_roll_ms=256, max_utterance_s=15.0)
    with pytest.raises(ValueError, match=key):
        EndpointSettings(**{**fields, key: value})


def test_resumed_then_paused_carry_consistent_speech_ends():
    events = run("SSS" + "...." + "SS" + "." * 12)
    paused = [e for _, e in events if isinstance(e, SpeechPaused)]
    assert [p.speech_end for p in paused] == [3 * FRAME, 9 * FRAME]
    assert sum(isinstance(e, SpeechResumed) for _, e in events) == 1


def test_a_dip_between_syllables_starts_no_speculation():
    kinds = [type(e).__name__ for _, e in run("SSSS" + ".." + "SSSS" + "." * 12)]
    assert kinds == ["SpeechStarted", "SpeechPaused", "Utterance"]

"""Endpointing, frame in and events out, on VAD probabilities chosen frame by frame."""

import dataclasses

import numpy as np
import pytest

from engines.model_specs import FRAME

from device.conversation.endpointer import Endpointer, EndpointSettings
from device.conversation.pause_words import Words
from device.messages import SpeechPaused, SpeechResumed, SpeechStarted, Utterance
from tests.conftest import endpoint_settings

SETTINGS = endpoint_settings(vad_threshold=0.5, onset_ms=64, hangover_ms=320, pre_roll_ms=128, max_utterance_s=2.0)


def run(pattern: str, settings: EndpointSettings = SETTINGS) -> list[tuple[int, object]]:
    """'S' is a speech frame, '.' a silent one; each frame's samples hold its index."""
    endpointer = Endpointer(settings)
    events = []
    for i, mark in enumerate(pattern):
        frame = np.full(FRAME, i, np.float32)
        events += [(i, e) for e in endpointer.push(frame, 0.9 if mark == "S" else 0.1)]
    return events


def frames_of(audio: np.ndarray) -> list[int]:
    return [int(v) for v in audio[::FRAME]]


def test_utterance_with_pre_roll_ends_after_the_hangover():
    events = run("....." + "SSSSSS" + "..........")
    kinds = [type(e).__name__ for _, e in events]
    assert kinds == ["SpeechStarted", "SpeechPaused", "Utterance"]
    (_, started), (paused_at, paused), (ended_at, utterance) = events
    assert started.sample == 5 * FRAME
    assert paused_at == 11 and paused.speech_end == 11 * FRAME  # after 32 ms (a frame) of silence
    assert ended_at == 11 + 10 - 1  # the tenth silent frame (320 ms) decides
    assert frames_of(utterance.audio) == list(range(1, 11))  # 4 frames (128 ms) of pre-roll, then the speech
    assert utterance.speech_start == 5 * FRAME and utterance.speech_end == 11 * FRAME
    assert not utterance.truncated
    assert np.array_equal(paused.audio, utterance.audio)  # the speculative audio is the final audio


def test_a_pause_shorter_than_the_hangover_is_bridged():
    events = run("SSSS" + "......" + "SSSS" + "..........")
    kinds = [type(e).__name__ for _, e in events]
    assert kinds == ["SpeechStarted", "SpeechPaused", "SpeechResumed", "SpeechPaused", "Utterance"]
    assert frames_of(events[-1][1].audio) == list(range(0, 14))


def test_a_click_shorter_than_the_onset_starts_nothing():
    assert run("..S...S...S..") == []


def test_a_monologue_is_cut_at_the_maximum_and_listening_goes_on():
    events = run("S" * 150)
    utterances = [e for _, e in events if isinstance(e, Utterance)]
    assert utterances and all(u.truncated for u in utterances)
    assert all(len(u.audio) <= 2.0 * 16000 for u in utterances)
    assert sum(isinstance(e, SpeechStarted) for _, e in events) == len(utterances) + 1


@pytest.mark.parametrize(
    "key, value",
    [
        ("vad_threshold", 1.5),
        ("hangover_ms", -1),
        ("max_utterance_s", 0.5),
        ("known_question_threshold", 1.5),
        ("quiet_hangover_ms", 100),
        ("quiet_over_floor_db", -1.0),
        ("level_hysteresis_db", 1.0),
    ],
)
def test_settings_are_validated(key, value):
    fields = dict(vad_threshold=0.5, onset_ms=64, hangover_ms=400, pre_roll_ms=256, max_utterance_s=15.0)
    with pytest.raises(ValueError, match=key):
        endpoint_settings(**{**fields, key: value})


def test_resumed_then_paused_carry_consistent_speech_ends():
    events = run("SSS" + "...." + "SS" + "." * 12)
    paused = [e for _, e in events if isinstance(e, SpeechPaused)]
    assert [p.speech_end for p in paused] == [3 * FRAME, 9 * FRAME]
    assert sum(isinstance(e, SpeechResumed) for _, e in events) == 1


def test_a_pause_carries_its_speech_for_recognition_and_its_silence_for_the_end_of_turn_model():
    events = run(".." + "SSSS" + "." * 12)
    ((at, paused),) = [(i, e) for i, e in events if isinstance(e, SpeechPaused)]
    assert frames_of(paused.audio) == [0, 1, 2, 3, 4, 5]  # pre-roll and speech, up to the last speech frame
    assert paused.silence == FRAME and at == 6  # the cue: the first silent frame
    assert frames_of(paused.heard) == list(range(at + 1))  # all heard until the cue, as the model's authors feed it


def test_a_dip_between_syllables_starts_a_speculation_the_next_syllable_ends():
    """(The conversation then stops that recognition: tests/test_conversation.py.)"""
    events = run("SSSS" + "." + "SSSS" + "." * 12)
    assert [(i, type(e).__name__) for i, e in events] == [
        (1, "SpeechStarted"),
        (4, "SpeechPaused"),
        (5, "SpeechResumed"),
        (9, "SpeechPaused"),
        (18, "Utterance"),
    ]


def judged(pattern: str, verdict_at: int | None, complete: bool) -> list[tuple[int, object]]:
    """Like `run`, with an end-of-turn verdict on the first pause arriving before frame `verdict_at`."""
    return with_words(pattern, None, False, verdict_at, complete, settings=JUDGED)


JUDGED = endpoint_settings(
    vad_threshold=0.5,
    onset_ms=64,
    hangover_ms=320,
    pre_roll_ms=128,
    max_utterance_s=5.0,
    end_of_turn=True,
    min_hangover_ms=160,
    max_hangover_ms=960,
)


def test_a_finished_verdict_ends_the_utterance_at_the_short_hangover():
    events = judged("SSSSSS" + "." * 40, verdict_at=9, complete=True)  # the pause is seen at frame 8 (3rd silent frame)
    ((ended_at, utterance),) = [(i, e) for i, e in events if isinstance(e, Utterance)]
    assert ended_at == 6 + 5 - 1  # 160 ms = 5 silent frames
    assert utterance.decided - utterance.speech_end == 5 * FRAME


def test_a_verdict_arriving_after_the_short_hangover_ends_the_utterance_at_once():
    events = judged("SSSSSS" + "." * 40, verdict_at=12, complete=True)  # 6 silent frames seen, 5 were enough
    ((ended_at, utterance),) = [(i, e) for i, e in events if isinstance(e, Utterance)]
    assert ended_at == 12 and utterance.decided == 12 * FRAME  # on arrival, before the next frame


def test_an_unfinished_verdict_waits_the_long_hangover_and_bridges_a_long_pause():
    events = judged("SSSSSS" + "." * 20 + "SSSS" + "." * 40, verdict_at=9, complete=False)
    utterances = [e for _, e in events if isinstance(e, Utterance)]
    assert len(utterances) == 1 and utterances[0].speech_end == 30 * FRAME  # 640 ms pause bridged


def test_without_a_verdict_the_fixed_hangover_applies_and_a_stale_verdict_is_ignored():
    events = judged("SSSSSS" + "." * 40, verdict_at=None, complete=True)
    ((ended_at, _),) = [(i, e) for i, e in events if isinstance(e, Utterance)]
    assert ended_at == 6 + 10 - 1  # 320 ms
    late = judged("SSSSSS" + "." * 40, verdict_at=30, complete=False)  # after the utterance ended: nothing
    assert [type(e).__name__ for _, e in late] == ["SpeechStarted", "SpeechPaused", "Utterance"]


def test_babble_the_vad_calls_speech_does_not_hold_an_utterance_open_over_the_floor():
    """The VAD says speech all along (babble is speech); the visitor, close by, is 15 dB louder for
    a second. With the floor margin the utterance is the visitor's second; without, it never ends."""
    rng = np.random.default_rng(0)
    babble = lambda: rng.normal(0, 0.01, FRAME).astype(np.float32)  # noqa: E731 (-40 dBFS)
    visitor = lambda: rng.normal(0, 0.056, FRAME).astype(np.float32)  # noqa: E731 (-25 dBFS)
    frames = [babble() for _ in range(160)] + [visitor() for _ in range(31)] + [babble() for _ in range(60)]

    def utterances(margin: float) -> list[Utterance]:
        endpointer = Endpointer(dataclasses.replace(SETTINGS, max_utterance_s=15.0, min_level_over_floor_db=margin))
        return [e for f in frames for e in endpointer.push(f, 0.9) if isinstance(e, Utterance)]

    (heard,) = utterances(12.0)
    assert heard.speech_start == 160 * FRAME and heard.speech_end == 191 * FRAME
    assert utterances(0.0) == []  # the babble keeps it open: no answer while the hall talks


def test_through_an_array_a_started_utterance_goes_on_at_a_lower_margin():
    """The visitor 15 dB over the hall's talk for a second, then 10 dB over it for 640 ms (their quieter
    last words), all of it where the beam points. With the array's 12 dB margin alone the quieter words
    end the utterance and start none; with 3 dB of hysteresis they go on with it, and the talk after
    them (at the floor) still ends it."""
    rng = np.random.default_rng(0)
    noise = lambda dbfs: rng.normal(0, 10 ** (dbfs / 20), FRAME).astype(np.float32)  # noqa: E731
    frames = [noise(-40) for _ in range(160)] + [noise(-25) for _ in range(31)] + [noise(-30) for _ in range(20)]
    frames += [noise(-40) for _ in range(60)]

    def utterances(hysteresis_db: float) -> list[Utterance]:
        settings = dataclasses.replace(
            SETTINGS, max_utterance_s=15.0, array_level_over_floor_db=12.0, array_level_hysteresis_db=hysteresis_db
        ).through_array()
        endpointer = Endpointer(settings)
        return [e for f in frames for e in endpointer.push(f, 0.9, on_axis_db=0.0) if isinstance(e, Utterance)]

    (cut,) = utterances(0.0)
    assert cut.speech_start == 160 * FRAME and cut.speech_end == 191 * FRAME
    (whole,) = utterances(3.0)
    assert whole.speech_start == 160 * FRAME and whole.speech_end == 211 * FRAME


def test_a_last_syllable_under_the_floor_margin_is_recognised_but_does_not_hold_the_utterance():
    """In a hall the visitor's quieter last syllable ("...let") is speech to the VAD but not louder than
    the floor by the margin: the utterance still ends where the margin says (its hangover counted
    from there), and its audio takes the syllable in, so recognition hears the word whole. Sound the
    VAD does not call speech after it stays out."""
    rng = np.random.default_rng(0)
    hall = [rng.normal(0, 0.01, FRAME).astype(np.float32) for _ in range(160)]  # -40 dBFS, not speech to the VAD
    loud = [rng.normal(0, 0.056, FRAME).astype(np.float32) for _ in range(31)]  # -25 dBFS
    quiet = [rng.normal(0, 0.0126, FRAME).astype(np.float32) for _ in range(4)]  # -38 dBFS: under -40 + 12
    after = [rng.normal(0, 0.01, FRAME).astype(np.float32) for _ in range(40)]
    frames = hall + loud + quiet + after

    def heard(last_syllable_vad: float) -> tuple[SpeechPaused, int, Utterance]:
        endpointer = Endpointer(dataclasses.replace(SETTINGS, max_utterance_s=15.0, min_level_over_floor_db=12.0))
        vad = [0.1] * 160 + [0.9] * 31 + [last_syllable_vad] * 4 + [0.1] * 40
        events = [(i, e) for i, (f, p) in enumerate(zip(frames, vad)) for e in endpointer.push(f, p)]
        ((_, paused),) = [(i, e) for i, e in events if isinstance(e, SpeechPaused)]
        ((ended_at, utterance),) = [(i, e) for i, e in events if isinstance(e, Utterance)]
        return paused, ended_at, utterance

    first = 160 - 4  # the pre-roll's first frame
    paused, ended_at, utterance = heard(0.9)
    assert utterance.speech_start == 160 * FRAME and utterance.speech_end == 191 * FRAME
    assert ended_at == 191 + 10 - 1  # the 320 ms hangover from the margin's end, as without the syllable
    assert np.array_equal(utterance.audio, np.concatenate(frames[first:195]))  # the syllable is in it
    # the pause's cue, the syllable's first frame: recognition starts on the audio as it would end there
    assert paused.speech_end == 191 * FRAME and np.array_equal(paused.audio, np.concatenate(frames[first:192]))
    paused, ended_at, utterance = heard(0.1)
    assert ended_at == 191 + 10 - 1 and np.array_equal(utterance.audio, np.concatenate(frames[first:191]))
    assert np.array_equal(paused.audio, utterance.audio)


def test_with_an_array_only_speech_from_where_its_beam_points_makes_an_utterance():
    """The hall's talk as loud as the visitor and speech to the VAD, but from every direction (the
    beam holds 6 dB less of it than of the microphones); the visitor, where the beam points, 0 dB.
    With the array's gate the utterance is the visitor's second alone; without it, the talk holds it open."""
    rng = np.random.default_rng(0)
    talk = [(rng.normal(0, 0.03, FRAME).astype(np.float32), -6.0) for _ in range(160)]
    visitor = [(rng.normal(0, 0.03, FRAME).astype(np.float32), -0.5) for _ in range(31)]
    frames = talk[:100] + visitor + talk[100:]

    def utterances(gate_db: float) -> list[Utterance]:
        endpointer = Endpointer(dataclasses.replace(SETTINGS, max_utterance_s=15.0, array_min_on_axis_db=gate_db))
        return [
            e for f, on_axis in frames for e in endpointer.push(f, 0.9, on_axis_db=on_axis) if isinstance(e, Utterance)
        ]

    (heard,) = utterances(-2.0)
    assert heard.speech_start == 100 * FRAME and heard.speech_end == 131 * FRAME
    assert utterances(-30.0) == []


def test_an_utterance_told_to_wait_longer_bridges_a_longer_pause_and_the_next_one_does_not():
    endpointer = Endpointer(SETTINGS)
    pattern = "SSSS" + "." * 15 + "SSSS" + "." * 25 + "SSSS" + "." * 15 + "SSSS" + "." * 25
    utterances = []
    for i, mark in enumerate(pattern):
        if i == 3:
            endpointer.hold_for(640)  # 20 frames: the 15-frame (480 ms) pause is bridged
        events = endpointer.push(np.full(FRAME, i, np.float32), 0.9 if mark == "S" else 0.1)
        utterances += [(i, e) for e in events if isinstance(e, Utterance)]
    (first_at, first), (second_at, second), (third_at, third) = utterances
    assert first.speech_start == 0 and first.speech_end == 23 * FRAME and first_at == 23 + 20 - 1
    assert second.speech_end == 52 * FRAME and second_at == 52 + 10 - 1  # back to the 320 ms hangover
    assert third.speech_start == 67 * FRAME


OPEN = dataclasses.replace(JUDGED, wait_after_open_words=True)


def with_words(
    pattern: str,
    words_at: int | None,
    words: Words,
    verdict_at: int | None = None,
    complete: bool = True,
    settings: EndpointSettings = OPEN,
) -> list[tuple[int, object]]:
    """Like `run`, with the first pause's end-of-turn verdict arriving before frame `verdict_at` and its
    speculative words before frame `words_at` (None: never)."""
    from device.messages import EndOfTurnVerdict

    endpointer = Endpointer(settings, judged=settings.end_of_turn)
    events, pause = [], None
    for i, mark in enumerate(pattern):
        if pause is not None and i == verdict_at:
            events += [
                (i, e)
                for e in endpointer.judge(EndOfTurnVerdict(pause.speech_end, 0.9 if complete else 0.1, complete, 50.0))
            ]
        if pause is not None and i == words_at:
            events += [(i, e) for e in endpointer.heard(pause.speech_end, words)]
        for event in endpointer.push(np.full(FRAME, i, np.float32), 0.9 if mark == "S" else 0.1):
            events.append((i, event))
            pause = event if isinstance(event, SpeechPaused) and pause is None else pause
    return events


def test_words_that_leave_the_sentence_open_bridge_a_pause_the_fixed_hangover_would_end():
    fixed = dataclasses.replace(OPEN, end_of_turn=False)
    pattern = "SSSSSS" + "." * 20 + "SSSS" + "." * 40  # a 640 ms pause, the 320 ms hangover ends it
    assert len([e for _, e in with_words(pattern, None, Words.OPEN, settings=fixed) if isinstance(e, Utterance)]) == 2
    utterances = [e for _, e in with_words(pattern, 10, Words.OPEN, settings=fixed) if isinstance(e, Utterance)]
    assert len(utterances) == 1 and utterances[0].speech_end == 30 * FRAME
    closed = [e for _, e in with_words(pattern, 10, Words.OTHER, settings=fixed) if isinstance(e, Utterance)]
    assert len(closed) == 2 and closed[0].decided - closed[0].speech_end == 10 * FRAME  # the fixed hangover


def test_open_words_overrule_a_finished_verdict_which_waits_for_the_words():
    pattern = "SSSSSS" + "." * 40
    ((ended_at, _),) = [
        (i, e) for i, e in with_words(pattern, 13, Words.OPEN, verdict_at=9) if isinstance(e, Utterance)
    ]
    assert ended_at == 6 + 30 - 1  # 960 ms: the words held it open though the model said finished
    ((ended_at, utterance),) = [
        (i, e) for i, e in with_words(pattern, 13, Words.OTHER, verdict_at=9) if isinstance(e, Utterance)
    ]
    assert ended_at == 13 and utterance.decided == 13 * FRAME  # finished, once the words were in (160 ms had passed)
    ((ended_at, _),) = [
        (i, e) for i, e in with_words(pattern, None, Words.OTHER, verdict_at=9) if isinstance(e, Utterance)
    ]
    assert ended_at == 6 + 10 - 1  # words never came: the fixed hangover, not the short one


def test_a_known_question_ends_its_pause_after_the_short_hangover_unless_judged_unfinished():
    known = dataclasses.replace(OPEN, end_of_turn=False, end_on_known_question=True)
    pattern = "SSSSSS" + "." * 40
    ((ended_at, utterance),) = [
        (i, e) for i, e in with_words(pattern, 12, Words.KNOWN_QUESTION, settings=known) if isinstance(e, Utterance)
    ]
    assert ended_at == 12 and utterance.decided == 12 * FRAME  # words after 6 frames of silence: at once
    ((ended_at, _),) = [
        (i, e) for i, e in with_words(pattern, 9, Words.KNOWN_QUESTION, settings=known) if isinstance(e, Utterance)
    ]
    assert ended_at == 6 + 5 - 1  # words sooner: min_hangover_ms (160 ms, 5 frames) of silence
    ((ended_at, _),) = [
        (i, e) for i, e in with_words(pattern, 9, Words.OTHER, settings=known) if isinstance(e, Utterance)
    ]
    assert ended_at == 6 + 10 - 1  # not a known question: the fixed hangover
    judged = dataclasses.replace(known, end_of_turn=True)
    ((ended_at, _),) = [
        (i, e)
        for i, e in with_words(pattern, 12, Words.KNOWN_QUESTION, verdict_at=9, complete=False, settings=judged)
        if isinstance(e, Utterance)
    ]
    assert ended_at == 6 + 30 - 1  # the model heard the voice go on: max_hangover_ms


def test_a_visitor_far_over_a_quiet_room_gets_the_quiet_hangover_in_a_hall_the_full_one():
    """The same visitor (-25 dBFS) in a quiet room's hiss (-70 dBFS) and in a hall's talk 15 dB under
    them: the quiet room's pause ends after `quiet_hangover_ms`, the hall's after `hangover_ms`."""
    rng = np.random.default_rng(0)
    settings = dataclasses.replace(
        SETTINGS, max_utterance_s=15.0, min_level_over_floor_db=12.0, quiet_hangover_ms=256, quiet_over_floor_db=30.0
    )

    def silence_waited(room_rms: float, settings: EndpointSettings = settings) -> int:
        room = lambda n: [rng.normal(0, room_rms, FRAME).astype(np.float32) for _ in range(n)]  # noqa: E731
        frames = room(160) + [rng.normal(0, 0.056, FRAME).astype(np.float32) for _ in range(31)] + room(40)
        endpointer = Endpointer(settings)
        vad = [0.1] * 160 + [0.9] * 31 + [0.1] * 40
        ((ended_at, _),) = [
            (i, e)
            for i, (f, p) in enumerate(zip(frames, vad))
            for e in endpointer.push(f, p)
            if isinstance(e, Utterance)
        ]
        return ended_at + 1 - 191

    assert silence_waited(0.0003) == 8  # 256 ms
    assert silence_waited(0.01) == 10  # 320 ms: in a hall the last frame is for the visitor's quiet syllables
    assert silence_waited(0.0003, dataclasses.replace(settings, quiet_hangover_ms=0)) == 10  # off

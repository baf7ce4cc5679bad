"""The loud-hall evaluation: babble at the asked level, and the bench hearing through it."""

from __future__ import annotations

import numpy as np

from device.app import App
from device.bench.hall import HALL_FILE, Hall, at_snr, load_questions
from device.bench.hearing import measure_hearing
from device.conversation.dialogue import BUILTINS
from device.conversation.knowledge import load_knowledge
from device.sound.beamformer import MicArray
from device.sound.echo_room import ACTIVE_DB, block_power
from device.toml_file import tomllib


def test_the_splits_share_no_question_and_no_babble_sentence():
    listing = tomllib.loads(HALL_FILE.read_text())
    tuning = {q["text"] for q in listing["question"] if q["split"] == "tuning"}
    held = {q["text"] for q in listing["question"] if q["split"] == "held-apart"}
    assert len(tuning) >= 20 and len(held) >= 20 and not tuning & held
    assert not set(listing["babble"]["tuning"]) & set(listing["babble"]["held-apart"])
    examples = {e.lower() for intent in (*load_knowledge(), *BUILTINS) for e in intent.examples}
    assert not {t.lower() for t in tuning | held} & examples


def test_babble_is_mixed_at_the_asked_level_over_the_speech(store):
    questions, talkers = load_questions(store, "tuning", limit=1)
    hall = Hall(len(talkers), seed=1)
    speech = hall.visitor(questions[0].audio)[0]
    babble = hall.babble(talkers, len(speech), np.random.default_rng(0))[0]
    power_speech = block_power(speech)
    active = power_speech > 10 ** (ACTIVE_DB / 10)
    for snr_db in (0.0, 10.0):
        power_babble = block_power(at_snr(speech, babble, snr_db))
        measured = 10 * np.log10(power_speech[active].mean() / power_babble[active].mean())
        assert abs(measured - snr_db) < 0.1


def test_babble_hurts_hearing_and_the_bench_says_how_much(store):
    report = measure_hearing(App(store_dir=store.root), "tuning", (None, 0.0), limit=8)
    quiet, loud = report["conditions"]
    assert report["questions"] == 8
    assert quiet["right_or_asked"] >= 0.9 and quiet["heard"] == report["questions"]
    assert loud["wer"] > quiet["wer"] + 0.1
    babble = report["babble_only"]
    assert babble["seconds"] == 60 and babble["per_minute"] == babble["utterances"]  # a minute of it
    alone = measure_hearing(App(store_dir=store.root), "tuning", (0.0,), limit=8)  # a condition's figures
    assert alone["conditions"][0] == loud and alone["babble_only"] == babble  # are its own, whatever ran before


def test_through_an_array_steered_at_the_visitor_the_bench_hears_the_hall_better(store):
    """The same questions at 5 dB under the hall's talk, at one microphone and through a 4-microphone
    array's beam pointed where the camera would see the visitor's face: fewer words wrong."""
    app = App(store_dir=store.root)
    one = measure_hearing(app, "tuning", (5.0,), limit=4)
    array = measure_hearing(app, "tuning", (5.0,), limit=4, array=MicArray.circular(4, 0.032))
    assert one["array"] is None and array["array"] == {"microphones": 4, "radius_mm": 32.0}
    assert array["conditions"][0]["wer"] < one["conditions"][0]["wer"] - 0.1, (
        one["conditions"][0]["wer"],
        array["conditions"][0]["wer"],
    )


def test_with_each_questions_own_span_the_bench_recognises_that_span_and_no_other(store):
    """`--own-span`: what the recogniser and the dialogue make of the hall when segmentation is perfect.
    Each question is one utterance, its own samples and 50 ms either side, ended as it ends; the
    endpointer, on the same mix, ends the same questions elsewhere."""
    app = App(store_dir=store.root)
    own = measure_hearing(app, "tuning", (5.0,), limit=2, own_span=True)
    cut = measure_hearing(app, "tuning", (5.0,), limit=2)
    assert own["own_span"] and not cut["own_span"]
    rows = own["conditions"][0]["questions"]
    assert [r["ended_ms"] for r in rows] == [50, 50] and own["conditions"][0]["heard"] == 2
    assert all(r["false_utterances"] == 0 and not r["rejoined"] and r["transcript"] for r in rows)
    assert [r["ended_ms"] for r in cut["conditions"][0]["questions"]] != [50, 50]


def test_another_hall_is_another_room_with_other_talk_in_it(store):
    """`--hall N`: the same questions in another room, its talkers elsewhere saying other things, so
    that a setting can be judged over several halls rather than over one hall's chance."""
    app = App(store_dir=store.root)
    usual = measure_hearing(app, "tuning", (5.0,), limit=2)
    other = measure_hearing(app, "tuning", (5.0,), limit=2, hall=11)
    assert (usual["hall"], other["hall"]) == (7, 11)
    heard = [
        [(r["transcript"], r["ended_ms"]) for r in report["conditions"][0]["questions"]] for report in (usual, other)
    ]
    assert heard[0] != heard[1]
    assert usual["babble_only"] != other["babble_only"]

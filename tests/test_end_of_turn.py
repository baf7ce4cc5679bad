"""The end-of-turn model (Smart Turn v3.2): its features, its store file, the turn loop's use of it,
and the evaluation set of questions with and without a mid-sentence pause."""

import dataclasses
import logging
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from engines.model_specs import MODELS
from engines.store.pins import WHEELS

from device.bench.pauses import PAUSES_MS, evaluate, load_cases
from device.conversation.endpointer import SPECULATE_AFTER_MS
from device.conversation.pause_words import OPEN_WORDS
from device.conversation.report import turn_report
from device.conversation.visit import Question, bundled_questions, play_visit
from device.models import catalog
from device.models.end_of_turn import WINDOW, EndOfTurnDetector, last_window, log_mel
from tests.conftest import endpoint_settings

ENDPOINT = endpoint_settings(
    vad_threshold=0.5,
    onset_ms=64,
    hangover_ms=400,
    pre_roll_ms=256,
    max_utterance_s=15.0,
    end_of_turn=True,
    min_hangover_ms=200,
    max_hangover_ms=1200,
)


@pytest.fixture(scope="module")
def detector(store):
    return catalog.load_end_of_turn(store, 2)


@pytest.fixture(scope="module")
def pause_cases(store):
    """Each split of the evaluation set, synthesized once for the module's tests."""
    return {split: load_cases(store, split, threads=2) for split in ("tuning", "held-apart")}


def test_features_are_whisper_feature_extractors(beckett):
    from transformers import WhisperFeatureExtractor

    audio = last_window(beckett)
    reference = WhisperFeatureExtractor(chunk_length=8)(
        audio,
        sampling_rate=16000,
        padding="max_length",
        max_length=WINDOW,
        truncation=True,
        do_normalize=True,
        return_tensors="np",
    ).input_features[0]
    ours = log_mel(audio)
    assert ours.shape == reference.shape == (80, 800)
    assert np.abs(ours - reference).max() < 1e-4


def test_the_last_8_s_are_kept_and_a_short_utterance_is_padded_in_front(beckett):
    assert np.array_equal(last_window(beckett), beckett[-WINDOW:])
    short = beckett[:16000]
    padded = last_window(short)
    assert len(padded) == WINDOW and not padded[:-16000].any() and np.array_equal(padded[-16000:], short)


def test_store_model_is_the_wheels_with_its_int32_biases_dequantized(store, wheelhouse, tmp_path):
    pin = WHEELS["pipecat-ai"]
    with zipfile.ZipFile(wheelhouse / pin.filename) as wheel:
        original = tmp_path / "smart-turn.onnx"
        original.write_bytes(wheel.read("pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"))
    feeds = MODELS["end-of-turn"].golden()
    expected = ort.InferenceSession(str(original), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    ours = ort.InferenceSession(str(store.path("end-of-turn.onnx")), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )[0]
    assert np.array_equal(ours, expected)
    model = onnx.load(str(store.path("end-of-turn.onnx")))
    int32 = {t.name for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT32}
    assert not [n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in int32]
    assert sum(n.op_type == "QuantizeLinear" for n in model.graph.node) > 50  # its INT8 quantization is kept


def test_the_wrapper_gives_the_models_probability_of_the_last_8_s(detector, store, beckett):
    session = ort.InferenceSession(str(store.path("end-of-turn.onnx")), providers=["CPUExecutionProvider"])
    direct = session.run(None, {"input_features": log_mel(beckett[-WINDOW:])[None]})[0].item()
    verdict = detector.judge(beckett, speech_end=len(beckett))
    assert abs(verdict.probability - direct) < 1e-5 and 0 <= direct <= 1
    assert (
        verdict.complete == (direct >= detector.threshold)
        and verdict.speech_end == len(beckett)
        and verdict.cost_ms > 0
    )


def test_the_turn_records_the_verdict_and_the_hangover_it_chose(make_conversation, detector, tts):
    from device.audio_file import resample

    audio = resample(tts.say("How much is a ticket for a student?"), tts.sample_rate, 16000)
    # Not in real time: the verdict is in by the pause's next frame however loaded the machine, and decides.
    assert SPECULATE_AFTER_MS + 32 < ENDPOINT.min_hangover_ms
    conversation = make_conversation(endpoint=ENDPOINT, end_of_turn=detector)
    play_visit(conversation, [Question(np.concatenate([np.zeros(8000, np.float32), audio]), "tickets")], realtime=False)
    (turn,) = conversation.turns
    report = turn_report(turn)["end_of_turn"]
    assert turn.end_of_turn is not None and report["verdict"] in ("complete", "incomplete")
    assert report["cost_ms"] > 0 and 0 <= report["probability"] <= 1
    if turn.end_of_turn.complete:  # the short hangover: the verdict came after SPECULATE_AFTER_MS and a frame
        assert abs(report["hangover_ms"] - ENDPOINT.min_hangover_ms) <= 32
    else:
        assert abs(report["hangover_ms"] - ENDPOINT.max_hangover_ms) <= 32  # one frame
    assert "end-of-turn" in conversation.runners()


def test_a_model_slower_than_the_fixed_hangover_is_not_asked_again(make_conversation, detector, tts, caplog):
    """Its clock says each call took 500 ms, more than the 336 ms a pause has before the fixed hangover
    ends it: after three such verdicts in a row the model is not called again and pauses get the fixed
    hangover (one log line)."""
    from device.audio_file import resample

    ticks = []

    def slow_clock() -> float:  # 500 ms between the start and the end of every call
        ticks.append(None)
        return len(ticks) * 0.5

    slow = EndOfTurnDetector(detector.runner, detector.threshold, clock=slow_clock)
    questions = ["Hello there.", "Where are the restrooms?", "How much is a ticket?", "Is there free Wi-Fi?"]
    conversation = make_conversation(endpoint=ENDPOINT, end_of_turn=slow)
    with caplog.at_level(logging.WARNING):
        play_visit(
            conversation,
            [
                Question(np.concatenate([np.zeros(8000, np.float32), resample(tts.say(q), tts.sample_rate, 16000)]), "")
                for q in questions
            ],
            realtime=False,
        )
    assert len(conversation.turns) == 4 and len(ticks) == 2 * 3  # three calls, then none
    assert caplog.text.count("not asked again") == 1
    last = turn_report(conversation.turns[-1])["end_of_turn"]
    assert last["verdict"] is None and abs(last["hangover_ms"] - ENDPOINT.hangover_ms) <= 32


def test_a_failing_model_leaves_the_fixed_hangover_and_says_so(make_conversation, vad, tts, caplog):
    from device.audio_file import resample

    broken = EndOfTurnDetector(vad.runner)  # the VAD's runner: the wrong model for these inputs, so it fails
    audio = resample(tts.say("Where are the restrooms?"), tts.sample_rate, 16000)
    conversation = make_conversation(endpoint=ENDPOINT, end_of_turn=broken)
    with caplog.at_level(logging.ERROR):
        play_visit(
            conversation, [Question(np.concatenate([np.zeros(8000, np.float32), audio]), "restrooms")], realtime=False
        )
    (turn,) = conversation.turns
    assert turn.answer.intent == "restrooms" and turn.end_of_turn is None
    assert abs(turn_report(turn)["end_of_turn"]["hangover_ms"] - ENDPOINT.hangover_ms) <= 32
    assert "the end-of-turn model failed" in caplog.text


def test_the_evaluation_set_has_both_splits_with_real_pauses_and_the_fixed_hangover_cuts_each_pause(pause_cases, vad):
    for cases in pause_cases.values():
        assert len(cases) >= 30 and len({c.voice for c in cases}) >= 4
        paused = [c for c in cases if c.pause_ms]
        assert len(paused) == len(cases) // 2 and {c.pause_ms for c in paused} <= set(PAUSES_MS)
        for case in paused:  # the pause is there: a run of silence at least 90% as long
            quiet = np.abs(case.audio[8000 : case.speech_end]) < 1e-3
            runs = np.diff(np.flatnonzero(np.diff(np.concatenate([[0], quiet.astype(int), [0]]))))[::2]
            assert runs.max() >= 0.9 * case.pause_ms * 16, case.text
    assert not {c.text for c in pause_cases["tuning"]} & {
        c.text for c in pause_cases["held-apart"]
    }  # no question in both
    results = evaluate(
        pause_cases["held-apart"][:8], vad, None, ENDPOINT
    )  # 400 ms of silence ends every 600-1000 ms pause
    assert [r.cut for r in results] == [bool(r.case.pause_ms) for r in results]


def test_a_hesitation_after_open_words_is_waited_for_and_straight_questions_are_not(pause_cases, vad, asr):
    """The tuning split's questions whose hesitation comes after "the", "if" or "to": with the fixed
    hangover every hesitation is cut; with open words waited on (the real recogniser on each pause,
    its words arriving 150 ms after the pause began, what it takes on the development PC: a clock
    of the test's, not of a loaded machine) none is, and the same questions said straight through
    wait no longer than without it."""
    cases = [c for c in pause_cases["tuning"] if c.text.partition("|")[0].split()[-1].lower() in OPEN_WORDS]
    fixed = dataclasses.replace(ENDPOINT, end_of_turn=False)
    before = evaluate(cases, vad, None, fixed)
    assert len(cases) >= 8 and all(r.cut for r in before if r.case.pause_ms)
    results = evaluate(
        cases, vad, None, dataclasses.replace(fixed, wait_after_open_words=True), asr, recognition_ms=150.0
    )
    assert not [r.case.text for r in results if r.case.pause_ms and r.cut]
    assert [r.waited_ms for r in results if not r.case.pause_ms] == [r.waited_ms for r in before if not r.case.pause_ms]
    assert all(r.heard for r in results)


def test_the_bench_hears_a_cut_hesitation_whole_when_the_visitor_goes_on_within_the_window(
    pause_cases, vad, asr, text_encoder
):
    """Cut by the fixed hangover, "Do you have a map" and "How long does it take" are heard whole with the
    rest their visitor says 600 and 1000 ms later, as the conversation rejoins them (tests/test_rejoin.py);
    with a window shorter than their pauses they are not."""
    from device.conversation.dialogue import Dialogue
    from device.conversation.knowledge import load_knowledge
    from device.settings import load_settings

    dialogue = Dialogue(text_encoder, load_knowledge(), load_settings().dialogue)
    cases = [
        c
        for c in pause_cases["tuning"]
        if c.pause_ms and c.text.startswith(("Do you have a map", "How long does it take"))
    ]
    fixed = dataclasses.replace(ENDPOINT, end_of_turn=False, rejoin_within_ms=1200)
    results = evaluate(cases, vad, None, fixed, asr, dialogue=dialogue)
    assert len(results) == 2 and all(r.cut and r.rejoined for r in results), [
        (r.case.text, r.cut, r.rejoined) for r in results
    ]
    assert all(0 < ms < r.case.pause_ms for r in results for ms in r.resumed_ms)  # went on after the end was decided
    short = evaluate(cases, vad, None, dataclasses.replace(fixed, rejoin_within_ms=100), asr, dialogue=dialogue)
    assert [r.rejoined for r in short] == [False, False]


def test_the_conversation_waits_out_a_hesitation_after_open_words(make_conversation, pause_cases, tts):
    """Heard whole; and a visitor who stops after "Is it possible to" for good is answered after the long
    hangover, the turn saying why."""
    from device.audio_file import resample

    (case,) = [c for c in pause_cases["tuning"] if c.text.startswith("Where is the") and c.pause_ms]
    endpoint = dataclasses.replace(ENDPOINT, end_of_turn=False, wait_after_open_words=True)
    conversation = make_conversation(endpoint=endpoint)
    unfinished = resample(tts.say("Is it possible to"), tts.sample_rate, 16000)
    # Not in real time: each pause's words are judged by its next frame, however loaded the machine.
    play_visit(
        conversation,
        [Question(case.audio, "exit"), Question(np.concatenate([np.zeros(8000, np.float32), unfinished]), "")],
        realtime=False,
    )
    whole, stopped = conversation.turns
    assert "exit" in whole.transcript.lower() and turn_report(whole)["end_of_turn"]["words"] == "other"
    report = turn_report(stopped)["end_of_turn"]
    assert report["words"] == "open" and abs(report["hangover_ms"] - endpoint.max_hangover_ms) <= 32


def test_a_question_the_robot_is_sure_of_is_answered_sooner_and_the_visits_pause_is_still_bridged(make_conversation):
    """With `end_on_known_question`: "Hello" ends at its words, not after the fixed hangover; "Excuse me,
    ... where are the restrooms?" is still one question ("Excuse me" is no known question). Each pause's
    words judged by its next frame (not in real time), so a loaded machine does not decide it."""
    endpoint = dataclasses.replace(ENDPOINT, end_of_turn=False, wait_after_open_words=True, end_on_known_question=True)
    conversation = make_conversation(endpoint=endpoint)
    play_visit(
        conversation, [q for q in bundled_questions() if q.name in ("01-hello.wav", "03-restrooms.wav")], realtime=False
    )
    hello, restrooms = conversation.turns
    assert "excuse" in restrooms.transcript.lower() and restrooms.answer.intent == "restrooms"
    assert hello.answer.intent == "greeting"
    report = turn_report(hello)["end_of_turn"]
    assert report["words"] == "known question" and report["hangover_ms"] < endpoint.hangover_ms - 32

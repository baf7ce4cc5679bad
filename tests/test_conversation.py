"""The whole turn loop on spoken questions: recorded and synthesized, with pauses, noise, silence,
a monologue, and a visitor who says stop."""

import json
import subprocess

import numpy as np
import pytest

from engines.model_specs import FRAME

from device.audio_file import resample
from device.conversation.visit import Question, bundled_questions, play_visit
from device.models.asr import RecognitionStopped, words
from device.sound.microphones import MicrophoneClock
from tests.conftest import run_cli


def spoken(tts, text: str) -> np.ndarray:
    audio = tts.say(text)
    return np.concatenate([np.zeros(4000, np.float32), resample(audio, tts.sample_rate, 16000) * 0.5])


def test_bundled_visit_is_understood_and_answered_in_order(make_conversation):
    conversation = make_conversation()
    questions = bundled_questions()
    play_visit(conversation, questions, realtime=False)
    turns = conversation.turns
    assert [words(t.transcript) for t in turns] == [words(q.text) for q in questions]
    assert [t.answer.intent for t in turns] == [q.intent for q in questions]
    assert all(t.timings.speculative_hit for t in turns)  # recognition started before the endpoint
    for turn in turns:
        assert [c.index for c in turn.chunks] == list(range(len(turn.chunks)))
        assert turn.chunks[-1].last and not any(c.last for c in turn.chunks[:-1])
        assert " ".join(c.text for c in turn.chunks if c.text) == turn.answer.text and not turn.chunks[-1].text
        starts = [c.start for c in turn.chunks]
        assert starts == list(np.cumsum([0] + [len(c.audio) for c in turn.chunks[:-1]]))
        assert not turn.interrupted
    # Every sample of every reply reached the speaker, in order.
    assert np.array_equal(conversation.speaker.take(), np.concatenate([t.reply_audio for t in turns]))


def test_recorded_speech_in_hall_noise(make_conversation, beckett):
    conversation = make_conversation()
    question = Question(beckett[: int(2.9 * 16000)], "beckett")  # "Ever tried. Ever failed."
    play_visit(conversation, [question], realtime=False, noise_db=-45)
    heard = [w for t in conversation.turns for w in words(t.transcript)]
    assert heard == ["ever", "tried", "ever", "failed"]  # two phrases, with a long pause between them
    assert conversation.turns[0].answer.intent == "rephrase"  # not a kiosk question: asked politely again


def test_synthesized_question_at_15_db_snr(make_conversation, tts):
    conversation = make_conversation()
    audio = spoken(tts, "Where can I buy tickets?")
    rms = np.sqrt(np.mean(audio[4000:] ** 2))
    play_visit(conversation, [Question(audio, "tickets")], realtime=False, noise_db=20 * np.log10(rms) - 15)
    assert conversation.turns[0].answer.intent == "tickets"


def test_speech_after_a_pause_stops_the_pause_s_recognition(make_conversation, tts, asr, monkeypatch):
    """A visitor who talks on after a short pause: the recognition started at it stops (its words are not
    wanted, and it would hold the one recognition thread the real end's words wait for); the question is
    heard whole."""
    outcomes = []
    transcribe = asr.transcribe

    def recognise(audio, stop=None):  # the real recognizer, its outcomes noted
        try:
            transcript = transcribe(audio, stop)
        except RecognitionStopped:
            outcomes.append("stopped")
            raise
        outcomes.append(transcript.text)
        return transcript

    monkeypatch.setattr(asr, "transcribe", recognise)
    conversation = make_conversation()
    pause = np.zeros(6 * FRAME, np.float32)  # over the 32 ms that starts a recognition, under the hangover
    audio = np.concatenate([spoken(tts, "Where can I"), pause, spoken(tts, "buy tickets?")[4000:]])
    for start in range(0, len(audio) - FRAME + 1, FRAME):  # as fast as it takes it: the pause's words still pending
        conversation.feed(audio[start : start + FRAME])
    play_visit(conversation, [Question(np.zeros(FRAME, np.float32), "tickets")], realtime=False)
    assert outcomes[0] == "stopped", outcomes
    assert [t.answer.intent for t in conversation.turns] == ["tickets"]
    heard = words(conversation.turns[0].transcript)  # "buy" or "by": the synthesized voice's
    assert heard[:3] == ["where", "can", "i"] and heard[-1] == "tickets", heard


def test_silence_and_hiss_start_no_turn(make_conversation):
    conversation = make_conversation()
    rng = np.random.default_rng(1)
    for frame in range(int(3 * 16000 / FRAME)):
        conversation.feed(np.zeros(FRAME, np.float32) if frame % 2 else rng.normal(0, 0.01, FRAME).astype(np.float32))
    assert not conversation.turns and conversation.idle()


def test_a_monologue_is_cut_at_its_maximum_and_answered_or_gives_way(make_conversation, tts):
    """Cut at max_utterance_s, it is answered; when the visitor goes on to a question while it is
    still being recognised, it gives way (60 s of babble held the next question 18 s)."""
    story = " and ".join(["then I walked through the big hall and looked at all the paintings"] * 12)
    monologue = spoken(tts, story)  # one run-on sentence without a pause long enough to end it
    assert len(monologue) > 25 * 16000
    question = spoken(tts, "How much is a ticket?")
    silence = np.zeros(FRAME, np.float32)

    def cut_off(conversation) -> None:
        frames = (monologue[i : i + FRAME] for i in range(0, len(monologue) - FRAME + 1, FRAME))
        while not conversation.turns:  # the monologue until it is cut: a turn is made at the cut
            conversation.feed(next(frames))

    def until_idle(conversation) -> None:
        for _ in range(3000):
            conversation.feed(silence)
            if conversation.turns and all(t.done.wait(0.01) for t in conversation.turns) and conversation.idle():
                return

    alone = make_conversation()
    cut_off(alone)
    until_idle(alone)
    first = alone.turns[0]
    assert first.utterance.truncated and first.utterance.seconds <= 15.0
    assert first.answer is not None and first.answer.text  # a polite answer, no crash

    followed = make_conversation()
    cut_off(followed)
    for frame in range(0, len(question) - FRAME + 1, FRAME):
        followed.feed(question[frame : frame + FRAME])
    until_idle(followed)
    monologue_turn, question_turn = followed.turns
    assert monologue_turn.utterance.truncated and monologue_turn.ignored == "cut off and talked over"
    assert words(question_turn.transcript) == ["how", "much", "is", "a", "ticket"]
    assert question_turn.answer.intent == "tickets" and question_turn.chunks


def test_stop_cancels_synthesis_and_playback(make_conversation, tts):
    conversation = make_conversation(realtime_speaker=True)  # the reply plays at a sound card's pace
    clock = MicrophoneClock(realtime=False)  # the endpointer counts frames: no need to wait for them

    def say(audio):
        for start in range(0, len(audio) - FRAME + 1, FRAME):
            clock.wait()
            conversation.feed(audio[start : start + FRAME])

    say(spoken(tts, "How much is a ticket?"))
    silence = np.zeros(FRAME, np.float32)
    while not conversation.turns or conversation.turns[0].timings.first_audio is None:
        clock.wait()
        conversation.feed(silence)
    say(spoken(tts, "Stop talking."))
    for _ in range(2000):  # silence until the stop is heard and acted on (the first reply still playing)
        conversation.feed(silence)
        if len(conversation.turns) > 1 and conversation.turns[1].done.wait(0.005):
            break
    first, stop = conversation.turns[0], conversation.turns[1]
    assert stop.answer.intent == "stop"
    assert first.done.wait(5) and first.interrupted
    assert conversation.speaker.wait_idle(5)  # the block in flight when the stop came (20 ms) may still play
    played = len(conversation.speaker.take())
    reply = sum(len(c.audio) for c in first.chunks)
    assert played < reply * 0.9  # cut off, not played to the end
    pace = MicrophoneClock(realtime=True)
    for _ in range(10):  # 320 ms at a sound card's pace: nothing more is played
        pace.wait()
        conversation.feed(silence)
    assert len(conversation.speaker.take()) == 0 and not conversation.speaker.busy


def test_demo_writes_replies_and_latency(tmp_path):
    result = run_cli("demo", "--fast", "--out", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "latency.json").read_text())
    expected = [q.intent for q in bundled_questions()]
    assert [t["intent"] for t in report["turns"]] == expected
    for turn in report["turns"]:
        assert (tmp_path / turn["audio"]).stat().st_size > 10000
        assert set(turn["ms"]) == {"endpoint", "asr", "dialogue", "first_chunk", "first_audio", "processing", "turn"}
        assert turn["ms"]["turn"] == pytest.approx(turn["ms"]["endpoint"] + turn["ms"]["processing"], abs=0.2)
        assert turn["visemes"][-1][1] == "rest"
    assert (tmp_path / "replies.wav").is_file()
    probe = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-show_entries",
            "stream=codec_type,width,height",
            "-of",
            "json",
            str(tmp_path / "avatar.mp4"),
        ],
        capture_output=True,
        text=True,
    )
    streams = json.loads(probe.stdout)["streams"]
    assert {s["codec_type"] for s in streams} == {"video", "audio"}
    assert [(s["width"], s["height"]) for s in streams if s["codec_type"] == "video"] == [(1280, 720)]

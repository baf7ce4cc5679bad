"""`bench turn --audio DIR` on a site's own recordings: structure, arithmetic, transcripts."""

import json

import numpy as np
import soundfile

from device.audio_file import resample
from device.models.asr import words
from tests.conftest import run_cli


def test_bench_turn_on_a_directory_of_recorded_and_synthesized_questions(tmp_path, beckett, tts):
    questions = tmp_path / "site"
    questions.mkdir()
    # A real recording at 44.1 kHz stereo, and a synthesized question at 22.05 kHz mono.
    phrase = resample(np.concatenate([np.zeros(4000, np.float32), beckett[: int(1.5 * 16000)]]), 16000, 44100)
    soundfile.write(questions / "a-recorded.wav", np.stack([phrase, phrase], axis=1), 44100)
    asked = tts.say("Is there a cafe in the building?") * 0.5
    soundfile.write(questions / "b-synthesized.wav", np.concatenate([np.zeros(6000, np.float32), asked]), 22050)
    (questions / "notes.txt").write_text("not audio, ignored")

    report_path, plot_path = tmp_path / "report.json", tmp_path / "plot.png"
    result = run_cli(
        "bench",
        "turn",
        "--audio",
        str(questions),
        "--repeat",
        "2",
        "--json",
        str(report_path),
        "--plot",
        str(plot_path),
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(report_path.read_text())
    assert report["turns_answered"] == 4 and report["repeat"] == 2
    assert set(report["backends"]) == {"vad", "asr-encoder", "asr-decoder", "tts", "tts-vocoder", "text"}
    assert all(b == "onnxruntime-cpu" for b in report["backends"].values())
    by_name = {q["question"]: q for q in report["questions"]}
    assert [words(t) for t in by_name["a-recorded.wav"]["transcripts"]] == [["ever", "tried"]]
    assert [words(t) for t in by_name["b-synthesized.wav"]["transcripts"]] == [
        ["is", "there", "a", "cafe", "in", "the", "building"]
    ]
    assert by_name["b-synthesized.wav"]["intents"] == ["food"]
    for turn in report["turns"]:
        spans = [turn["ms"][s] for s in ("endpoint", "asr", "dialogue", "first_chunk", "first_audio")]
        assert abs(sum(spans) - turn["ms"]["turn"]) < 0.5  # the stages add up to the turn latency
        # the silence waited is inside the turn, as the visitor waits it: the 400 ms hangover, or at
        # least min_hangover_ms (200) after a question the robot is sure of ("Is there a cafe...")
        assert turn["ms"]["endpoint"] > (300 if turn["end_of_turn"]["words"] != "known question" else 180)
    overall = report["overall_ms"]["turn"]
    assert overall["runs"] == 4 and overall["p50"] <= overall["p95"] <= overall["p99"]
    assert plot_path.stat().st_size > 10000 and plot_path.read_bytes()[:4] == b"\x89PNG"

    # without the speech cache (which also spares this run the cache's start-up synthesis)
    result = run_cli(
        "bench", "turn", "--audio", str(questions), "--repeat", "1", "--no-cache", "--compare", str(report_path)
    )
    assert result.returncode == 0, result.stderr
    assert "speech cache off" in result.stdout and report["speech_cache"]
    assert "ratio to the earlier report" in result.stdout and "turn" in result.stdout


def test_bench_turn_refuses_an_empty_directory(tmp_path):
    result = run_cli("bench", "turn", "--audio", str(tmp_path))
    assert result.returncode == 2 and "no .wav or .flac files" in result.stderr


def test_bench_turn_with_an_llm_reports_its_time_to_first_word(tmp_path, tts, llm_line):
    questions = tmp_path / "open"
    questions.mkdir()
    asked = tts.say("Who painted the Mona Lisa?") * 0.5
    soundfile.write(questions / "mona-lisa.wav", np.concatenate([np.zeros(6000, np.float32), asked]), 22050)
    asked = tts.say("Is there a cafe in the building?") * 0.5
    soundfile.write(questions / "cafe.wav", np.concatenate([np.zeros(6000, np.float32), asked]), 22050)
    report_path, config = tmp_path / "report.json", tmp_path / "orin-avatar.toml"
    config.write_text("[llm]\nfirst_token_s = 10.0\n")  # this 2-core CPU reads a grounded prompt in 1-2 s
    result = run_cli(
        "--config",
        str(config),
        "bench",
        "turn",
        "--audio",
        str(questions),
        "--repeat",
        "1",
        "--no-cache",
        "--llm",
        llm_line.url,
        "--json",
        str(report_path),
    )  # the cache's answers: the directory's test
    assert result.returncode == 0, result.stderr
    report = json.loads(report_path.read_text())
    assert report["llm"] == llm_line.url and report["turns_answered"] == 2
    by_source = {t["source"]: t for t in report["turns"]}
    assert set(by_source) == {"knowledge", "llm"}  # the cafe from the knowledge base, the painter from the LLM
    token = by_source["llm"]["llm_first_token_ms"]
    assert 0 < token < by_source["llm"]["ms"]["dialogue"] and by_source["knowledge"]["llm_first_token_ms"] is None
    assert report["llm_first_token_ms"]["runs"] == 1 and "llm_token" in result.stdout
    assert len(llm_line.requests) == 1


def test_bench_turn_refuses_an_llm_address_that_is_not_http(tmp_path):
    result = run_cli("bench", "turn", "--llm", "ftp://127.0.0.1/v1", "--audio", str(tmp_path))
    assert result.returncode == 2 and "--llm" in result.stderr

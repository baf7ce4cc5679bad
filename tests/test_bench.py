"""`bench models` reports the figures it promises (the figures themselves go in issue notes)."""

import json

from tests.conftest import run_cli


def test_bench_models_json_structure():
    result = run_cli("bench", "models", "vad", "text", "--runs", "20", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [m["model"] for m in report["models"]] == ["vad", "text"]
    for model in report["models"]:
        latency = model["latency_ms"]
        assert latency["runs"] == 20
        assert 0 < latency["p50"] <= latency["p95"] <= latency["p99"]
        assert model["peak_rss_mb"] > 50  # ONNX Runtime and the model are resident


def test_unknown_model_is_refused():
    result = run_cli("bench", "models", "llm")
    assert (
        result.returncode == 2
        and "choose from vad, asr-encoder, asr-decoder, tts, tts-vocoder, face, text, end-of-turn" in result.stderr
    )

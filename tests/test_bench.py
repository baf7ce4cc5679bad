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


def test_a_soak_stopped_with_sigterm_stops_its_daemon(store, tmp_path):
    """Killed outright, `bench soak` left its daemon running, holding the state directory's lock."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from tests.conftest import REPO

    env = os.environ | {"ORIN_AVATAR_HOME": str(tmp_path / "state")}  # its own state directory and lock
    command = [sys.executable, "-m", "device", "--store", str(store.root), "bench", "soak", "--minutes", "5"]
    bench = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, daemon = time.monotonic() + 180, None
    while daemon is None and time.monotonic() < deadline and bench.poll() is None:
        children = Path(f"/proc/{bench.pid}/task/{bench.pid}/children").read_text().split()
        daemon = next(
            (int(c) for c in children if b" run" in Path(f"/proc/{c}/cmdline").read_bytes().replace(b"\0", b" ")), None
        )
        time.sleep(0.5)
    assert daemon is not None, "the soak's daemon never started"
    time.sleep(2)
    bench.send_signal(signal.SIGTERM)
    _, stderr = bench.communicate(timeout=60)
    left = Path(f"/proc/{daemon}").exists()
    if left:
        os.kill(daemon, signal.SIGKILL)  # this test's own daemon, left behind
    assert bench.returncode == 2 and "the soak was stopped (SIGTERM); its daemon was stopped too" in stderr, stderr
    assert not left  # stopped and reaped

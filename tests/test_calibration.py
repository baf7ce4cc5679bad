"""`orin-avatar calibrate`: the committed tables pass their gates; the command makes tables and
refuses bad data without leaving a partial table."""

import json

import cv2
import numpy as np
import onnx
import pytest
import soundfile

from calibration import TABLES_DIR
from calibration.calibrate import check
from calibration.qdq import make_qdq_model
from calibration.table import read_table
from calibration.targets import TARGETS
from tests.conftest import run_cli

COMMITTED = sorted(p.stem for p in TABLES_DIR.glob("*.json"))


def test_every_int8_model_has_a_committed_table():
    assert COMMITTED == sorted(TARGETS)


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_table_passes_its_gate(store, name):
    result = check(name, store, TABLES_DIR)
    assert result.gate.passed, result.gate
    assert result.table.gates["passed"]  # as recorded when it was made


def test_qdq_model_runs_in_onnx_runtime(store, tmp_path):
    table = read_table(TABLES_DIR / "face.json", store.entries()["face.onnx"].sha256)
    make_qdq_model(store.path("face.onnx"), table, tmp_path / "face.qdq.onnx")
    ops = {n.op_type for n in onnx.load(str(tmp_path / "face.qdq.onnx")).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops


def test_check_cli_prints_the_gates():
    result = run_cli("calibrate", "face", "--check")
    assert result.returncode == 0, result.stderr
    assert "face" in result.stdout and "pass" in result.stdout and "IoU" in result.stdout


def test_calibrate_writes_a_table_from_a_sites_recordings(tmp_path, beckett, tts):
    data = tmp_path / "recordings"
    data.mkdir()
    for i, text in enumerate(["Where is the exit?", "How much is a ticket?", "Is there a cafe?", "Thank you!"]):
        audio = np.concatenate([c.audio for c in tts.synthesize(text)])
        soundfile.write(data / f"q{i}.wav", audio, tts.sample_rate)
    soundfile.write(data / "beckett.wav", beckett, 16000)
    out = tmp_path / "tables"
    out.mkdir()
    result = run_cli("calibrate", "vad", "--data", str(data), "--method", "minmax", "--samples", "40", "--out", str(out))
    assert "frame agreement" in result.stdout
    if result.returncode == 0:
        table = json.loads((out / "vad.json").read_text())
        assert table["method"] == "minmax" and table["gates"]["passed"] and table["amax"]
    else:
        assert not (out / "vad.json").exists() and "no table written" in result.stdout


def test_empty_data_directory_is_refused(tmp_path):
    result = run_cli("calibrate", "face", "--data", str(tmp_path), "--out", str(tmp_path))
    assert result.returncode == 2 and "at least 3" in result.stderr
    assert not list(tmp_path.glob("*.json"))


def test_images_that_are_not_images_are_refused(tmp_path):
    for i in range(3):
        cv2.imwrite(str(tmp_path / f"ok{i}.png"), np.zeros((64, 64, 3), np.uint8))
    (tmp_path / "broken.jpg").write_bytes(b"not really a jpeg")
    result = run_cli("calibrate", "face", "--data", str(tmp_path), "--out", str(tmp_path))
    assert result.returncode == 2 and "broken.jpg is not an image" in result.stderr
    assert not list(tmp_path.glob("*.json"))

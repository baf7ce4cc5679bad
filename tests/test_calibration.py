"""`orin-avatar calibrate`: the committed tables pass their gates; the command makes tables and
refuses bad data without leaving a partial table."""

import cv2
import numpy as np
import pytest

from calibration import TABLES_DIR
from calibration.calibrate import check
from calibration.targets import TARGETS
from tests.conftest import run_cli

COMMITTED = sorted(p.stem for p in TABLES_DIR.glob("*.json"))
SHIPPED = ["asr-encoder", "face", "vad"]


def test_tables_ship_for_the_models_whose_int8_passed():
    # Measured with `orin-avatar calibrate` (docs/integrator/int8.md has the figures and the sweeps' curves).
    assert COMMITTED == SHIPPED and set(COMMITTED) <= set(TARGETS)


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_table_passes_its_gates_for_every_renderer(store, name):
    result = check(name, store, TABLES_DIR)
    assert set(result.gates) == {"implicit", "explicit"}
    assert result.passed, result.gates
    assert all(result.table.gates[r]["passed"] for r in result.gates)  # as recorded when it was made
    int8, layers = result.layers
    assert 2 * int8 >= layers and list(result.layers) == result.table.gates["int8_layers"]


def test_check_reports_the_int8_share_fp16_layers_and_renderings():
    result = run_cli("calibrate", "face", "--check")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "weighted layers in INT8" in out and "IoU" in out and "pass" in out
    assert "calibration cache:" in out and "Q/DQ model:" in out and "implicit" in out and "explicit" in out


def test_calibrate_refuses_to_write_a_table_that_misses_its_gate(tmp_path):
    data = tmp_path / "sentences"
    data.mkdir()
    (data / "kiosk.txt").write_text(
        "\n".join(
            [
                "Where is the exit?",
                "How much is a ticket?",
                "Is there a cafe?",
                "When do you close?",
                "Where can I park?",
                "Is the museum open on Monday?",
                "Where are the toilets?",
                "Do you have a map?",
                "Can I take photos?",
                "Where is the lift?",
                "Is there free wifi?",
                "Who are you?",
            ]
        )
    )
    (data / "more.txt").write_text("Thank you!\nGoodbye.\nHello there.\n")
    (data / "notes.txt").write_text("Where do I leave my coat?\n")
    out = tmp_path / "tables"
    out.mkdir()
    result = run_cli(
        "calibrate", "text", "--data", str(data), "--method", "minmax", "--max-fp16-layers", "0", "--out", str(out)
    )
    assert result.returncode == 1, result.stderr
    assert "mean cosine" in result.stdout and "FAIL" in result.stdout
    assert "no table written" in result.stdout and "runs in FP16" in result.stdout and "0 of 48" in result.stdout
    assert not list(out.iterdir())  # no partial table left behind
    assert "collecting ranges [####################]" in result.stderr  # progress was shown


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

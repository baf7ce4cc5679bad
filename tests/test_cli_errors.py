"""Bad input gets a clear message and exit status 2, never a traceback."""

import numpy as np
import pytest
import soundfile

from tests.conftest import run_cli


def _fails_cleanly(result, *fragments):
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr


def test_empty_audio_file(tmp_path):
    path = tmp_path / "empty.wav"
    soundfile.write(path, np.zeros(0, np.float32), 16000)
    _fails_cleanly(run_cli("transcribe", str(path)), "empty.wav", "no audio samples")


def test_not_audio_at_all(tmp_path):
    path = tmp_path / "notes.wav"
    path.write_text("these are not samples")
    _fails_cleanly(run_cli("transcribe", str(path)), "notes.wav", "not a readable audio file")


def test_missing_audio_file(tmp_path):
    _fails_cleanly(run_cli("transcribe", str(tmp_path / "nope.wav")), "nope.wav")


def test_image_that_is_not_an_image(tmp_path):
    path = tmp_path / "photo.jpg"
    path.write_bytes(b"\x00\x01not a jpeg")
    _fails_cleanly(run_cli("detect-faces", str(path)), "photo.jpg", "not an image")


def test_empty_text_to_speak(tmp_path):
    _fails_cleanly(run_cli("speak", "   ", "--out", str(tmp_path / "x.wav")), "empty")


@pytest.mark.parametrize("content, fragment", [
    ("[cpu]\nthreads = 0\n", "threads must be 1 or more"),
    ("[cpu]\nthread = 2\n", "unknown key 'thread' in [cpu]"),
    ("[cpu]\nthreads = 'two'\n", "threads must be int"),
    ("[gpu]\n", "unknown section [gpu]"),
    ("[cpu\nthreads = 2\n", "line 1"),
])
def test_bad_settings_name_the_file_and_key(tmp_path, content, fragment):
    path = tmp_path / "orin-avatar.toml"
    path.write_text(content)
    _fails_cleanly(run_cli("--config", str(path), "models", "list"), str(path), fragment)

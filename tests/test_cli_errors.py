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


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("[cpu]\nthreads = 0\n", "threads must be between 1 and 64"),
        ("[cpu]\nthreads = 100000\n", "threads must be between 1 and 64"),
        ('[llm]\nurl = "http://127.0.0.1:99999/v1"\n', "has no valid port: give one between 1 and 65535"),
        ('[llm]\nurl = "http://:8000/v1"\n', "names no host and port"),
        ('[llm]\nurl = "ftp://127.0.0.1/v1"\n', "url must start with http:// or https://"),
        ("[cpu]\nthread = 2\n", "unknown key 'thread' in [cpu]"),
        ("[cpu]\nthreads = 'two'\n", "threads must be int"),
        ("[gpu]\n", "unknown section [gpu]"),
        ("[bargein]\nsound_onset_db = 3\n", "sound_onset_db must be 0 (off) or between 6 and 40 dB"),
        ("[bargein]\nspeech_over_room_db = -3\n", "speech_over_room_db must be between 0 (any level) and 20 dB"),
        ("[bargein]\necho_tail_ms = 150\n", "echo_tail_ms must be a multiple of 4 between 52 and 500 ms"),
        (
            '[bargein]\nstartup_phrase = "Hello.\\nI am ready."\n',
            "startup_phrase must be one line of at most 200 characters",
        ),
        ("[cpu\nthreads = 2\n", "line 1"),
    ],
)
def test_bad_settings_name_the_file_and_key(tmp_path, content, fragment):
    path = tmp_path / "orin-avatar.toml"
    path.write_text(content)
    _fails_cleanly(run_cli("--config", str(path), "models", "list"), str(path), fragment)


def _nan_wav(tmp_path):
    path = tmp_path / "nan.wav"
    soundfile.write(path, np.array([0.1, np.nan, 0.2] * 4000, np.float32), 16000, subtype="FLOAT")
    return path


def _truncated_wav(tmp_path):
    path = tmp_path / "cut.wav"
    soundfile.write(path, np.zeros(16000, np.float32), 16000)
    path.write_bytes(path.read_bytes()[:8000])
    return path


def _tiny_png(tmp_path):
    import cv2

    path = tmp_path / "line.png"
    cv2.imwrite(str(path), np.zeros((1, 8000, 3), np.uint8))
    return path


def _not_utf8(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"[cpu]\nthreads = 2 # \xff\xfe\n")
    return path


def _wrong_manifest(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "manifest.json").write_text("[1, 2, 3]")
    return store


# Each bad input of the review, with what the one-line message must name (exit 2, no traceback).
@pytest.mark.parametrize(
    "make_args, fragments",
    [
        (lambda t: ["speak", "?!...", "--out", str(t / "x.wav")], ["no speakable words"]),
        (lambda t: ["speak", "\x01\x02", "--out", str(t / "x.wav")], ["nothing to say"]),
        (lambda t: ["speak", "Hello.", "--out", str(t / "x.mp3")], ["ending in .wav"]),
        (lambda t: ["speak", "Hello.", "--out", str(t / "no" / "x.wav")], ["cannot write there"]),
        (lambda t: ["--config", str(t), "models", "list"], ["is not a regular file"]),
        (lambda t: ["--config", str(_not_utf8(t, "s.toml")), "models", "list"], ["not UTF-8"]),
        (lambda t: ["--store", str(_wrong_manifest(t)), "models", "list"], ["not a valid manifest"]),
        (lambda t: ["bench", "models", "--runs", "0", "vad"], ["--runs must be 1 or more"]),
        (lambda t: ["bench", "render", "--seconds", "0"], ["--seconds must be above 0"]),
        (lambda t: ["bench", "render", "--portrait", str(t / "me.jpg")], ["portrait", "no such file"]),
        (lambda t: ["avatar", "check", str(_nan_wav(t))], ["not an image OpenCV can read"]),
        (lambda t: ["avatar", "preview", str(t / "me.jpg"), "--out", str(t / "me.gif")], ["give a .mp4 or .mkv"]),
        (lambda t: ["bench", "turn", "--json", str(t / "no" / "r.json")], ["does not exist"]),
        (lambda t: ["bench", "turn", "--compare", str(t / "missing.json")], ["not a readable bench turn report"]),
        (lambda t: ["demo", "--out", str(_nan_wav(t))], ["is a file"]),
        (lambda t: ["run", "--speaker", str(t / "replies.txt")], ["ending in .wav"]),
        (lambda t: ["run", "--echo-db", "6"], ["--echo-db needs --mic and --speaker"]),
        (
            lambda t: ["run", "--mic", str(t / "v.wav"), "--speaker", str(t / "r.wav"), "--echo-db", "99"],
            ["out of range"],
        ),
        (lambda t: ["bench", "bargein", "--quiet", "0"], ["--interruptions and --quiet must be 1 or more"]),
        (lambda t: ["ask", ""], ["the question is empty"]),
        (lambda t: ["--threads", "100000", "ask", "hi"], ["--threads must be between 1 and 64"]),
        (lambda t: ["--threads", "-2", "ask", "hi"], ["--threads must be between 1 and 64"]),
        (lambda t: ["transcribe", str(_truncated_wav(t))], ["is truncated"]),
        (lambda t: ["transcribe", str(_nan_wav(t))], ["not numbers"]),
        (lambda t: ["detect-faces", str(_tiny_png(t))], ["8000x1 pixels"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, make_args, fragments):
    _fails_cleanly(run_cli(*make_args(tmp_path)), *fragments)


def test_a_knowledge_base_too_large_to_be_one_is_refused_unread(tmp_path):
    kb = tmp_path / "kb.toml"
    with open(kb, "wb") as file:
        file.truncate(1 << 30)  # 1 GiB (sparse): read whole, it took 3 GB and stalled the reload for 6 s
    settings = tmp_path / "s.toml"
    settings.write_text(f'[dialogue]\nknowledge = "{kb}"\n')
    _fails_cleanly(run_cli("--config", str(settings), "ask", "hi"), "kb.toml", "1024 MiB, more than the 16 MiB read")


def test_a_knowledge_base_that_is_not_utf8_is_named(tmp_path):
    kb = tmp_path / "kb.toml"
    kb.write_bytes('[[intent]]\nname = "cafe"\nexamples = ["Caf\xe9?"]\nanswer = "Up."\n'.encode("latin-1"))
    settings = tmp_path / "s.toml"
    settings.write_text(f'[dialogue]\nknowledge = "{kb}"\n')
    _fails_cleanly(run_cli("--config", str(settings), "ask", "hi"), "kb.toml", "not UTF-8")

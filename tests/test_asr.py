"""Moonshine on real recordings, through the CLI and the wrapper."""

import json
import threading

import numpy as np
import pytest
import soundfile

from device.models.asr import RecognitionStopped, read_vocabulary, words
from tests.conftest import run_cli

BECKETT = "Ever tried. Ever failed. No matter. Try again. Fail again. Fail better."


def test_beckett_transcribed_word_for_word(asr, beckett):
    assert words(asr.transcribe(beckett).text) == words(BECKETT)


def test_a_stopped_recognition_ends_between_decoding_steps(asr, beckett, monkeypatch):
    """`stop`, set from another thread while the words are decoded, ends the recognition at the next step;
    never set, it changes nothing."""
    assert words(asr.transcribe(beckett, threading.Event()).text) == words(BECKETT)
    stop, steps = threading.Event(), []
    infer = asr.decoder.infer

    def decode_step(inputs):  # the real decoder, counted; at the third step another thread asks to stop
        steps.append(len(steps))
        if len(steps) == 3:
            setter = threading.Thread(target=stop.set)
            setter.start()
            setter.join()
        return infer(inputs)

    monkeypatch.setattr(asr.decoder, "infer", decode_step)
    with pytest.raises(RecognitionStopped, match="after 3 token"):
        asr.transcribe(beckett, stop)
    assert len(steps) == 3


def test_cli_transcribes_any_rate_channels_and_sample_format(store, beckett, tmp_path):
    # 44.1 kHz stereo 32-bit float: the CLI must resample and mix down.
    from device.audio_file import resample

    stereo = np.stack([resample(beckett, 16000, 44100)] * 2, axis=1) * 0.8
    path = tmp_path / "beckett-44k-stereo.wav"
    soundfile.write(path, stereo, 44100, subtype="FLOAT")
    result = run_cli("transcribe", str(path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert words(report["text"]) == words(BECKETT)
    assert abs(report["audio_seconds"] - len(beckett) / 16000) < 0.01


def test_short_and_silent_audio_give_no_invented_words(asr):
    assert len(words(asr.transcribe(np.zeros(800, np.float32)).text)) <= 1
    assert len(words(asr.transcribe(np.zeros(32000, np.float32)).text)) <= 1


def test_vocabulary_has_special_tokens_and_byte_fallback(store):
    vocabulary = read_vocabulary(store.path("asr-tokenizer.bin"))
    assert vocabulary[:3] == [b"<unk>", b"<s>", b"</s>"]
    assert vocabulary[3:259] == [bytes([b]) for b in range(256)]
    assert len(vocabulary) == 32000

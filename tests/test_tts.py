"""Piper synthesis checked by ear of the recogniser: TTS -> ASR comes back word for word."""

import json

import numpy as np
import pytest
import soundfile

from device.audio_file import resample
from device.models.asr import words
from tests.conftest import run_cli

SENTENCES = [
    "The museum opens at nine in the morning.",
    "The restrooms are on the second floor, next to the elevators.",
    "You can buy tickets at the front desk.",
    "The cafe serves coffee and sandwiches until five.",
    "Lost items are kept at the information desk.",
    "Please ask me anything about the exhibition.",
    "Turn left after the gift shop to find the planetarium.",
]


@pytest.mark.parametrize("sentence", SENTENCES)
def test_round_trip_through_speech_recognition(tts, asr, sentence):
    chunks = list(tts.synthesize(sentence))
    audio = np.concatenate([c.audio for c in chunks])
    assert words(asr.transcribe(resample(audio, tts.sample_rate, 16000)).text) == words(sentence)


def test_variability_zero_is_repeatable_and_the_default_varies(tts, store):
    from device.models import catalog

    first, again = (tts.say("Welcome!") for _ in range(2))
    assert np.array_equal(first, again)
    lively = catalog.load_tts(store, variability=1.0)
    a, b = (lively.say("Welcome!") for _ in range(2))
    assert len(a) != len(b) or not np.array_equal(a, b)


def test_one_chunk_per_sentence_with_timings_that_cover_the_audio(tts):
    chunks = list(tts.synthesize("Hello there. Where would you like to go? The map is behind you."))
    assert len(chunks) == 3
    for chunk in chunks:
        starts = [p.start for p in chunk.phonemes]
        assert starts == sorted(starts) and starts[0] == 0
        end = chunk.phonemes[-1].start + chunk.phonemes[-1].length
        assert end == len(chunk.audio)  # the alignment accounts for every sample
        assert chunk.phonemes[0].phoneme == "^" and chunk.phonemes[-1].phoneme == "$"
        assert np.abs(chunk.audio).max() <= 1.0


def test_a_sentence_s_sound_comes_in_pieces_its_timings_with_the_first(tts):
    from engines.model_specs import VOCODER_PIECES

    sentence = "The restrooms are on the second floor, next to the elevators."
    pieces = list(tts.pieces([p for group in tts.sentences(sentence) for p in group], sentence))
    sizes = [len(p.audio) // tts.hop for p in pieces]
    assert (
        sizes[:2] == list(VOCODER_PIECES[:2]) and len(sizes) > 2 and all(size <= VOCODER_PIECES[-1] for size in sizes)
    )
    timings = pieces[0].phonemes
    assert timings[-1].start + timings[-1].length == sum(len(p.audio) for p in pieces)  # the whole sentence's
    assert all(p.phonemes == () for p in pieces[1:])
    assert np.array_equal(
        np.concatenate([p.audio for p in pieces]),
        tts.synthesize_phonemes([p for group in tts.sentences(sentence) for p in group], sentence).audio,
    )


def test_speak_cli_writes_wav_and_phoneme_timings(tmp_path):
    out = tmp_path / "hello.wav"
    result = run_cli("speak", "Good morning, visitor.", "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    audio, rate = soundfile.read(out)
    assert rate == report["sample_rate"] == 22050
    assert abs(len(audio) / rate - report["seconds"]) < 0.001
    last = report["phonemes"][-1]
    assert last["start"] + last["samples"] == len(audio)
    assert {"m", "ɔ", "n"} <= {p["phoneme"] for p in report["phonemes"]}

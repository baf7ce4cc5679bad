"""Silero VAD on a real recording, on silence and on noise."""

import numpy as np

from engines.model_specs import FRAME


def test_speech_frames_in_beckett_follow_the_words(vad, beckett):
    probabilities = vad.probabilities(beckett)
    speech = probabilities > 0.5
    assert 0.3 < speech.mean() < 0.9  # six short phrases with pauses between them
    # The recording starts with a breath of silence before "Ever tried".
    assert not speech[:3].any()
    # Speech comes in several separate runs (the phrases), not one block.
    runs = np.count_nonzero(np.diff(speech.astype(int)) == 1)
    assert runs >= 4


def test_no_speech_in_silence_or_hiss(vad):
    assert (vad.probabilities(np.zeros(16000 * 3, np.float32)) < 0.5).all()
    hiss = np.random.default_rng(0).normal(0, 0.01, 16000 * 3).astype(np.float32)
    assert (vad.probabilities(hiss) < 0.5).mean() > 0.95


def test_frame_of_the_wrong_size_is_refused(vad):
    import pytest

    with pytest.raises(ValueError, match=str(FRAME)):
        vad.probability(np.zeros(FRAME - 1, np.float32))

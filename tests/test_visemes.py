"""Phoneme timings become a mouth-shape timeline in speaker samples."""

from device.conversation.visemes import SHAPES, shape_of, viseme_timeline
from device.models.tts import PhonemeTiming


def test_phonemes_map_to_distinct_mouth_shapes():
    assert len(SHAPES) >= 10
    assert shape_of("m") == shape_of("b") == shape_of("p") == "MBP"
    assert shape_of("f") == shape_of("v") == "FV"
    assert shape_of("ɑ") == "AI" and shape_of("u") == "U" and shape_of("θ") == "TH"
    assert shape_of(" ") == shape_of("^") == shape_of(",") == "rest"
    assert shape_of("ˈ") is None and shape_of("ː") is None  # stress and length marks


def test_timeline_merges_repeats_skips_marks_and_ends_at_rest():
    phonemes = (
        PhonemeTiming("^", 0, 100),
        PhonemeTiming("m", 100, 50),
        PhonemeTiming("ˈ", 150, 0),
        PhonemeTiming("ɑ", 150, 80),
        PhonemeTiming("ː", 230, 20),
        PhonemeTiming("m", 250, 40),
        PhonemeTiming("b", 290, 30),
        PhonemeTiming("$", 320, 10),
    )
    timeline = viseme_timeline(phonemes, offset=1000)
    assert [(v.sample, v.shape) for v in timeline] == [
        (1000, "rest"),
        (1100, "MBP"),
        (1150, "AI"),
        (1250, "MBP"),
        (1320, "rest"),
    ]


def test_synthesized_sentence_opens_and_closes_the_mouth(tts):
    chunk = next(tts.synthesize("Mama bought a fine violin."))
    timeline = viseme_timeline(chunk.phonemes)
    shapes = [v.shape for v in timeline]
    assert shapes[0] == "rest" and shapes[-1] == "rest"
    assert {"MBP", "AI", "FV", "L"} <= set(shapes)
    samples = [v.sample for v in timeline]
    assert samples == sorted(samples) and samples[-1] <= len(chunk.audio)


def test_a_stress_mark_takes_the_shape_of_the_vowel_it_stresses():
    # Piper gives the stress mark a duration, and the stressed vowel sounds in it ("wˈɛl...")
    phonemes = (
        PhonemeTiming("w", 0, 40),
        PhonemeTiming("ˈ", 40, 60),
        PhonemeTiming("ɛ", 100, 30),
        PhonemeTiming("l", 130, 50),
    )
    timeline = viseme_timeline(phonemes)
    assert [(v.sample, v.shape) for v in timeline] == [(0, "WQ"), (40, "E"), (130, "L"), (180, "rest")]

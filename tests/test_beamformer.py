"""The microphone array's beam: what it passes, what it takes out in a hall, and where the camera
points it."""

from __future__ import annotations

import numpy as np
import pytest

from engines.model_specs import SPEECH_RATE

from device.bench.hall import Hall, load_questions, microphone_noise
from device.settings import SettingsError, load_settings
from device.sound.beamformer import HOP, Beamformer, MicArray, direction_angles, look_direction
from device.sound.echo_room import block_power

ARRAY = MicArray.circular(4, 0.032)


def plane_wave(signal: np.ndarray, array: MicArray, azimuth_rad: float) -> np.ndarray:
    """(microphones, samples): a far source in that direction as each microphone hears it (each
    earlier by its position along the direction, as a fraction of a sample)."""
    lead = array.positions @ look_direction(azimuth_rad) / 343.0
    spectrum, frequencies = np.fft.rfft(signal), np.fft.rfftfreq(len(signal), 1 / SPEECH_RATE)
    return np.stack([np.fft.irfft(spectrum * np.exp(2j * np.pi * frequencies * t), len(signal)) for t in lead]).astype(
        np.float32
    )


def test_what_comes_from_where_the_beam_points_passes_unchanged_a_hop_late_in_any_pieces():
    source = np.random.default_rng(0).standard_normal(SPEECH_RATE).astype(np.float32) * 0.1
    heard = plane_wave(source, ARRAY, np.radians(40))
    whole, pieces = Beamformer(ARRAY, SPEECH_RATE), Beamformer(ARRAY, SPEECH_RATE)
    whole.steer(np.radians(40))
    pieces.steer(np.radians(40))
    beam = whole.process(heard)
    cuts = [0, 100, 612, 613, 5000, 9000, len(source)]  # the reader's blocks come in any size
    pieced = np.concatenate([pieces.process(heard[:, a:b]) for a, b in zip(cuts, cuts[1:])])
    settled = slice(4 * HOP, len(source) - 4 * HOP)  # the circular plane wave wraps at the ends
    assert len(pieced) == len(beam) == len(source) // HOP * HOP
    np.testing.assert_allclose(pieced, beam, atol=1e-5)
    error = beam[HOP:][settled] - source[: len(source) - HOP][settled]
    assert np.std(error) < 0.05 * np.std(source)
    # Pointed elsewhere, the same sound is not passed unchanged: the steering is what made it so.
    away = Beamformer(ARRAY, SPEECH_RATE)
    away.steer(np.radians(-140))
    assert np.std(away.process(heard)[HOP:][settled] - source[: len(source) - HOP][settled]) > 0.3 * np.std(source)


@pytest.fixture(scope="module")
def hall_sounds(store):
    """A question from the hall set and its talk, at the first of four microphones and at all four."""
    questions, talkers = load_questions(store, "tuning", limit=1)
    hall = Hall(len(talkers), seed=3, array=ARRAY)
    speech = hall.visitor(questions[0].audio)
    babble = hall.babble(talkers, speech.shape[1], np.random.default_rng(1))
    scale = 10 ** (-26 / 20) / np.sqrt(block_power(speech[0]).max())
    hiss = microphone_noise(speech.shape, -26.0, np.random.default_rng(2))
    return hall, speech * scale, babble * scale, hiss


def _snr_db(speech: np.ndarray, noise: np.ndarray) -> float:
    power = block_power(speech)
    active = power > power.max() / 100
    return float(10 * np.log10(power[active].mean() / block_power(noise)[: active.size][active].mean()))


def test_steered_at_the_visitor_the_beam_hears_them_over_the_hall_better_than_one_microphone(hall_sounds):
    """Speech and talk go through the same (linear) beam separately, so each one's share is known."""
    hall, speech, babble, hiss = hall_sounds
    toward = direction_angles(hall.visitor_direction)

    def beam(sound: np.ndarray, direction: tuple[float, float]) -> np.ndarray:
        beamformer = Beamformer(ARRAY, SPEECH_RATE)
        beamformer.steer(*direction)
        return beamformer.process(np.pad(sound, ((0, 0), (0, HOP))))[HOP:]

    one = _snr_db(speech[0], babble[0] + hiss[0])
    at_visitor = _snr_db(beam(speech, toward), beam(babble + hiss, toward))
    on_axis = {}
    for name, sound in (("visitor", speech + hiss), ("talk", babble + hiss)):
        beamformer = Beamformer(ARRAY, SPEECH_RATE)
        beamformer.steer(*toward)
        beamformer.process(sound)
        hops = len(beamformer.on_axis_db)
        levels = np.mean(sound[0][: hops * HOP].reshape(hops, HOP) ** 2, axis=1)  # each window's newer half
        on_axis[name] = float(np.median(np.array(beamformer.on_axis_db)[levels > levels.max() / 100]))
    assert on_axis["visitor"] > -1.5 and on_axis["talk"] < -3.5, on_axis  # where each came from
    behind = _snr_db(beam(speech, (toward[0] + np.pi, 0.0)), beam(babble + hiss, (toward[0] + np.pi, 0.0)))
    assert at_visitor > one + 3.0, (one, at_visitor)
    assert at_visitor > behind + 3.0, (at_visitor, behind)


def test_the_camera_says_which_way_a_face_is():
    camera = load_settings().camera  # 70 degrees across, 1280 x 720
    assert camera.direction_of((0.0, 0.0)) == (0.0, 0.0)
    azimuth, elevation = camera.direction_of((1.0, -1.0))  # the top right corner
    assert np.degrees(azimuth) == pytest.approx(35.0)
    assert np.degrees(elevation) == pytest.approx(np.degrees(np.arctan(np.tan(np.radians(35)) * 720 / 1280)))
    assert np.degrees(camera.direction_of((-0.5, 0.2))[0]) < 0 > np.degrees(camera.direction_of((-0.5, 0.2))[1])


@pytest.mark.parametrize(
    "channels, radius, message",
    [
        ([1], 32.0, "2 or more microphones"),
        ([1, 1, 2], 32.0, "distinct"),
        ([1, -2], 32.0, "distinct capture channels"),
        ([1, 2, 3, 4], 1.0, "array_radius_mm"),
    ],
)
def test_an_array_that_cannot_be_is_refused_with_the_key(tmp_path, channels, radius, message):
    config = tmp_path / "array.toml"
    config.write_text(f"[audio]\narray_channels = {channels}\narray_radius_mm = {radius}\n")
    with pytest.raises(SettingsError, match=message):
        load_settings(config)
    config.write_text("[audio]\narray_channels = [1, 2, 3, 4]\n")
    assert load_settings(config).audio.array_channels == (1, 2, 3, 4)

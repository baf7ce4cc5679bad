"""The portrait avatar on real photos: the mouth, lids and irises move as the pose says, measured by the
face mesh on the rendered frames; photos that will not work are refused with their reason; the
face's landmarks stay in the state directory, readable by the service only."""

from __future__ import annotations

import stat

import cv2
import numpy as np
import pytest

from device.avatar.mouths import SHAPES
from device.avatar.photo_check import check_photo
from device.avatar.portrait import PortraitRenderer, cached_landmarks, locate_face
from device.avatar.renderer import Pose
from device.bundled import SAMPLE_PHOTO
from tests.conftest import run_cli, skimage_bgr


@pytest.fixture(scope="module")
def portrait(store, tmp_path_factory):
    photo = cv2.imread(str(SAMPLE_PHOTO))
    landmarks = cached_landmarks(photo, store, cache_dir=tmp_path_factory.mktemp("portraits"))
    return PortraitRenderer(photo, landmarks, 1280, 720)


def _seen(frame: np.ndarray, store) -> np.ndarray:
    """The face mesh of a rendered frame, found afresh by the detector and the mesh model."""
    return locate_face(frame, store)


def _mouth(frame: np.ndarray, store) -> dict[str, float]:
    """The jaw (nose tip to chin), the lips' outer opening and the mouth's width, in eye spans (the
    distance between the eyes' outer corners, which no viseme moves), on a rendered frame."""
    p = _seen(frame, store).points
    span = lambda a, b: float(np.linalg.norm(p[a] - p[b]) / np.linalg.norm(p[33] - p[263]))  # noqa: E731
    return {"jaw": span(1, 152), "lips": span(0, 17), "width": span(61, 291)}


def test_each_viseme_opens_or_rounds_the_mouth_as_its_phonemes_should(portrait, store):
    seen = {
        shape: _mouth(portrait.render(Pose(SHAPES[shape])), store) for shape in ("rest", "AI", "O", "U", "E", "MBP")
    }
    jaw, lips, width = ({shape: m[key] for shape, m in seen.items()} for key in ("jaw", "lips", "width"))
    assert jaw["AI"] > jaw["O"] > jaw["U"] > jaw["rest"]  # as open as the shapes say
    assert (
        jaw["AI"] > jaw["rest"] + 0.08 and lips["AI"] > lips["rest"] + 0.06
    )  # open vowels drop the jaw, part the lips
    assert width["U"] < width["rest"] - 0.04 and width["O"] < width["rest"] - 0.01  # rounded lips are narrower
    assert width["E"] > width["rest"] + 0.05  # spread lips are wider
    assert abs(jaw["MBP"] - jaw["rest"]) < 0.01 and abs(lips["MBP"] - lips["rest"]) < 0.01  # m, b, p: closed


def test_a_blink_closes_both_eyes(portrait, store):
    """Where the iris model finds each iris in the open eyes, a blink shows lid instead: the dark iris
    is gone. (The face mesh and the iris model are no judges of a blink: they draw a closed lid's
    contour about as open as an open one's, 0.28 against 0.26 of the eye's width.)"""
    awake, shut = portrait.render(Pose(SHAPES["rest"])).copy(), portrait.render(Pose(SHAPES["rest"], lids=1.0))
    seen = _seen(awake, store)
    grey_awake, grey_shut = (cv2.cvtColor(f, cv2.COLOR_BGR2GRAY).astype(float) for f in (awake, shut))
    ys, xs = np.mgrid[: awake.shape[0], : awake.shape[1]]
    for centre in seen.irises:
        disc = (xs - centre[0]) ** 2 + (ys - centre[1]) ** 2 <= (0.7 * seen.iris_radius) ** 2
        assert grey_shut[disc].mean() > grey_awake[disc].mean() + 50, (grey_awake[disc].mean(), grey_shut[disc].mean())


def test_the_irises_follow_a_moving_gaze_target(portrait, store):
    def across(gaze):  # each iris's offset from its eye's middle, in eye widths (+: to the frame's right)
        seen = _seen(portrait.render(Pose(SHAPES["rest"], gaze=gaze)), store)
        p = seen.points
        return [
            float((iris[0] - (p[a, 0] + p[b, 0]) / 2) / abs(p[b, 0] - p[a, 0]))
            for iris, (a, b) in zip(seen.irises, ((33, 133), (362, 263)))
        ]

    positions = [across((x, 0.0)) for x in (-1.0, -0.3, 0.3, 1.0)]  # a visitor crossing the hall
    for eye in range(2):
        path = [position[eye] for position in positions]
        assert path == sorted(path) and path[-1] - path[0] > 0.05, path


@pytest.mark.parametrize(
    "name, make, reason",
    [
        ("no face", lambda: skimage_bgr("coffee"), "no face found"),
        ("two faces", lambda: np.hstack([cv2.imread(str(SAMPLE_PHOTO)), skimage_bgr("camera")]), "2 faces found"),
        (
            "a profile",
            lambda: cv2.resize(skimage_bgr("camera"), None, fx=2, fy=2, interpolation=cv2.INTER_CUBIC),
            "is turned to its",
        ),
        ("a tiny face", lambda: _small(cv2.imread(str(SAMPLE_PHOTO)), 0.3), "px from forehead to chin"),
    ],
)
def test_a_photo_that_will_not_work_is_refused_with_its_reason(store, name, make, reason):
    verdict = check_photo(make(), store)
    assert not verdict.usable and any(reason in problem for problem in verdict.problems), (name, verdict)


def test_the_bundled_photo_is_usable_and_the_cli_says_why_another_is_not(tmp_path):
    result = run_cli("avatar", "check", str(SAMPLE_PHOTO))
    assert result.returncode == 0 and "usable" in result.stdout, result.stderr
    cv2.imwrite(str(tmp_path / "hall.png"), skimage_bgr("coffee"))
    result = run_cli("avatar", "check", str(tmp_path / "hall.png"))
    assert result.returncode == 1 and "problem: no face found" in result.stdout


def test_the_landmarks_stay_in_the_state_directory_readable_by_the_service_only(store, tmp_path):
    photo = cv2.imread(str(SAMPLE_PHOTO))
    first = cached_landmarks(photo, store, cache_dir=tmp_path / "portraits")
    (cached,) = (tmp_path / "portraits").iterdir()
    assert (
        stat.S_IMODE(cached.stat().st_mode) == 0o600 and stat.S_IMODE((tmp_path / "portraits").stat().st_mode) == 0o700
    )
    again = cached_landmarks(photo, store, cache_dir=tmp_path / "portraits")
    assert np.array_equal(first.points, again.points)


def _small(photo: np.ndarray, scale: float) -> np.ndarray:
    canvas = np.full((512, 512, 3), 200, np.uint8)
    small = cv2.resize(photo, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    canvas[100 : 100 + small.shape[0], 100 : 100 + small.shape[1]] = small
    return canvas

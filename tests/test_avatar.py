"""The avatar: lip-sync on the playback clock, gaze, states, and real windows under Xvfb."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from device.avatar.animator import Avatar, State
from device.avatar.display import screen_shows
from device.avatar.mouths import LEAD_S, mouth_at
from device.avatar.renderer import Colours, Renderer
from device.bench.render import MAX_LAG_MS, mouth_lag
from device.conversation.visemes import spoken_with_visemes, viseme_timeline
from device.settings import load_settings
from tests.conftest import REPO, run_cli
from tests.x_server import screenshot, x_server


@pytest.fixture(scope="module")
def renderer():
    avatar = load_settings().avatar
    return Renderer(640, 360, Colours.of(avatar))


def test_mouth_follows_the_phonemes_of_a_synthesized_sentence(tts):
    chunk = next(tts.synthesize("Mama, am I a model?"))
    visemes = viseme_timeline(chunk.phonemes)
    lead = int(LEAD_S * tts.sample_rate)
    checked = 0
    for current, following in zip(visemes, visemes[1:]):
        middle = (current.sample + following.sample) // 2 - lead
        if following.sample - current.sample < 0.05 * tts.sample_rate or middle < 0:
            continue
        mouth = mouth_at(visemes, middle, tts.sample_rate)
        if current.shape == "MBP":
            assert mouth.open < 0.1  # lips together on m, b, p
        elif current.shape in ("AI", "O"):
            assert mouth.open > 0.4
        checked += 1
    assert checked >= 4
    assert {"MBP", "AI"} <= {v.shape for v in visemes}
    end = visemes[-1].sample
    assert mouth_at(visemes, end + tts.sample_rate, tts.sample_rate).open == 0.0


def test_mouth_closes_when_the_audio_stops_or_is_cancelled(tts):
    chunk = next(tts.synthesize("Hello and welcome."))
    avatar = Avatar()
    played = [int(0.4 * tts.sample_rate)]
    avatar.speak(viseme_timeline(chunk.phonemes), tts.sample_rate, lambda: played[0])
    opened = max(avatar.pose(i / 30).mouth.open for i in range(1, 4))
    assert avatar.state == State.SPEAKING and opened > 0.1
    avatar.silence()  # cancelled
    closing = [avatar.pose(0.2 + i / 30).mouth.open for i in range(10)]
    assert closing[-1] < 0.01 and avatar.state == State.ATTENTIVE


def test_gaze_follows_a_moving_target_and_returns_to_centre():
    avatar = Avatar(seed=3)
    t, errors = 0.0, []
    for step in range(90):  # a visitor walking left to right over 3 s
        target = (-0.8 + 1.6 * step / 89, 0.2)
        avatar.look_at(target)
        t += 1 / 30
        gaze = avatar.pose(t).gaze
        errors.append(abs(gaze[0] - target[0]))
    assert np.mean(errors[30:]) < 0.25  # follows, within saccades and smoothing
    assert avatar.pose(t).gaze[0] > 0.4
    avatar.look_at(None)
    for _ in range(60):
        t += 1 / 30
        gaze = avatar.pose(t).gaze
    assert abs(gaze[0]) < 0.2 and abs(gaze[1]) < 0.2


def test_states_look_different(renderer):
    avatar = Avatar(seed=1)
    frames = {}
    for state in State:
        avatar.set_state(state)
        frames[state] = renderer.render(avatar.pose(10.0)).astype(int)
    for a in State:
        for b in State:
            if a != b:
                assert np.abs(frames[a] - frames[b]).sum() > 1000, (a, b)


def test_blinks_happen_at_natural_intervals():
    avatar = Avatar(seed=5)
    lids = [avatar.pose(i / 30).lids for i in range(30 * 60)]
    starts = [i for i in range(1, len(lids)) if lids[i] > 0 and lids[i - 1] == 0]
    gaps = np.diff(starts) / 30
    assert 6 <= len(starts) <= 40 and gaps.min() >= 1.5


def test_no_display_falls_back_with_one_line_and_never_aborts(tmp_path):
    code = (
        "import logging, sys; logging.basicConfig(level=logging.WARNING)\n"
        "from device.avatar.display import open_display\n"
        "sink = open_display('window', 320, 180, 30, path=None)\n"
        "print(sink.name)\n"
    )
    for display in (None, ":77"):
        env = {k: v for k, v in os.environ.items() if k != "DISPLAY"} | ({"DISPLAY": display} if display else {})
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0 and result.stdout.strip() == "null", result.stderr
        assert result.stderr.count("no X display") == 1


@pytest.fixture
def xvfb():
    with x_server(640, 360) as (display, _):
        yield display


def test_window_under_xvfb_shows_exactly_the_rendered_frame(xvfb, tmp_path, monkeypatch):
    monkeypatch.setenv("DISPLAY", xvfb)
    frame_path = tmp_path / "frame.npy"
    code = (
        "import signal, sys, time, numpy as np\n"
        "from device.avatar.animator import Avatar\n"
        "from device.avatar.display import open_display\n"
        "from device.avatar.renderer import Colours, Renderer\n"
        "from device.settings import load_settings\n"
        "renderer = Renderer(640, 360, Colours.of(load_settings().avatar))\n"
        "frame = renderer.render(Avatar(seed=2).pose(1.0))\n"
        f"np.save({str(frame_path)!r}, frame)\n"
        "sink = open_display('window', 640, 360, 30)\n"
        "print(sink.name, flush=True)\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit())\n"
        "try:\n"
        "    while sink.show(frame):  # until the test has its screenshot and stops it (or the window's process ends)\n"
        "        time.sleep(0.02)\n"
        "finally:\n"
        "    sink.close()\n"
    )
    env = os.environ | {"DISPLAY": xvfb, "QT_QPA_PLATFORM": "xcb"}
    shower = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert shower.stdout.readline().strip() == "window"
        expected = np.load(frame_path)
        screen_before = screen_shows(expected, (0, 0, 640, 360))
        started = time.monotonic()
        deadline = started + 60
        while True:  # until the X server has mapped and painted the window (or the deadline)
            screen = screenshot(xvfb, 640, 360)[:, :, ::-1]
            ended = shower.poll() is not None
            if np.array_equal(screen, expected) or time.monotonic() > deadline or ended:
                break
        # What the window process checks before it trusts a window (else it makes it again): whether the
        # screen shows the frame where the window draws it, fitted and centred in the window's image area.
        checks = [
            screen_shows(expected, (0, 0, 640, 360)),
            screen_shows(expected[:, 80:560], (0, 0, 640, 360)),  # 4:3 in 16:9: bars left and right
            screen_shows(expected[:, 80:560], (80, 0, 480, 360)),
            screen_shows(expected[:, :480], (0, 0, 640, 360)),
        ]  # the wrong part of the frame
    finally:
        shower.terminate()  # closes the window (its process holds our pipes too)
        _, err = shower.communicate(timeout=30)
    assert np.array_equal(screen, expected), (
        f"{np.mean(screen != expected):.1%} of the screen differs after "
        f"{time.monotonic() - started:.1f} s; the window's process "
        f"{'ended with ' + str(shower.returncode) if ended else 'was still showing'} "
        f"and said: {err[-2000:]}"
    )
    assert screen_before is False  # the window's process takes over 0.2 s to its first frame
    assert checks == [True, True, True, False]
    monkeypatch.setenv("DISPLAY", ":77")
    assert screen_shows(expected, (0, 0, 640, 360)) is None


def test_bench_render_reports_fps_cpu_and_av_offset():
    result = run_cli("bench", "render", "--seconds", "3", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["fps"] > 20 and report["cpu_ms_per_frame"] > 0
    assert abs(report["av_offset_ms"]) <= MAX_LAG_MS and report["av_correlation"] > 0


def test_the_offset_estimator_finds_a_known_shift_of_the_sound(tts):
    audio, _ = spoken_with_visemes(tts, "Lost property is kept at the information desk for thirty days.")
    rate, frames = tts.sample_rate, np.arange(0.1, len(audio) / tts.sample_rate - 0.1, 1 / 30)
    for shift_ms in (60, -40):  # a "mouth" that is the sound's own envelope, late or early
        playing = (frames * rate).astype(int)
        opens = np.array(
            [
                np.sqrt(np.mean(audio[max(0, s - rate // 100) : s + rate // 100] ** 2))
                for s in playing - shift_ms * rate // 1000
            ]
        )
        lag, correlation = mouth_lag(opens, playing, audio, rate)
        assert abs(lag - shift_ms) <= 5 and correlation > 0.9


def test_the_mouth_is_within_40_ms_of_the_sound(tts):
    """On the playback clock, frame by frame at 30 fps, through the animator's smoothing."""
    audio, visemes = spoken_with_visemes(tts, "The cafe is on the first floor, next to the shop. We open at nine.")
    avatar, played = Avatar(), [0]
    avatar.speak(visemes, tts.sample_rate, lambda: played[0])
    opens, playing = [], []
    for t in np.arange(0, len(audio) / tts.sample_rate, 1 / 30):
        played[0] = int(t * tts.sample_rate)
        opens.append(avatar.pose(float(t)).mouth.open)
        playing.append(played[0])
    lag, correlation = mouth_lag(np.array(opens), np.array(playing), audio, tts.sample_rate)
    assert abs(lag) <= 40 and correlation > 0.4


def test_states_change_on_conversation_messages():
    from device.messages import Interrupt, ReplyChunk, SpeechStarted, Utterance, Viseme

    avatar = Avatar()
    clock = [0]
    avatar.on_message(SpeechStarted(0), lambda: clock[0])
    assert avatar.state == State.LISTENING and avatar.pose(0.1).glow == 1.0
    avatar.on_message(Utterance(np.zeros(10, np.float32), 0, 10, 20, 0), lambda: clock[0])
    assert avatar.state == State.THINKING and avatar.pose(0.2).brows < 0
    chunk = ReplyChunk(
        1, 0, "Hi.", np.zeros(22050, np.float32), 22050, 0, (Viseme(0, "AI"), Viseme(20000, "rest")), False
    )
    avatar.on_message(chunk, lambda: clock[0])
    assert avatar.state == State.SPEAKING
    second = ReplyChunk(
        1, 1, "Bye.", np.zeros(22050, np.float32), 22050, 22050, (Viseme(22050, "O"), Viseme(40000, "rest")), True
    )
    avatar.on_message(second, lambda: clock[0])
    clock[0] = 30000
    opened = [avatar.pose(0.3 + i / 30).mouth for i in range(6)][-1]
    assert opened.round > 0.5  # the second sentence's O, on the same clock
    avatar.on_message(Interrupt("stop"), lambda: clock[0])
    assert avatar.state == State.ATTENTIVE

"""The real daemon (`orin-avatar run`) with file inputs, talking sd_notify to a socket the test binds."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile

from device.audio_file import read_audio
from device.conversation.visit import BUNDLED_VISIT
from tests.conftest import REPO, run_cli

SYSTEMD = REPO / "systemd"


def _visit(path: Path, parts: list) -> Path:
    """Questions from the bundled visit with pauses (seconds) between them, as one WAV."""
    audio = [
        read_audio(BUNDLED_VISIT / p) if isinstance(p, str) else np.zeros(int(p * 16000), np.float32) for p in parts
    ]
    soundfile.write(path, np.concatenate(audio), 16000)
    return path


class Daemon:
    """`orin-avatar run` in a subprocess, and the datagrams it sends to NOTIFY_SOCKET."""

    def __init__(
        self,
        tmp: Path,
        store,
        mic: Path,
        config: Path | None = None,
        extra: list[str] = (),
        wrapper: list[str] = (),
        env: dict[str, str] | None = None,
        speaker: Path | None = None,
    ) -> None:
        """`wrapper`: a command the daemon runs under (strace, a network namespace); `env`: more variables;
        `speaker`: the replies file (default: replies.wav in `tmp`)."""
        self.home = tmp / "home"
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.bind(str(tmp / "notify.sock"))
        self.socket.settimeout(0.2)
        self.messages: list[tuple[float, str]] = []
        self.env = {
            **os.environ,
            "NOTIFY_SOCKET": str(tmp / "notify.sock"),
            "WATCHDOG_USEC": "1000000",
            "ORIN_AVATAR_HOME": str(self.home),
        } | (env or {})
        self.env.pop("INVOCATION_ID", None)
        self.env.pop("JOURNAL_STREAM", None)
        self.speaker = speaker or tmp / "replies.wav"
        self.wrapped = bool(wrapper)
        command = [*wrapper, sys.executable, "-m", "device", "--store", str(store.root)]
        command += ["--config", str(config)] if config else []
        self.process = subprocess.Popen(
            command + ["run", "--mic", str(mic), "--speaker", str(self.speaker), *extra],
            cwd=REPO,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )  # a group of its own: the fixture kills it whole
        # Read the datagrams as they come, as systemd does: an unread queue (10 datagrams) blocks sd_notify.
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self) -> None:
        while self.socket.fileno() != -1:  # until stop() closes it
            try:
                self.messages.append((time.monotonic(), self.socket.recv(4096).decode()))
            except socket.timeout:
                pass
            except OSError:
                return

    def receive(self, until: float) -> None:
        """Let the daemon run until `until` (its messages arrive meanwhile)."""
        time.sleep(max(0.0, until - time.monotonic()))

    def wait_for(self, fragment: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for _, message in self.messages:
                if fragment in message:
                    return message
            self.receive(time.monotonic() + 0.2)
            assert self.process.poll() is None, self.process.communicate()[1][-3000:]
        raise AssertionError(f"no {fragment!r} within {timeout} s; got {[m for _, m in self.messages][-10:]}")

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return run_cli(*args, env={"ORIN_AVATAR_HOME": str(self.home)})

    def status(self) -> dict:
        result = self.cli("status", "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def signal(self, number: int) -> None:
        """To the daemon itself: under a wrapper (strace) its own pid, which `status` tells;
        the wrapper ends with it."""
        os.kill(self.status()["pid"] if self.wrapped else self.process.pid, number)

    def stop(self) -> tuple[int, float, str]:
        started = time.monotonic()
        self.signal(signal.SIGTERM)
        code = self.process.wait(timeout=20)
        self.receive(time.monotonic() + 0.3)
        self.socket.close()
        return code, time.monotonic() - started, self.process.stderr.read()


def test_ready_status_visit_reload_and_clean_stop(store, tmp_path, daemons):
    mic = _visit(tmp_path / "visit.wav", [1.0, "01-hello.wav", 4.0, "02-opening.wav", 9.0, "06-goodbye.wav", 4.0])
    knowledge = tmp_path / "knowledge.toml"
    config = tmp_path / "orin-avatar.toml"
    config.write_text(f'[dialogue]\nknowledge = "{knowledge}"\n')
    knowledge.write_text((REPO / "device/knowledge/visitor_centre.toml").read_text())
    daemon = Daemon(tmp_path, store, mic, config)
    daemons.append(daemon)

    assert "STATUS=loading models" in daemon.wait_for("STATUS=loading", 30)
    assert "EXTEND_TIMEOUT_USEC=" in daemon.wait_for("EXTEND_TIMEOUT_USEC", 30)
    ready = daemon.wait_for("READY=1", 60)
    assert "STATUS=ready: 0 models on GPU, 6 on CPU" in ready
    daemon.wait_for("WATCHDOG=1", 5)

    # The visit plays: greeting, an answer, goodbye, in order.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(daemon.status()["turns"]) < 3:
        daemon.receive(time.monotonic() + 1)
    status = daemon.status()
    assert [t["intent"] for t in status["turns"]] == ["greeting", "opening_hours", "goodbye"]
    assert all(t["latency_ms"] < 3000 for t in status["turns"])
    assert status["state"] == "ready" and status["hung_stages"] == []
    assert set(status["models"]) == {"vad", "asr-encoder", "asr-decoder", "tts", "tts-vocoder", "text"}
    assert status["devices"]["microphone"].startswith("file ")
    intents = status["knowledge"]["intents"]

    doctor = daemon.cli("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)}
    assert checks["daemon"]["level"] == "ok", doctor.stdout
    assert checks["echo canceller"]["level"] == "ok" and "160 ms" in checks["echo canceller"]["detail"], doctor.stdout

    # A broken knowledge base on reload: the old one stays.
    knowledge.write_text('[[intent]]\nname = "x"\nexamples = ["y"]\n')
    daemon.process.send_signal(signal.SIGHUP)
    daemon.wait_for("RELOADING=1", 10)
    assert "reload failed" in daemon.wait_for("reload failed", 10)
    status = daemon.status()
    assert status["knowledge"]["intents"] == intents
    assert (
        "has no 'answer'" in status["knowledge"]["last_reload"] and str(knowledge) in status["knowledge"]["last_reload"]
    )
    # Faults injected into the running daemon: a knowledge base that is not UTF-8, then a FIFO (reading it
    # would block the reloading thread for ever), each with a status client that never reads.
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.connect(str(daemon.home / "run" / "status.sock"))
    for fault, said in (
        (lambda: knowledge.write_bytes('[[intent]]\nname = "caf\xe9"\n'.encode("latin-1")), "not UTF-8"),
        (lambda: (knowledge.unlink(), os.mkfifo(knowledge)), "not a regular file"),
    ):
        fault()
        daemon.messages.clear()
        daemon.process.send_signal(signal.SIGHUP)
        daemon.wait_for("reload failed", 10)
        status = daemon.status()
        assert said in status["knowledge"]["last_reload"] and status["knowledge"]["intents"] == intents
        assert status["hung_stages"] == [] and daemon.process.poll() is None
    stuck.close()
    knowledge.unlink()
    # A good one replaces it.
    knowledge.write_text('[[intent]]\nname = "parrots"\nexamples = ["Do you have parrots?"]\nanswer = "Yes."\n')
    daemon.process.send_signal(signal.SIGHUP)
    daemon.wait_for("reload ok", 10)
    assert daemon.status()["knowledge"]["last_reload"].startswith("ok: 1 intents")

    code, seconds, stderr = daemon.stop()
    assert code == 0 and seconds < 5, stderr[-2000:]
    assert any("STOPPING=1" in m for _, m in daemon.messages)
    assert "turn 2: " in stderr and "opening_hours" in stderr  # one line per turn on stderr when not under systemd
    replies, rate = soundfile.read(daemon.speaker)
    assert rate == 22050 and len(replies) / rate > 5  # the three answers were played


def test_watchdog_pings_stop_while_a_stage_hangs(store, tmp_path, daemons, llm_line):
    llm_line.fault, llm_line.slow_first_s = "slow_first", 9.0
    config = tmp_path / "orin-avatar.toml"
    config.write_text(f'[llm]\nurl = "{llm_line.url}"\nfirst_token_s = 8.0\nknowledge_threshold = 1.0\n')
    mic = _visit(tmp_path / "visit.wav", [1.0, "04-tickets.wav", 15.0])
    daemon = Daemon(tmp_path, store, mic, config)
    daemons.append(daemon)
    daemon.wait_for("READY=1", 60)
    daemon.receive(time.monotonic() + 14)  # the question is asked, the dialogue waits on the LLM for 8 s
    pings = [t for t, m in daemon.messages if "WATCHDOG=1" in m]
    gaps = np.diff(pings)
    assert gaps.max() > 3.0  # the turns stage stopped reporting: no pings while it hung
    assert np.median(gaps) < 1.5  # and regular pings before and after
    assert daemon.status()["hung_stages"] == []  # the LLM timed out, the stage is back
    code, _, stderr = daemon.stop()
    assert code == 0
    assert "stage turns has not reported" in stderr and "stage turns reports again" in stderr


def test_a_dripping_llm_and_sigterm_during_a_long_reply(store, tmp_path, daemons, llm_line):
    """The LLM call is bounded as a whole (the knowledge base answers in time), and SIGTERM cuts the
    long reply being spoken: the daemon exits well inside the unit's TimeoutStopSec (15 s), replies written."""
    llm_line.fault = "drip"
    knowledge = tmp_path / "knowledge.toml"
    # A reply no synthesizer call could take whole: a NUL, a 130 KB "word", then a long run of sentences.
    long_answer = (
        "Tickets\\u0000 first. "
        + "x" * 130_000
        + ". "
        + " ".join(
            f"Ticket option {i} costs {i} euros on weekdays and a little more at weekends." for i in range(1, 25)
        )
    )
    knowledge.write_text(
        f'[[intent]]\nname = "tickets"\nexamples = ["How much is a ticket?"]\nanswer = "{long_answer}"\n'
    )
    config = tmp_path / "orin-avatar.toml"
    config.write_text(
        f'[dialogue]\nknowledge = "{knowledge}"\n[tts]\ncache = false\n'
        f'[llm]\nurl = "{llm_line.url}"\nfirst_token_s = 1.5\nknowledge_threshold = 1.0\n'
    )
    mic = _visit(tmp_path / "visit.wav", [1.0, "04-tickets.wav", 60.0])
    daemon = Daemon(tmp_path, store, mic, config)
    daemons.append(daemon)
    daemon.wait_for("READY=1", 60)
    deadline, phases = time.monotonic() + 30, []
    while time.monotonic() < deadline and phases[-1:] != ["speaking"]:  # until the long reply is being spoken
        daemon.receive(time.monotonic() + 0.2)
        phases.append(daemon.status()["conversation"])
    assert phases[0] in ("idle", "listening") and phases[-1] == "speaking", phases
    # "speaking" starts with the first sentence's synthesis: wait until its audio reaches the speaker's file
    # (CI once sent SIGTERM before, so the turn had no first sample to time).
    before = daemon.speaker.stat().st_size
    while time.monotonic() < deadline and daemon.speaker.stat().st_size < before + 8000:
        daemon.receive(time.monotonic() + 0.05)
    assert daemon.speaker.stat().st_size >= before + 8000, "the long reply never reached the speaker"
    code, seconds, stderr = daemon.stop()
    assert code == 0 and seconds < 5, stderr[-2000:]
    assert "gave no usable answer" in stderr, stderr[-3000:]  # bounded: the knowledge base answered
    assert "could not be spoken" not in stderr
    turn = next(line for line in stderr.splitlines() if "turn 1: " in line)
    assert "tickets" in turn and "interrupted" in turn
    assert (
        float(turn.split("answered in ")[1].split(" ms")[0]) < 1500 + 2000
    )  # first_token_s plus the answer's own time
    replies, rate = soundfile.read(daemon.speaker)
    assert 0 < len(replies) / rate < 60  # what was played of the long reply, cut by SIGTERM


def test_unit_file_verifies_clean():
    result = subprocess.run(
        ["systemd-analyze", "verify", str(SYSTEMD / "orin-avatar.service")], capture_output=True, text=True
    )
    assert result.returncode == 0 and result.stdout == "" and result.stderr == "", result.stdout + result.stderr


def test_unit_file_is_hardened():
    result = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(SYSTEMD / "orin-avatar.service")],
        capture_output=True,
        text=True,
    )
    line = [x for x in result.stdout.splitlines() if "Overall exposure level" in x][0]
    score = float(line.split(":")[1].split()[0])
    assert score <= 3.0, line


def test_run_without_a_microphone_says_so(tmp_path):
    result = run_cli("run", env={"HOME": str(tmp_path), "ORIN_AVATAR_HOME": str(tmp_path)})  # no sound card here
    assert result.returncode == 2 and "no audio input device" in result.stderr


def test_replayed_visit_with_camera_greets_answers_and_says_goodbye(store, tmp_path, daemons):
    from tests.conftest import visitor_clip

    camera = tmp_path / "camera.avi"
    visitor_clip(camera, 1.0, 12.0, 12.0)  # the visitor stands at the kiosk from 1 s to 13 s
    mic = _visit(tmp_path / "visit.wav", [5.0, "02-opening.wav", 25.0])
    config = tmp_path / "orin-avatar.toml"
    config.write_text("[camera]\ngate_listening = true\narrive_s = 0.5\nleave_s = 2.0\n")
    daemon = Daemon(tmp_path, store, mic, config, extra=["--camera", str(camera)])
    daemons.append(daemon)
    daemon.wait_for("READY=1", 60)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and len(daemon.status()["turns"]) < 3:
        daemon.receive(time.monotonic() + 1)
    status = daemon.status()
    assert [(t["intent"], t["source"]) for t in status["turns"]] == [
        ("greeting", "perception"),
        ("opening_hours", "knowledge"),
        ("goodbye", "perception"),
    ]
    assert status["devices"]["camera"].endswith("(connected)") or "lost" in status["devices"]["camera"]
    code, _, _ = daemon.stop()
    assert code == 0


def test_sigterm_while_the_speech_cache_is_being_prepared(store, tmp_path, daemons):
    """Right after READY the knowledge base's answers are still being synthesized into the cache: a
    SIGTERM then ends the daemon cleanly (before, 6 of 6 tries aborted: "terminate called without an
    active exception", SIGABRT)."""
    mic = _visit(tmp_path / "visit.wav", [30.0])
    daemon = Daemon(tmp_path, store, mic)
    daemons.append(daemon)
    daemon.wait_for("READY=1", 60)
    code, seconds, stderr = daemon.stop()
    assert code == 0 and seconds < 10, stderr[-2000:]
    assert "terminate called" not in stderr


@pytest.mark.parametrize(
    "photo, shown", [("usable", "portrait"), ("two faces", "cartoon (found 2 faces in the portrait")]
)
def test_the_portrait_style_or_the_drawn_character_with_the_reason(store, tmp_path, daemons, photo, shown):
    import cv2

    from device.bundled import SAMPLE_PHOTO
    from tests.conftest import skimage_bgr

    portrait = tmp_path / "portrait.png"
    astronaut = cv2.imread(str(SAMPLE_PHOTO))
    cv2.imwrite(str(portrait), astronaut if photo == "usable" else np.hstack([astronaut, skimage_bgr("camera")]))
    config = tmp_path / "orin-avatar.toml"
    config.write_text(
        f'[avatar]\ndisplay = "file"\nstyle = "portrait"\nportrait = "{portrait}"\nwidth = 640\nheight = 360\n'
    )
    daemon = Daemon(tmp_path, store, _visit(tmp_path / "visit.wav", [3.0]), config)
    daemons.append(daemon)
    daemon.wait_for("READY=1", 60)
    deadline = time.monotonic() + 20
    while daemon.status()["avatar"] == "none" and time.monotonic() < deadline:
        daemon.receive(time.monotonic() + 0.5)
    assert daemon.status()["avatar"].startswith(shown)
    code, _, stderr = daemon.stop()
    assert code == 0 and ("showing the drawn character instead" in stderr) == (photo != "usable")
    video = cv2.VideoCapture(str(daemon.home / "avatar.mp4"))
    ok, frame = video.read()
    assert ok
    # the character stands on the settings' flat background (#1b2a41), the portrait on its photo's
    background = np.abs(frame.astype(int) - (0x41, 0x2A, 0x1B)).max(-1) <= 12
    assert background.mean() < 0.05 if photo == "usable" else background.mean() > 0.3, background.mean()


def test_a_recorded_visit_from_a_microphone_array_is_heard_through_its_beam(store, tmp_path, daemons):
    """A 4-channel recording of the hall (the bundled opening-hours question 0.7 m ahead, the hall's
    talk 10 dB under it at the first microphone) replayed with `[audio] array_channels`: the daemon
    beams it, says so, and answers; the same file with a channel more than it has is refused."""
    from device.bench.hall import Hall, at_snr, load_questions
    from device.sound.beamformer import MicArray
    from device.sound.echo_room import active_rms

    _, talkers = load_questions(store, "tuning", limit=1)
    hall = Hall(len(talkers), seed=5, array=MicArray.circular(4, 0.032))
    question = hall.visitor(np.concatenate([np.zeros(16000, np.float32), read_audio(BUNDLED_VISIT / "02-opening.wav")]))
    question = np.pad(question, ((0, 0), (0, 5 * 16000)))
    question *= 10 ** (-26 / 20) / active_rms(question[0])  # the hall set's visitor level
    recording = question + at_snr(question, hall.babble(talkers, question.shape[1], np.random.default_rng(0)), 10.0)
    mic = tmp_path / "array-visit.wav"
    soundfile.write(mic, recording.T, 16000)
    config = tmp_path / "orin-avatar.toml"
    config.write_text("[audio]\narray_channels = [0, 1, 2, 3]\n")
    daemon = Daemon(tmp_path, store, mic, config)
    daemons.append(daemon)
    daemon.wait_for("READY=1", 60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not [t for t in daemon.status()["turns"] if t["turn"] == 1]:
        daemon.receive(time.monotonic() + 1)
    status = daemon.status()
    assert status["devices"]["microphone"] == f"file {mic} (4-microphone array)"
    # the first utterance is the question, answered (the talk before it started none); what the talk
    # after it starts depends on when the reply ends, which a loaded machine moves (once a turn of talk
    # after the reply was answered: a false utterance, which `bench hearing` counts)
    first = [(t["intent"], t["ignored"]) for t in status["turns"] if t["turn"] == 1]
    assert first == [("opening_hours", None)], [(t["turn"], t["transcript"], t["ignored"]) for t in status["turns"]]
    assert daemon.stop()[0] == 0

    config.write_text("[audio]\narray_channels = [1, 2, 3, 4]\n")
    refused = run_cli(
        "--store",
        str(store.root),
        "--config",
        str(config),
        "run",
        "--mic",
        str(mic),
        env={"ORIN_AVATAR_HOME": str(tmp_path / "home2")},
    )
    assert refused.returncode == 2 and "has 4 channels; [audio] array_channels [1, 2, 3, 4]" in refused.stderr


def test_the_avatar_is_shown_when_the_kiosks_x_server_starts_late_and_again_after_it_restarts(
    store, tmp_path, daemons, monkeypatch
):
    """The daemon started before the kiosk's X server, which later restarts under it (a display manager,
    a crash): the avatar is shown once the server answers, the window is lost with it, the conversation
    goes on, and the avatar is shown again on the new server, on the same display."""
    from device.service.daemon import DISPLAY_LOOK_AGAIN_S
    from device.settings import load_settings
    from tests.x_server import screenshot, x_server

    def shown(value: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while daemon.status()["devices"]["display"] != value:
            assert time.monotonic() < deadline, f"the display never became {value!r}: {daemon.status()['devices']}"
            daemon.receive(time.monotonic() + 0.2)

    def on_background(display: str) -> float:
        """Until the server shows the avatar on its background: the share of the screen that is."""
        deadline = time.monotonic() + 30
        while True:
            screen = screenshot(display, 320, 240).astype(int)
            share = float(np.mean(np.abs(screen - background).max(-1) <= 12))
            if share > 0.3 or time.monotonic() > deadline:
                return share
            time.sleep(0.2)

    config = tmp_path / "orin-avatar.toml"
    config.write_text('[avatar]\ndisplay = "window"\nwidth = 320\nheight = 240\n')
    background = np.array([int(load_settings().avatar.background[i : i + 2], 16) for i in (1, 3, 5)])  # "#rrggbb"
    with x_server(320, 240) as (display, _):
        pass  # a display number free on this machine
    monkeypatch.setenv("DISPLAY", display)
    monkeypatch.setenv("QT_QPA_PLATFORM", "xcb")
    daemon = Daemon(tmp_path, store, _visit(tmp_path / "visit.wav", [3.0]), config)
    daemons.append(daemon)
    daemon.wait_for("READY=1", 60)
    shown("null", 20)
    for start in ("late", "again"):
        with x_server(320, 240, display=display) as (answered, server):
            assert answered == display
            shown("window", DISPLAY_LOOK_AGAIN_S + 20)
            assert on_background(display) > 0.3, f"the avatar is not on the screen once the X server started {start}"
            if start == "late":
                server.terminate()
                server.wait(timeout=10)
                shown("lost", 20)
    code, _, stderr = daemon.stop()
    assert code == 0 and stderr.count("an X display answers") == 2, stderr[-3000:]

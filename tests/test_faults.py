"""Faults a kiosk meets, each injected for real (the fault-injection suite of the daemon grows here):
text that cannot be spoken as given, a status client that never reads, garbage on the status socket,
an X server reachable only through its abstract socket."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import cv2
import numpy as np
import pytest

from engines.errors import OrinAvatarError

from device.conversation.speech_out import MAX_WORDS_PER_CHUNK, SpeechOut, split_sentences
from tests.conftest import REPO, run_cli
from tests.x_server import x_server


def test_long_or_odd_text_becomes_bounded_speakable_pieces():
    story = " ".join(["the hall is open"] * 250) + "."  # one 1,000-word sentence
    pieces = split_sentences(story)
    assert len(pieces) > 30 and all(len(p.split()) <= MAX_WORDS_PER_CHUNK for p in pieces)
    assert sum(len(p.split()) for p in pieces) == 1000  # nothing lost
    giant = split_sentences("x" * 130_000)  # one 130 KB "word": said in bounded parts, none of it dropped
    assert all(len(p) <= 30 * 41 for p in giant) and sum(p.count("x") for p in giant) == 130_000
    number = "1234567890" * 6  # a 60-digit number: was cut to 40 digits without a word
    assert split_sentences(f"Call {number}.") == [f"Call {number[:40]} {number[40:]}."]
    cjk = "博物馆每天上午九点开门晚上六点关门" * 5  # 85 characters without a space
    assert "".join(p.replace(" ", "") for p in split_sentences(cjk + "。")) == cjk + "。"
    assert split_sentences("Open\x00 at nine.\x1b[2J") == ["Open at nine.", "[2J"]  # control characters gone
    assert split_sentences("...!? \x00") == []  # nothing to say


def test_a_reply_with_a_nul_is_spoken_without_it(tts):
    speech = SpeechOut(tts, cache=False)
    chunks = list(speech.chunks(1, ["We open\x00 at nine."], threading.Event()))
    assert [c.text for c in chunks if c.text] == ["We open at nine."] and sum(len(c.audio) for c in chunks) > 10_000
    assert [c.last for c in chunks] == [False] * (len(chunks) - 1) + [True] and len(
        chunks[-1].audio
    ) == 0  # the reply's end


def test_a_status_client_that_never_reads_does_not_block_the_others(tmp_path):
    from device.service.status_socket import STATUS_KEYS, StatusServer, read_status

    big = dict.fromkeys(STATUS_KEYS, 0) | {"turns": ["x" * 1000] * 2000}  # about 2 MB: more than a socket buffer holds
    server = StatusServer(lambda: big, tmp_path / "status.sock")
    try:
        stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stuck.connect(str(tmp_path / "status.sock"))  # connects, never reads
        started = time.monotonic()
        assert len(read_status(tmp_path / "status.sock", timeout=5)["turns"]) == 2000
        assert time.monotonic() - started < 4
        stuck.close()
    finally:
        server.close()


def test_garbage_on_the_status_socket_is_a_clear_error(tmp_path):
    from device.service.status_socket import read_status

    path = tmp_path / "status.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def answer() -> None:
        client, _ = listener.accept()
        client.sendall(b"\x00\xffnot json")
        client.close()

    threading.Thread(target=answer, daemon=True).start()
    with pytest.raises(OrinAvatarError, match="not orin-avatar's status"):
        read_status(path, timeout=5)
    listener.close()


@pytest.mark.parametrize("answer", [b"[1, 2, 3]", b'{"state": "ready"}', b'"ready"'])
def test_json_of_another_shape_on_the_status_socket_is_one_line(tmp_path, answer):
    """JSON, but not the daemon's status: `status` and `doctor` ended in a KeyError traceback before."""
    path = tmp_path / "status.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)

    def serve() -> None:
        for _ in range(2):
            client, _ = listener.accept()
            client.sendall(answer)
            client.close()

    threading.Thread(target=serve, daemon=True).start()
    env = {"RUNTIME_DIRECTORY": str(tmp_path)}
    status, doctor = run_cli("status", env=env), run_cli("doctor", env=env)
    listener.close()
    assert status.returncode == 2 and status.stderr.strip().splitlines() == [
        f"orin-avatar: error: the status socket {path} answered something that is not orin-avatar's status; "
        "is another program listening there?"
    ]
    assert "Traceback" not in doctor.stderr and "not orin-avatar's status" in doctor.stdout


def test_an_x_server_reached_only_by_its_abstract_socket_is_found():
    """As under the unit's PrivateTmp=: no /tmp/.X11-unix/X<n> file, the server still answers."""
    from device.avatar.display import x_display_reachable

    with x_server(64, 64, "-nolisten", "unix") as (display, _):
        assert not os.path.exists(f"/tmp/.X11-unix/X{display[1:]}")
        assert x_display_reachable(display)
    assert not x_display_reachable(display)


def test_close_cuts_the_reply_being_spoken(store, tts):
    """SIGTERM's path: closing the conversation does not wait for a long reply to finish playing."""
    from device.app import App
    from device.sound.speakers import RecordingSpeaker

    speakers = []
    conversation = App().conversation(
        lambda rate: speakers.append(RecordingSpeaker(rate, realtime=True)) or speakers[-1], build_engines=False
    )
    conversation.speech.stop_preparing()
    assert conversation.announce("greeting", " ".join(["Welcome to the visitor centre."] * 12))
    deadline = time.monotonic() + 60
    while not speakers[0].recorded:  # busy begins before the first block is handed over; wait for sound
        assert time.monotonic() < deadline, "the greeting never reached the speaker"
        time.sleep(0.01)
    started = time.monotonic()
    conversation.close()
    speakers[0].close()
    assert time.monotonic() - started < 3
    assert 0 < len(speakers[0].take()) < 20 * speakers[0].sample_rate


def test_the_file_display_writes_its_video_on_a_clean_stop(tmp_path):
    """The daemon's file display closes without reply audio: the promised MP4 is there, not an AVI."""
    from device.avatar.display import VideoFileSink

    sink = VideoFileSink(tmp_path / "avatar.mp4", 160, 120, 10)
    for _ in range(10):
        sink.show(np.zeros((120, 160, 3), np.uint8))
    with pytest.raises(ValueError, match="frame"):  # ffmpeg would take its bytes as part of other frames
        sink.show(np.zeros((100, 160, 3), np.uint8))
    assert sink.close() == [tmp_path / "avatar.mp4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["avatar.mp4"]
    assert cv2.VideoCapture(str(tmp_path / "avatar.mp4")).get(cv2.CAP_PROP_FRAME_COUNT) == 10


def test_without_ffmpeg_the_file_display_leaves_its_video_and_the_audio_beside_it(tmp_path, monkeypatch, caplog):
    from device.avatar.display import VideoFileSink

    monkeypatch.setenv("PATH", str(tmp_path / "no-ffmpeg-here"))
    sink = VideoFileSink(tmp_path / "avatar.mp4", 160, 120, 10)
    for _ in range(10):
        sink.show(np.zeros((120, 160, 3), np.uint8))
    written = sink.close(np.zeros(22050, np.float32), 22050)
    assert written == [tmp_path / "avatar.video.avi", tmp_path / "avatar.wav"]
    assert "ffmpeg is not installed" in caplog.text
    assert cv2.VideoCapture(str(written[0])).get(cv2.CAP_PROP_FRAME_COUNT) == 10


def test_losing_the_x_server_drops_the_display_not_the_process(tmp_path):
    """The window lives in its own process: when the X server dies, `show` says so and the caller
    (the daemon's display loop) goes on; before, Qt ended the whole daemon ("X11 connection broke")."""
    import sys

    from tests.conftest import REPO

    code = (
        "import sys, time, numpy as np\n"
        "from device.avatar.display import open_display\n"
        "sink = open_display('window', 320, 240, 30)\n"
        "print(sink.name, flush=True)\n"
        "frame = np.full((240, 320, 3), 90, np.uint8)\n"
        "shown = 0\n"
        "while sink.show(frame):\n"
        "    shown += 1; time.sleep(0.03)\n"
        "    if shown == 30: print('showing', flush=True)\n"
        "print('display lost after', shown, 'frames; still running', flush=True)\n"
        "sink.close()\n"
    )
    with x_server(320, 240) as (display, server):
        shower = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=REPO,
            env=os.environ | {"DISPLAY": display, "QT_QPA_PLATFORM": "xcb"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert shower.stdout.readline().strip() == "window"
            assert shower.stdout.readline().strip() == "showing"
            server.kill()  # the X server goes away while the avatar is on screen
            server.wait(timeout=10)
            out, err = shower.communicate(timeout=30)
        finally:
            shower.kill()
    assert shower.returncode == 0, err
    assert "display lost after" in out and "still running" in out
    assert "window process ended" in err


def test_under_the_units_sandbox_the_display_status_and_doctor_find_what_they_need(store, tmp_path):
    """The unit's sandbox, emulated in a private mount namespace: PrivateTmp=yes (a /tmp of its own: no
    X11-unix socket file), RuntimeDirectory=orin-avatar (/run/orin-avatar, owned by the service user),
    StateDirectory= and UMask=0027, and User= (an unprivileged uid with no passwd entry and no
    supplementary groups; the code and the model store readable through bind mounts, as under /opt
    and /var/lib). `status` and `doctor` run as a person would, as root, without RUNTIME_DIRECTORY."""
    import json
    import sys
    from pathlib import Path

    import soundfile

    from device.conversation.visit import bundled_questions
    from tests.conftest import REPO

    uid = 64123  # no such user on this machine
    question = bundled_questions()[0].audio
    soundfile.write(
        tmp_path / "visit.wav",
        np.concatenate([np.zeros(16000, np.float32), question, np.zeros(64000, np.float32)]),
        16000,
    )
    python = (
        "/run/app/" + str(Path(sys.executable).relative_to(REPO))
        if Path(sys.executable).is_relative_to(REPO)
        else sys.executable
    )
    # An interpreter under /root (pyenv) is made reachable as one under /usr would be on a robot.
    base = sys.base_prefix
    interpreter = (
        (
            f"mkdir /run/python && mount --bind {base} /run/python && mount -t tmpfs -o mode=0755 tmpfs /root"
            f" && mkdir -p {base} && mount --bind /run/python {base}"
        )
        if base.startswith("/root/")
        else ""
    )
    out = "/run/oldtmp/" + str(tmp_path.relative_to("/tmp"))  # the original /tmp, as the sandbox sees it
    with x_server(320, 240) as (display, _):
        script = f"""
set -e
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/orin-avatar /run/app /run/store /run/state /run/oldtmp    # RuntimeDirectory=, the install, the store
mount --bind {REPO} /run/app
mount --bind {store.root} /run/store
mount --bind /tmp /run/oldtmp
{interpreter}
chown {uid}:{uid} /run/orin-avatar /run/state
cp {out}/visit.wav /run/state/visit.wav && chown {uid} /run/state/visit.wav
mount -t tmpfs tmpfs /tmp                                            # PrivateTmp=yes
cd /run/app
export DISPLAY={display}
(umask 0027; exec env RUNTIME_DIRECTORY=/run/orin-avatar STATE_DIRECTORY=/run/state HOME=/run/state \
    setpriv --reuid {uid} --regid {uid} --clear-groups --no-new-privs \
    {python} -m device --store /run/store run --mic /run/state/visit.wav --speaker /run/state/replies.wav \
    2> {out}/daemon.log) &
pid=$!
for i in $(seq 1 240); do [ -S /run/orin-avatar/status.sock ] && break; sleep 0.25; done
{python} -m device status --json > {out}/status.json
ORIN_AVATAR_HOME=/run/state {python} -m device --store /run/store doctor --json > {out}/doctor.json || true
kill -TERM $pid; wait $pid
stat -c '%u %a' /run/state/replies.wav > {out}/replies.stat
"""
        result = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            capture_output=True,
            text=True,
            timeout=180,
        )
    log = (tmp_path / "daemon.log").read_text()
    assert result.returncode == 0, result.stderr + log[-2000:]
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["state"] == "ready" and status["devices"]["display"] == "window"
    checks = {c["name"]: c for c in json.loads((tmp_path / "doctor.json").read_text())}
    assert checks["display"]["level"] == "ok" and checks["daemon"]["level"] == "ok", checks
    assert "no X display" not in log
    assert (tmp_path / "replies.stat").read_text().split() == [str(uid), "640"]  # the service user's, UMask=0027


@contextlib.contextmanager
def _tmpfs(path, options: str):
    """A small tmpfs mounted at `path` (a full or read-only disk, for real), unmounted after; skips without root."""
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)]).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)])


# --- the real daemon (tests/test_daemon.py's Daemon) with a fault injected -------------------------


def _daemon(tmp_path, store, parts, config_text="", **options):
    from tests.test_daemon import Daemon, _visit

    config = tmp_path / "orin-avatar.toml"
    config.write_text(config_text)
    return Daemon(tmp_path, store, _visit(tmp_path / "visit.wav", parts), config, **options)


def _wait(daemon, done, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done(status := daemon.status()):
        daemon.receive(time.monotonic() + 0.5)
    return daemon.status() if done(daemon.status()) else status


def test_a_camera_that_opens_but_gives_no_frames_is_retried_slowly(tmp_path, caplog):
    """A clip whose frames are cut opens and reads nothing: before, a reopen loop took a whole core and
    logged thousands of lines a second."""
    import resource

    from device.vision.camera import Camera

    clip = tmp_path / "cut.avi"
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"MJPG"), 30, (64, 48))
    for _ in range(30):
        writer.write(np.full((48, 64, 3), 128, np.uint8))
    writer.release()
    data = clip.read_bytes()
    start = data.index(b"movi") + 4
    clip.write_bytes(data[:start] + bytes(len(data) - start))  # the headers kept, the frames' bytes gone
    assert cv2.VideoCapture(str(clip)).isOpened() and not cv2.VideoCapture(str(clip)).read()[0]
    used = resource.getrusage(resource.RUSAGE_SELF)
    camera = Camera(str(clip))
    time.sleep(4)
    camera.close()
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime < 1.0  # of 4 s: no spinning
    assert len([r for r in caplog.records if r.name == "device.vision.camera"]) <= 2
    assert not camera.connected and camera.latest() is None


def test_a_full_disk_under_the_speaker_loses_replies_not_the_robot(store, tmp_path, daemons):
    """The replies file on a small tmpfs: once it is full a reply cannot be played, the speaker says so in
    one line, and later questions are still answered (before, the speaker thread died, `busy` stayed set
    and every later question was "heard while speaking")."""
    with _tmpfs(tmp_path / "disk", "size=200k") as disk:
        questions = ["04-tickets.wav", "02-opening.wav", "05-wifi.wav", "03-restrooms.wav"]
        daemon = _daemon(
            tmp_path, store, [1.0] + [p for q in questions for p in (q, 7.0)], speaker=disk / "replies.wav"
        )
        daemons.append(daemon)
        daemon.wait_for("READY=1", 120)
        status = _wait(daemon, lambda s: sum(s["tally"].values()) >= 4, 60)
        assert status["tally"] == {"answered": 4}, status["tally"]  # none "heard while speaking"
        assert "failing: " in status["devices"]["speaker"] and status["conversation"] in ("idle", "listening")
        code, _, stderr = daemon.stop()
    assert code == 0 and "Exception in thread" not in stderr, stderr[-3000:]
    assert stderr.count("the speaker failed") == 1, stderr[-3000:]


def test_a_large_knowledge_base_reloads_beside_the_conversation(store, tmp_path, daemons):
    """3,000 intents take a minute to embed: the watchdog goes on pinging (a reload is work, not a hang),
    `status` answers, and SIGTERM ends the daemon at once, the old knowledge base kept until then
    (before, the display thread embedded them: no pings for 74 s, SIGTERM took 52 s)."""
    from tests.conftest import knowledge_file

    daemon = _daemon(tmp_path, store, [60.0])
    daemons.append(daemon)
    daemon.wait_for("READY=1", 120)
    intents = daemon.status()["knowledge"]["intents"]
    big = knowledge_file(
        tmp_path / "big.toml",
        {f"exhibit_{i}": (f"Tell me about exhibit number {i}", f"Where is room {i}?") for i in range(3000)},
    )
    (tmp_path / "orin-avatar.toml").write_text(f'[dialogue]\nknowledge = "{big}"\n')
    daemon.signal(signal.SIGHUP)
    daemon.wait_for("RELOADING=1", 10)
    started = time.monotonic()
    daemon.receive(started + 8)
    pings = [t for t, m in daemon.messages if "WATCHDOG=1" in m and t >= started]
    assert len(pings) >= 6 and np.diff(pings).max() < 2.0, pings  # WATCHDOG_USEC is 1 s: pinged throughout
    status = daemon.status()
    assert status["hung_stages"] == [] and status["knowledge"]["intents"] == intents  # the old one serves meanwhile
    code, seconds, stderr = daemon.stop()
    assert code == 0 and seconds < 5, stderr[-2000:]
    assert "the reload under way is left" in stderr


def test_one_speech_cache_thread_however_many_reloads(tts):
    """A SIGHUP storm: each reload started a speech-cache thread of its own and never stopped the old one
    (threads 22 -> 32). Now the reload sends the cache's one thread its newest list."""
    speech = SpeechOut(tts)
    for reload in range(6):
        speech.prepare([f"Room {reload * 10 + i} is on the second floor." for i in range(8)])
    assert [t.name for t in threading.enumerate()].count("speech-cache") == 1
    assert speech.wait_prepared(120)
    speech.stop_preparing()
    assert "speech-cache" not in [t.name for t in threading.enumerate()]


def test_a_second_daemon_on_the_same_state_directory_refuses_to_start(store, tmp_path, daemons):
    first = _daemon(tmp_path, store, [60.0])
    daemons.append(first)
    first.wait_for("READY=1", 120)
    second = subprocess.run(
        [
            sys.executable,
            "-m",
            "device",
            "--store",
            str(store.root),
            "run",
            "--mic",
            str(tmp_path / "visit.wav"),
            "--speaker",
            str(tmp_path / "second.wav"),
        ],
        cwd=REPO,
        env=first.env | {"NOTIFY_SOCKET": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 2
    assert second.stderr.strip().splitlines() == [
        f"orin-avatar: error: another orin-avatar daemon (pid {first.process.pid}) runs on {first.home}; "
        "stop it first (systemctl stop orin-avatar), or give this one its own ORIN_AVATAR_HOME"
    ]
    assert first.status()["pid"] == first.process.pid  # its status socket is still its own
    code, _, _ = first.stop()
    assert code == 0


def test_start_up_that_fails_after_loading_ends_with_one_line_not_an_abort(store, tmp_path):
    """No sound card: the speaker cannot open after the models loaded. Before, the speech cache was already
    synthesizing and the interpreter aborted on its way out (SIGABRT, a core dump per restart)."""
    from tests.test_daemon import _visit

    mic = _visit(tmp_path / "visit.wav", [2.0])
    for _ in range(3):
        result = subprocess.run(
            [sys.executable, "-m", "device", "--store", str(store.root), "run", "--mic", str(mic)],
            cwd=REPO,
            env=os.environ | {"ORIN_AVATAR_HOME": str(tmp_path / "home")},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 2, result.stderr[-2000:]
        assert result.stderr.strip().splitlines()[-1].startswith("orin-avatar: error: "), result.stderr[-2000:]
        assert "terminate called" not in result.stderr


def test_a_reply_with_nothing_speakable_says_so_instead_of_silence(tts, caplog):
    from device.conversation.speech_out import NOTHING_TO_SAY

    speech = SpeechOut(tts, cache=False)
    chunks = list(speech.chunks(1, ["\U0001f600 \U0001f389 %%%"], threading.Event()))
    assert [c.text for c in chunks if c.text] == [NOTHING_TO_SAY] and chunks[-1].last
    assert "nothing in the reply" in caplog.text
    assert list(speech.chunks(2, ["   "], threading.Event())) == []  # no reply at all stays none


def test_a_sentence_that_expands_beyond_one_synthesis_is_bounded(tts, caplog):
    """30 "words" of 40 digits: 144 s of audio and 2.2 GB in one call before; now at most one call's worth."""
    from device.conversation.speech_out import MAX_PHONEMES_PER_CALL

    speech = SpeechOut(tts, cache=False)
    digits = " ".join(["1234567890" * 4] * 30) + "."
    audio = np.concatenate([c.audio for c in speech.chunks(1, [digits], threading.Event())])
    assert len(audio) / tts.sample_rate < MAX_PHONEMES_PER_CALL * 0.15  # well under 144 s
    assert "more than one synthesis takes" in caplog.text


def test_a_read_only_state_directory_is_one_line_and_a_failed_check(store, tmp_path):
    """As a read-only home gives it: before, `run` ended in a PermissionError traceback and `doctor` did not look."""
    import json

    from tests.test_daemon import _visit

    with _tmpfs(tmp_path / "readonly", "ro,size=64k") as readonly:
        env = {"ORIN_AVATAR_HOME": str(readonly / "state")}
        mic = _visit(tmp_path / "visit.wav", [1.0])
        ran = run_cli(
            "--store", str(store.root), "run", "--mic", str(mic), "--speaker", str(tmp_path / "r.wav"), env=env
        )
        doctor = run_cli("--store", str(store.root), "doctor", "--json", env=env)
    assert ran.returncode == 2 and len(ran.stderr.strip().splitlines()) == 1, ran.stderr[-2000:]
    assert "Read-only file system" in ran.stderr and str(readonly / "state") in ran.stderr
    checks = {c["name"]: c for c in json.loads(doctor.stdout)}
    assert checks["state directory"]["level"] == "FAIL", checks["state directory"]


def test_the_file_display_on_a_full_disk_leaves_no_unplayable_video(tmp_path, caplog):
    from device.avatar.display import VideoFileSink

    with _tmpfs(tmp_path / "disk", "size=40k") as disk:
        sink = VideoFileSink(disk / "avatar.mp4", 320, 240, 30)
        frames = np.random.default_rng(1).integers(0, 255, (20, 240, 320, 3), np.uint8)
        shown = [sink.show(frames[i % 20]) for i in range(300)]
        written = sink.close()
        left = sorted(p.name for p in disk.iterdir())
    assert False in shown and written == [] and left == []
    assert "No space left on device" in caplog.text and "the partial video is removed" in caplog.text


def test_the_window_opens_when_the_working_directory_is_gone(tmp_path):
    """A daemon started in a folder since removed: before, the window's spawned child died entering it."""
    code = (
        "import os, shutil, sys, time, numpy as np\n"
        "from device.avatar.display import open_display\n"
        f"os.makedirs({str(tmp_path / 'gone')!r}); os.chdir({str(tmp_path / 'gone')!r})\n"
        f"shutil.rmtree({str(tmp_path / 'gone')!r})\n"
        "sink = open_display('window', 160, 120, 30)\n"
        "shown = 0\n"
        "for _ in range(40):\n"
        "    shown += sink.show(np.full((120, 160, 3), 90, np.uint8)); time.sleep(0.05)\n"
        "print(sink.name, shown, os.getcwd(), flush=True)\n"
        "sink.close()\n"
    )
    with x_server(160, 120) as (display, _):
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            env=os.environ | {"DISPLAY": display, "QT_QPA_PLATFORM": "xcb", "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.stdout.split() == ["window", "40", "/"], result.stderr[-2000:]
    assert "the working directory is not reachable" in result.stderr


def test_outputs_are_never_written_through_a_planted_symlink(tmp_path):
    """The demo's replies, `speak --out`, the replies file of `run` and the engines' locks: a symlink in
    their place is replaced or refused, and what it points to stays as it was."""
    from engines.files import file_lock

    from device.audio_file import write_wav
    from device.sound.speakers import WavFileSpeaker

    target = tmp_path / "precious.conf"
    target.write_text("keep me\n")
    for name in ("reply-1.wav", "replies.wav", "build.lock"):
        (tmp_path / name).symlink_to(target)
    write_wav(tmp_path / "reply-1.wav", np.zeros(100, np.float32), 16000)
    assert not (tmp_path / "reply-1.wav").is_symlink() and (tmp_path / "reply-1.wav").stat().st_size > 44
    with pytest.raises(OrinAvatarError, match="is a symbolic link"):
        WavFileSpeaker(tmp_path / "replies.wav", 22050)
    with pytest.raises(OSError), file_lock(tmp_path / "build.lock"):
        pass
    assert target.read_text() == "keep me\n"

"""`orin-avatar bench soak`: the daemon for a long while, and whether it stays flat and alive.

The real daemon (`orin-avatar run`) in a child process replays an endless visit: the bundled
questions and a "stop talking" that interrupts a reply, looped, with a camera clip in which a visitor
comes and goes, and a knowledge-base reload (SIGHUP) every minute. Every few seconds the child's
resident memory, threads and open file descriptors are read from /proc, and its status socket
for hung stages and the turns it has finished. The report gives the memory slope (least squares,
MB per minute) after the warm-up, the ranges of threads and descriptors, hung stages seen, and the
turns answered or deliberately ignored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from engines.errors import InputError, OrinAvatarError
from engines.model_specs import SPEECH_RATE

from device.app import App
from device.audio_file import resample, write_wav
from device.bundled import SAMPLE_PHOTO
from device.conversation.visit import bundled_questions
from device.models import catalog
from device.service.status_socket import read_status

SAMPLE_S = 5.0
RELOAD_EVERY_S = 60.0
GAP_S = 6.0  # after each question: time for the answer (a sentence or two) and a pause


def measure_soak(app: App, minutes: float, warmup_minutes: float = 5.0) -> dict:
    if minutes <= 0:
        raise InputError("--minutes must be above 0")
    with tempfile.TemporaryDirectory(prefix="orin-avatar-soak-") as scratch:
        work = Path(scratch)
        visit, clip, settings = _visit(app, work), _camera_clip(work), work / "soak.toml"
        settings.write_text('[avatar]\ndisplay = "none"\n')
        env = os.environ | {"RUNTIME_DIRECTORY": str(work), "NOTIFY_SOCKET": ""}
        command = [
            sys.executable,
            "-m",
            "device",
            "--config",
            str(settings),
            "--store",
            str(app.store.root),
            "--threads",
            str(app.threads),
            "run",
            "--mic",
            str(visit),
            "--loop",
            "--camera",
            str(clip),
            "--speaker",
            str(work / "replies.wav"),
        ]
        with open(work / "daemon.log", "wb") as log, _stopped_by_sigterm():
            child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
            try:
                samples = _sample(child, work / "status.sock", minutes * 60)
            finally:
                child.send_signal(signal.SIGTERM)
                stopped = time.monotonic()
                try:
                    code = child.wait(timeout=15)  # the unit's TimeoutStopSec
                except subprocess.TimeoutExpired:
                    child.kill()
                    code = child.wait()
                stop_s = time.monotonic() - stopped
    return _report(samples, minutes, warmup_minutes, code, stop_s)


class SoakStopped(OrinAvatarError):
    """The soak was stopped before its end (SIGTERM); its daemon is stopped with it."""


@contextlib.contextmanager
def _stopped_by_sigterm():
    """A SIGTERM ends the soak through its `finally`, which stops the daemon: killed outright, the
    bench left its daemon running, holding the state directory's lock."""

    def stop(signum, frame):
        raise SoakStopped("the soak was stopped (SIGTERM); its daemon was stopped too")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _visit(app: App, work: Path) -> Path:
    """The bundled questions with pauses, and a question cut short by "stop talking"."""
    questions = bundled_questions()
    gap = np.zeros(int(GAP_S * SPEECH_RATE), np.float32)
    pieces = []
    for question in questions:
        pieces += [question.audio, gap]
    tts = catalog.load_tts(app.store, app.threads, variability=0.0)
    stop = resample(tts.say("Stop talking."), tts.sample_rate, SPEECH_RATE)
    pieces += [questions[3].audio, np.zeros(int(1.5 * SPEECH_RATE), np.float32), 0.5 * stop, gap]
    path = work / "visit.wav"
    write_wav(path, np.concatenate(pieces), SPEECH_RATE)
    return path


def _camera_clip(work: Path) -> Path:
    """A visitor (the bundled photo) in a hall for 20 s, then 20 s of an empty hall; the camera loops it."""
    import cv2

    hall = np.full((720, 1280, 3), 80, np.uint8)
    visitor = hall.copy()
    visitor[100:612, 384:896] = cv2.imread(str(SAMPLE_PHOTO))
    path = work / "camera.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 5, (1280, 720))
    for frame in [visitor] * 100 + [hall] * 100:
        writer.write(frame)
    writer.release()
    return path


def _sample(child: subprocess.Popen, socket_path: Path, seconds: float) -> list[dict]:
    samples, started, next_reload = [], time.monotonic(), time.monotonic() + RELOAD_EVERY_S
    while time.monotonic() - started < seconds:
        time.sleep(SAMPLE_S)
        if child.poll() is not None:
            raise OrinAvatarError(f"the daemon ended during the soak (exit {child.returncode}); see its log")
        try:
            status = read_status(socket_path, timeout=3)
        except OrinAvatarError:
            status = None  # still starting
        if status is None:
            continue
        if time.monotonic() >= next_reload:
            child.send_signal(signal.SIGHUP)
            next_reload += RELOAD_EVERY_S
        samples.append(
            {
                "t": round(time.monotonic() - started, 1),
                **_proc(child.pid),
                "hung": status["hung_stages"],
                "tally": status.get("tally", {}),
            }
        )
        print(
            f"  {samples[-1]['t']:>6.0f} s  rss {samples[-1]['rss_mb']:.1f} MB  threads {samples[-1]['threads']}  "
            f"fds {samples[-1]['fds']}  {samples[-1]['tally']}",
            file=sys.stderr,
            flush=True,
        )
    return samples


def _proc(pid: int) -> dict:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {
        "rss_mb": int(fields["VmRSS"].split()[0]) / 1024,
        "threads": int(fields["Threads"]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }


def _report(samples: list[dict], minutes: float, warmup_minutes: float, exit_code: int, stop_s: float) -> dict:
    settled = [s for s in samples if s["t"] >= warmup_minutes * 60] or samples[len(samples) // 2 :]
    slope = (
        float(np.polyfit([s["t"] / 60 for s in settled], [s["rss_mb"] for s in settled], 1)[0])
        if len(settled) > 2
        else None
    )
    last = samples[-1]["tally"] if samples else {}
    return {
        "minutes": minutes,
        "warmup_minutes": warmup_minutes,
        "samples": len(samples),
        "rss_mb": {
            "first": samples[0]["rss_mb"] if samples else None,
            "last": samples[-1]["rss_mb"] if samples else None,
            "slope_after_warmup_mb_per_min": None if slope is None else round(slope, 4),
        },
        "threads": [min(s["threads"] for s in samples), max(s["threads"] for s in samples)] if samples else None,
        "fds": [min(s["fds"] for s in samples), max(s["fds"] for s in samples)] if samples else None,
        "hung_stages_seen": sorted({h for s in samples for h in s["hung"]}),
        "turns": last,
        "exit_code": exit_code,
        "stop_seconds": round(stop_s, 2),
    }

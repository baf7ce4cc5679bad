"""PyAudio through ALSA's `file` plugin: a real capture and playback path with no sound card
(an asoundrc of `type file` PCMs over the null device).
Each test runs in a child process whose HOME holds the asoundrc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from device.sound.beamformer import MicArray
from device.sound.speakers import fade_of
from tests.conftest import REPO, run_cli
from tests.test_beamformer import plane_wave

ASOUNDRC = """
pcm.!default { type asym playback.pcm "fileout" capture.pcm "filein" }
pcm.fileout { type file slave.pcm "null" format "raw"
  file { @func getenv vars [ ORIN_ALSA_OUT ] default "/dev/null" } }
pcm.filein { type file slave.pcm "null" format "raw" file "/dev/null"
  infile { @func getenv vars [ ORIN_ALSA_IN ] default "/dev/zero" } }
"""


@pytest.fixture
def alsa(tmp_path):
    (tmp_path / ".asoundrc").write_text(ASOUNDRC)
    return {"HOME": str(tmp_path), "ORIN_ALSA_IN": str(tmp_path / "in.raw"), "ORIN_ALSA_OUT": str(tmp_path / "out.raw")}


def _python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=os.environ | env, capture_output=True, text=True, timeout=120
    )


def test_capture_through_pyaudio_delivers_16khz_frames_and_counts_overflows(alsa):
    """ALSA's file plugin has no real-time pacing, so the callback outruns the reader: the ring
    must drop the oldest audio and count it, and the reader must still deliver frames."""
    rate = 44100
    t = np.arange(rate * 2) / rate
    Path(alsa["ORIN_ALSA_IN"]).write_bytes((0.3 * np.sin(2 * np.pi * 440 * t) * 32767).astype(np.int16).tobytes())
    code = (
        "import threading, time, numpy as np\n"
        "from device.sound.devices import Microphone\n"
        "mic = Microphone('default')\n"
        "time.sleep(1.0)  # the reader is late: the unpaced device overruns the 4 s ring meanwhile\n"
        "stop = threading.Event(); frames = []\n"
        "for frame in mic.frames(stop):\n"
        "    frames.append(frame)\n"
        "    if len(frames) >= 128: stop.set()\n"
        "mic.close()\n"
        "print(mic.rate, mic.channels, mic.overflows, len(frames), set(len(f) for f in frames), "
        "float(np.abs(np.concatenate(frames)).max()))\n"
    )
    result = _python(code, alsa)
    assert result.returncode == 0, result.stderr[-2000:]
    rate_seen, channels, overflows, count, sizes, peak = result.stdout.split(maxsplit=5)
    assert int(rate_seen) == rate and int(channels) == 2
    assert int(count) >= 128 and sizes.strip() == "{160}"  # 10 ms blocks, as the card's periods
    assert int(overflows) > 0  # counted, never blocking the callback


def test_played_audio_comes_back_byte_exact_and_in_order(alsa):
    """The card plays silence whenever nothing is queued; the file plugin has no real-time pacing, so
    its callback outruns the speaker's thread and silence comes between the blocks here. What is not
    silence is the replies, whole and in order. (Pacing, cancelling and the far end's times: the
    PulseAudio tests below.)"""
    code = (
        "import numpy as np, time\n"
        "from device.messages import ReplyChunk\n"
        "from device.sound.devices import DeviceSpeaker\n"
        "rate = 22050\n"
        "audio = (np.arange(rate) % 199 + 1).astype(np.float32) / 32767  # never 0\n"
        "speaker = DeviceSpeaker(rate)\n"
        "taps = []\n"
        "speaker.taps.append(lambda samples, fresh, at: taps.append(at))\n"
        "speaker.play(ReplyChunk(1, 0, 'a', audio, rate, 0, (), False))\n"
        "speaker.play(ReplyChunk(1, 1, 'b', audio, rate, rate, (), True))\n"
        "speaker.wait_idle(30)\n"
        "print(speaker.played, len(taps), sum(t is not None for t in taps))\n"
        "speaker.close()\n"
    )
    result = _python(code, alsa)
    assert result.returncode == 0, result.stderr[-2000:]
    played, taps, timed = map(int, result.stdout.split())
    assert played == 2 * 22050  # the playback clock counted every sample
    out = np.frombuffer(Path(alsa["ORIN_ALSA_OUT"]).read_bytes(), np.int16)
    expected = (np.arange(22050) % 199 + 1).astype(np.int16)
    assert np.array_equal(out[out != 0], np.concatenate([expected, expected]))
    assert taps >= 2 * 22050 / 220 and timed == taps  # every buffer with reply samples in it, with its DAC time


def test_a_hold_fades_out_at_the_card_and_the_resume_plays_every_sample_once(alsa):
    """A hold is done where the card takes its buffers: the reply samples already queued ahead of it are
    faded out in the card's next buffer, not played first (that was 20-40 ms more before a visitor who
    talks over a reply is heard), and kept: after the resume the reply goes on from the fade's first
    sample, every sample once. The hold comes in a buffer that took the first half of one of the
    thread's 20 ms blocks, so the other half is queued then."""
    code = (
        "import numpy as np, time\n"
        "from device.messages import ReplyChunk\n"
        "from device.sound.devices import DeviceSpeaker\n"
        "from device.sound.speakers import BLOCK_SECONDS\n"
        "rate = 22050\n"
        "audio = (np.arange(rate) % 199 + 100).astype(np.float32) * 100 / 32767  # never 0, nor faded to 0\n"
        "speaker = DeviceSpeaker(rate)\n"
        "block = int(rate * BLOCK_SECONDS)\n"
        "before = []  # reply samples the card played before the hold\n"
        "def tap(samples, fresh, at):\n"
        "    if before and before[-1] is None:\n"
        "        return\n"
        "    before.append(int(np.count_nonzero(samples)))\n"
        "    if sum(before) > 10 * block and np.all(samples != 0) and sum(before) % block:\n"
        "        speaker.hold(); before.append(None)\n"
        "speaker.taps.append(tap)\n"
        "speaker.play(ReplyChunk(1, 0, 'a', audio, rate, 0, (), True))\n"
        "time.sleep(0.5); held = speaker.held; speaker.resume()\n"
        "speaker.wait_idle(30)\n"
        "print(held, sum(before[:-1]), speaker.played)\n"
        "speaker.close()\n"
    )
    result = _python(code, alsa)
    assert result.returncode == 0, result.stderr[-2000:]
    held, played_before, played = result.stdout.split()
    assert held == "True" and int(played) == 22050
    audio = (np.arange(22050) % 199 + 100).astype(np.float32) * 100 / 32767
    expected = (audio * 32767).astype(np.int16)
    k = int(played_before)
    fade = (fade_of(audio[k:], 22050) * 32767).astype(np.int16)
    out = np.frombuffer(Path(alsa["ORIN_ALSA_OUT"]).read_bytes(), np.int16)
    assert np.array_equal(out[out != 0], np.concatenate([expected[:k], fade[fade != 0], expected[k:]]))


def test_devices_lists_the_alsa_devices_and_a_missing_name_lists_them(alsa):
    result = run_cli("devices", "--json", env=alsa)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["inputs"] and report["outputs"]  # the asoundrc's PCMs, as PyAudio enumerates them
    assert all(d["inputs"] > 0 for d in report["inputs"]) and all(d["outputs"] > 0 for d in report["outputs"])
    result = _python("from device.sound.devices import Microphone\nMicrophone('usb-array-mic')", alsa)
    assert "no audio input device 'usb-array-mic'; there are:" in result.stderr
    assert all(d["name"] in result.stderr for d in report["inputs"])


def test_doctor_says_whether_the_configured_array_has_its_channels(alsa, tmp_path):
    """The asoundrc's default device has 128 input channels (the plugin's most)."""
    Path(alsa["ORIN_ALSA_IN"]).write_bytes(bytes(4096))  # its capture side opens only with a file to read
    checks = {}
    for name, channels in (("fits", [124, 125, 126, 127]), ("beyond", [126, 127, 128, 129])):
        config = tmp_path / f"{name}.toml"
        config.write_text(f"[audio]\narray_channels = {channels}\n")
        result = run_cli("--config", str(config), "doctor", "--json", env=alsa)
        checks[name] = {c["name"]: c for c in json.loads(result.stdout)}["microphone array"]
    assert (
        checks["fits"]["level"] == "ok"
        and "4 microphones on channels [124, 125, 126, 127] of default" in checks["fits"]["detail"]
    )
    assert checks["beyond"]["level"] == "FAIL" and "array_channels [126, 127, 128, 129]" in checks["beyond"]["detail"]
    assert "has 128 input channels" in checks["beyond"]["detail"]


def test_devices_on_a_machine_without_any(tmp_path):
    result = run_cli("devices", env={"HOME": str(tmp_path)})
    assert result.returncode == 0
    assert "microphones: none" in result.stdout and "cameras: none" in result.stdout


PULSE_ASOUNDRC = """
pcm.!default { type pulse device "robot.monitor" }
ctl.!default { type pulse }
"""


@pytest.fixture
def pulse(pulse_server):
    """Our own PulseAudio with a null sink: real-time pacing, reached by PyAudio through ALSA (its environment)."""
    return pulse_server[0]


@pytest.fixture
def pulse_server(tmp_path):
    """The environment that reaches our own PulseAudio, and its process."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(runtime)}
    (tmp_path / ".asoundrc").write_text(PULSE_ASOUNDRC)
    server = subprocess.Popen(
        [
            "pulseaudio",
            "-n",
            "--daemonize=no",
            "--exit-idle-time=-1",
            "--use-pid-file=no",
            "-L",
            "module-native-protocol-unix",
            "-L",
            "module-null-sink sink_name=robot norewinds=1",
        ],
        env=os.environ | env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(50):
        if subprocess.run(["pactl", "info"], env=os.environ | env, capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    yield env, server
    if server.poll() is None:
        server.terminate()
        server.wait(timeout=10)


def test_captured_frames_equal_the_input_at_real_time_pace(pulse, tmp_path):
    rate = 44100
    t = np.arange(rate * 3) / rate
    tone = (0.3 * np.sin(2 * np.pi * (200 * t + 400 * t**2))).astype(np.float32)  # a chirp: one alignment only
    stereo = np.repeat((tone * 32767).astype(np.int16)[:, None], 2, axis=1)
    source = tmp_path / "in.raw"
    stereo.tofile(source)
    code = (
        "import threading, subprocess, time, numpy as np\n"
        "from device.sound.devices import Microphone\n"
        "mic = Microphone('default')\n"
        "started = time.monotonic()\n"
        + _capture_while_playing("robot", "--rate=44100 --channels=2", source, 640)
        + f"np.save({str(tmp_path / 'captured.npy')!r}, np.concatenate(frames))\n"
        "print(mic.overflows, round(time.monotonic() - started, 2))\n"
    )
    result = _python(code, pulse)
    assert result.returncode == 0, result.stderr[-2000:]
    overflows, seconds = result.stdout.split()
    assert int(overflows) == 0 and float(seconds) >= 6.0  # paced like a real microphone (6.4 s), nothing dropped
    captured = np.load(tmp_path / "captured.npy")
    from device.audio_file import resample

    expected = resample(tone, rate, 16000)
    lag, fraction = _lag(captured, expected)
    # The stream's resampler starts at another phase than a whole-file one: shift the reference by
    # the measured fraction of a sample, then the captured audio equals the input.
    frequencies = np.fft.rfftfreq(len(expected))
    reference = np.fft.irfft(np.fft.rfft(expected) * np.exp(-2j * np.pi * frequencies * fraction), len(expected))
    # A quarter second at a time, so a scheduling hiccup of PulseAudio on a loaded machine shows as
    # one bad segment, not as corrupted audio.
    segments = range(4000, len(expected) - 8000, 4000)
    matched = 0
    for start in segments:
        piece, wanted = captured[lag + start : lag + start + 4000], reference[start : start + 4000]
        matched += np.corrcoef(piece, wanted)[0, 1] > 0.9999 and np.max(np.abs(piece - wanted)) < 0.005
    assert matched >= 0.9 * len(segments), f"{matched} of {len(segments)} segments equal the input"


def _capture_while_playing(sink: str, pacat_format: str, source: Path, count: int, indent: str = "") -> str:
    """Child code: `source` (raw s16le) played into `sink` by pacat while `mic` captures `count`
    blocks (frames, with an array) into `frames` (and each one's `on_axis_db` into `on_axis`); then both closed."""
    player = [
        "pacat",
        "--playback",
        "-d",
        sink,
        "--latency-msec=100",
        "--format=s16le",
        *pacat_format.split(),
        str(source),
    ]
    lines = [
        f"player = subprocess.Popen({player!r})",
        "stop = threading.Event(); frames = []; on_axis = []",
        "for frame in mic.frames(stop):",
        "    frames.append(frame); on_axis.append(mic.on_axis_db)",
        f"    if len(frames) >= {count}: stop.set()",
        "mic.close(); player.wait()",
    ]
    return "".join(f"{indent}{line}\n" for line in lines)


def _lag(signal: np.ndarray, pattern: np.ndarray) -> tuple[int, float]:
    """Where `pattern` starts in `signal`: whole samples, and the fraction (parabolic peak fit)."""
    size = len(signal) + len(pattern)
    correlation = np.fft.irfft(np.fft.rfft(signal, size) * np.conj(np.fft.rfft(pattern, size)), size)
    k = int(np.argmax(correlation[: len(signal)]))
    before, peak, after = np.take(correlation, [k - 1, k, k + 1], mode="wrap")  # circular: k = 0 has a neighbour
    return k, float(0.5 * (before - after) / (before - 2 * peak + after))


def test_cancel_stops_a_device_speaker_at_once(pulse):
    code = (
        "import numpy as np, time\n"
        "from device.messages import ReplyChunk\n"
        "from device.sound.devices import DeviceSpeaker\n"
        "speaker = DeviceSpeaker(22050)\n"
        "speaker.play(ReplyChunk(1, 0, 'long', np.full(22050 * 20, 0.2, np.float32), 22050, 0, (), True))\n"
        "time.sleep(1.0); before = speaker.played; speaker.stop(); stopped = time.monotonic()\n"
        "speaker.wait_idle(5); idle_after = time.monotonic() - stopped\n"
        "time.sleep(0.5); print(before, speaker.played, round(idle_after, 3))\n"
        "speaker.close()\n"
    )
    env = pulse | {}
    (Path(pulse["HOME"]) / ".asoundrc").write_text(
        'pcm.!default { type pulse device "robot" }\nctl.!default { type pulse }\n'
    )
    result = _python(code, env)
    assert result.returncode == 0, result.stderr[-2000:]
    before, after, idle_after = result.stdout.split()
    assert 0.5 * 22050 < int(before) < 2.0 * 22050  # it was playing in real time
    assert int(after) - int(before) < 0.3 * 22050 and float(idle_after) < 0.5  # and stopped within a block or two


def test_the_echo_canceller_on_a_pulseaudio_sink_takes_out_every_reply(pulse):
    """The robot's card is a PulseAudio null sink whose monitor is its microphone: it hears its replies as
    played, after the sound server's real latencies. Four replies (real speech) 0.7-2 s apart: the far
    end goes where the cards' own clocks say, so the canceller takes each out from its start (placed
    by when blocks were handed, the delay changed from reply to reply and it took out 16-19 dB)."""
    (Path(pulse["HOME"]) / ".asoundrc").write_text(
        'pcm.!default { type asym playback.pcm { type pulse device "robot" } '
        'capture.pcm { type pulse device "robot.monitor" } }\n'
        "ctl.!default { type pulse }\n"
    )
    code = (
        "import threading, time, numpy as np\n"
        "from device.audio_file import resample\n"
        "from device.conversation.visit import bundled_questions\n"
        "from device.messages import ReplyChunk\n"
        "from device.sound.devices import DeviceSpeaker, Microphone\n"
        "from device.sound.echo_canceller import EchoCanceller\n"
        "rate = 22050\n"
        "mic, speaker, canceller = Microphone('default'), DeviceSpeaker(rate), EchoCanceller(rate)\n"
        "speaker.taps.append(canceller.played)\n"
        "stop = threading.Event()\n"
        "def hear():\n"
        "    for frame in mic.frames(stop):\n"
        "        canceller.clean(frame, mic.captured_at)\n"
        "threading.Thread(target=hear, daemon=True).start()\n"
        "time.sleep(0.5)\n"
        "for i, question in enumerate(bundled_questions()[:4]):\n"
        "    canceller.reset_erle()\n"
        "    speaker.play(ReplyChunk(i + 1, 0, question.text, resample(question.audio, 16000, rate), "
        "rate, 0, (), True))\n"
        "    speaker.wait_idle(30); time.sleep(0.2)  # its echo's tail\n"
        "    print(canceller.erle_db(), flush=True)\n"
        "    time.sleep(0.5 + 0.6 * i)\n"
        "stop.set(); speaker.close(); mic.close()\n"
    )
    result = _python(code, pulse)
    assert result.returncode == 0, result.stderr[-2000:]
    erle = [float(line) for line in result.stdout.split()]
    assert len(erle) == 4 and min(erle) > 40, erle


def test_a_microphone_array_on_a_pulseaudio_source_is_heard_through_its_steered_beam(pulse, tmp_path):
    """Four channels of a far chirp from 40 degrees to the right (each microphone's share delayed by
    where it sits) played into a 4-channel null sink, captured from its monitor through ALSA:
    steered there, the beam is the chirp itself and says it came from there; steered behind, neither
    (channels taken in the wrong order, or the steering lost on the way to the reader, would fail the
    first)."""
    for command in (
        [
            "load-module",
            "module-null-sink",
            "sink_name=array",
            "channels=4",
            "channel_map=front-left,front-right,rear-left,rear-right",
        ],
        ["set-default-source", "array.monitor"],
    ):  # ALSA's pulse plugin records the default source
        subprocess.run(["pactl", *command], env=os.environ | pulse, check=True, capture_output=True)
    rate = 16000
    t = np.arange(rate * 3) / rate
    chirp = (0.2 * np.sin(2 * np.pi * (200 * t + 600 * t**2))).astype(np.float32)
    heard = plane_wave(chirp, MicArray.circular(4, 0.032), np.radians(40))
    source = tmp_path / "array.raw"  # after half a second of silence: the capture is running by then
    (np.pad(heard, ((0, 0), (rate // 2, 0))).T * 32767).astype(np.int16).tofile(source)
    code = (
        "import threading, subprocess, numpy as np\n"
        "from device.sound.beamformer import MicArray\n"
        "from device.sound.devices import Microphone\n"
        "for name, azimuth in (('toward', 40), ('behind', 220)):\n"
        "    mic = Microphone('default', array=MicArray.circular(4, 0.032), array_channels=(0, 1, 2, 3))\n"
        "    mic.steer(np.radians(azimuth))\n"
        + _capture_while_playing(
            "array",
            f"--rate={rate} --channels=4 --channel-map=front-left,front-right,rear-left,rear-right",
            source,
            140,
            indent="    ",
        )
        + f"    np.save({str(tmp_path)!r} + f'/{{name}}.npy', np.concatenate(frames))\n"
        "    print(mic.state, np.median([a for a, f in zip(on_axis, frames) if np.abs(f).max() > 0.05]))\n"
    )
    result = _python(code, pulse)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("4-microphone array on channels [0, 1, 2, 3]") == 2
    on_axis = dict(zip(("toward", "behind"), (float(line.split()[-1]) for line in result.stdout.splitlines())))
    assert on_axis["toward"] > -1.0 and on_axis["behind"] < on_axis["toward"] - 3.0, (
        on_axis
    )  # where the sound came from
    matches = {}
    for name in ("toward", "behind"):
        captured = np.load(tmp_path / f"{name}.npy")
        lag, fraction = _lag(captured, chirp)  # the sound server's resamplers add a fraction of a sample
        frequencies = np.fft.rfftfreq(len(chirp))
        reference = np.fft.irfft(np.fft.rfft(chirp) * np.exp(-2j * np.pi * frequencies * fraction), len(chirp))
        middle = slice(rate // 2, len(chirp) - rate // 2)  # the circular plane wave wraps at its ends
        matches[name] = np.corrcoef(captured[lag : lag + len(chirp)][middle], reference[middle])[0, 1]
    assert matches["toward"] > 0.999 and matches["behind"] < 0.9, matches


def test_a_sound_card_that_goes_away_mid_reply_drops_the_reply_not_the_speaker(pulse_server):
    """The sound server dies while a reply plays (a card unplugged): its callback takes nothing more. Before,
    the speaker waited for room for ever, `busy` stayed set and every later question was heard while speaking."""
    env, server = pulse_server
    code = (
        "import logging, numpy as np, sys, time\n"
        "logging.basicConfig(level=logging.ERROR)\n"
        "from device.messages import ReplyChunk\n"
        "from device.sound.devices import DeviceSpeaker\n"
        "speaker = DeviceSpeaker(22050)\n"
        "speaker.play(ReplyChunk(1, 0, 'long', np.full(22050 * 20, 0.2, np.float32), 22050, 0, (), True))\n"
        "time.sleep(1.0); print('playing', flush=True); sys.stdin.readline(); gone = time.monotonic()\n"
        "idle = speaker.wait_idle(10)\n"
        "print(idle, round(time.monotonic() - gone, 1), speaker.fault != '', flush=True)\n"
        "speaker.close()\n"
    )
    (Path(env["HOME"]) / ".asoundrc").write_text(
        'pcm.!default { type pulse device "robot" }\nctl.!default { type pulse }\n'
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=os.environ | env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout.readline().strip() == "playing", child.stderr.read()[-2000:]
    server.kill()
    server.wait(timeout=10)
    out, err = child.communicate("\n", timeout=30)
    idle, seconds, failed = out.split()
    assert idle == "True" and float(seconds) < 5 and failed == "True", err[-2000:]
    assert err.count("the speaker failed") == 1, err[-2000:]

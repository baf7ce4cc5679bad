"""Which echo canceller: the candidates of the barge-in issue, offline, through the echo room.

A one-off measurement behind the choice in docs/lab/bargein.md, kept so that it can be run again when a
candidate changes. Needs the test set-up's .venv and the two candidates that are not dependencies:
    .venv/bin/pip install pyaec==1.0.1 pywebrtc-audio==0.2.0
    .venv/bin/python scripts/compare_echo_cancellers.py

Per echo level (0, +6, +12 dB over the visitor) and canceller, eight cases: a synthesized reply heard
through the echo room's hall (pyroomacoustics, RT60 0.5 s, clipping at 0.7, the device buffer and
5-59 ms of path delay), once alone (the canceller converges), then again with one of the bundled
visit's questions said over it 2 or 3.5 s in. The far end is given exactly aligned with the
microphone (as PlaybackTimeline does). Reported: ERLE over the echo alone, onsets of speech detected
on the output before the visitor speaks (each would pause the reply: a self-interruption), and the
time from the visitor's onset to detection (Silero VAD >= 0.5 for 3 frames of 32 ms, as barge-in's
96 ms), and the visitors never detected. Then the two together: AEC3's output as now, or a longer
run of speech on SpeexDSP's linear output. Offline and aligned: the live figures are `bench bargein`'s.
"""

from __future__ import annotations

import time

import numpy as np

from engines.model_specs import FRAME, SPEECH_RATE
from engines.store.model_store import ModelStore

from device.audio_file import read_audio, resample
from device.bundled import SAMPLES
from device.models import catalog
from device.models.voices import VOICES, load_voices, speak
from device.sound.echo_canceller import Aec3
from device.sound.echo_room import DEVICE_BUFFER_MS, MIC_GAIN, active_rms, room_response

BLOCK = SPEECH_RATE // 100
REPLY = (
    "We are open from nine in the morning until six in the evening, every day except Mondays.",
    "On Thursdays we stay open until nine at night, and the last admission is one hour before closing.",
)
QUESTIONS = ("02-opening.wav", "03-restrooms.wav", "04-tickets.wav", "05-wifi.wav")
ONSET_FRAMES = 3  # barge-in's min_speech_ms (96) in 32 ms VAD frames
LINEAR_RUNS = (3, 5, 8, 12)  # frames of speech on SpeexDSP's linear output that would pause a reply too


def main() -> None:
    store = ModelStore()
    vad = catalog.load_vad(store)
    (joe,) = [v for v in VOICES if v.name == "joe"]
    synthesizers = load_voices(store, 2)
    spoken = [speak(synthesizers, joe, text) for text in REPLY]
    reply = resample(np.concatenate([s[0] for s in spoken]), spoken[0][2], SPEECH_RATE).astype(np.float32)
    visitors = [read_audio(SAMPLES / "visit" / name) for name in QUESTIONS]
    cancellers = {
        "none": lambda near, far: near,
        "AEC3, 52 ms filter (WebRTC's default; livekit's)": _aec3(52),
        "AEC3, 160 ms filter (ours)": _aec3(160),
        "pywebrtc-audio AEC3": _pywebrtc,
        "pyaec linear": _speex(False),
        "pyaec + suppressor": _speex(True),
    }
    both = []  # the second table's rows, from the same outputs
    print(
        "| echo | canceller | ERLE (median) | self-triggered onsets in 8 replies "
        "| onset -> detected p50 / max (ms) | never detected | cost per 10 ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for level in (0.0, 6.0, 12.0):
        cases = [
            _case(reply, visitor, level, 5 + 18 * k, at, seed=k)
            for k, visitor in enumerate(visitors)
            for at in (2.0, 3.5)
        ]
        speech = {}  # canceller -> the VAD's probabilities on its output, per case
        for name, cancel in cancellers.items():
            erle, cost, speech[name] = [], 0.0, []
            for near, far, second, onset in cases:
                started = time.perf_counter()
                out = cancel(near, far)
                cost += time.perf_counter() - started
                echo_alone = slice(second + SPEECH_RATE // 2, onset - SPEECH_RATE // 10)
                erle.append(10 * np.log10(np.sum(near[echo_alone] ** 2) / max(np.sum(out[echo_alone] ** 2), 1e-12)))
                speech[name].append(vad.probabilities(out))
            false, timing, missed = _detections([_runs(p, ONSET_FRAMES) for p in speech[name]], cases)
            blocks = sum(len(c[0]) for c in cases) / BLOCK
            print(
                f"| {level:+.0f} dB | {name} | {np.median(erle):.1f} dB | {false} | {timing} | "
                f"{missed} | {cost / blocks * 1000:.2f} ms |",
                flush=True,
            )
        for frames in LINEAR_RUNS:
            linear = [_runs(p, frames) for p in speech["pyaec linear"]]
            false = _detections(linear, cases)[0]  # the onsets on the echo alone are the linear output's
            hits = [sorted(_runs(p, ONSET_FRAMES) + h) for p, h in zip(speech["pywebrtc-audio AEC3"], linear)]
            _, timing, missed = _detections(hits, cases)
            both.append(f"| {level:+.0f} dB | {frames} | {false} | {timing} | {missed} |")
    print("\nBoth: a pause on AEC3's output (3 frames), or on SpeexDSP's linear output after N frames")
    print(
        "| echo | N | onsets on the echo alone (8 replies) "
        "| visitor onset -> detected p50 / max (ms) | never detected |"
    )
    print("|---|---|---|---|---|")
    print("\n".join(both))


def _detections(hits: list[list[int]], cases) -> tuple[int, str, int]:
    """Over the cases: onsets before the visitor spoke, onset -> first detection p50 / max (ms), and
    the visitors never detected."""
    false, delays = 0, []
    for case_hits, (_, _, second, onset) in zip(hits, cases):
        false += sum(second <= h < onset for h in case_hits)
        delays.append(next(((h - onset) / SPEECH_RATE * 1000 for h in case_hits if h >= onset), None))
    heard = [d for d in delays if d is not None]
    return false, f"{np.median(heard):.0f} / {max(heard):.0f}" if heard else "-", len(delays) - len(heard)


def _case(reply: np.ndarray, visitor: np.ndarray, level_db: float, delay_ms: float, at_s: float, seed: int):
    """Microphone and far end: the reply alone, 1 s of quiet, the reply again with the visitor `at_s`
    into it; with the sample where the second reply starts and the one where the visitor's speech does."""
    second = len(reply) + SPEECH_RATE
    far = np.zeros(2 * second + SPEECH_RATE, np.float32)
    far[: len(reply)] = far[second : second + len(reply)] = reply
    echo = np.convolve(np.clip(far, -0.7, 0.7), room_response(0.5, seed))[: len(far)]
    gain = active_rms(visitor) * 10 ** (level_db / 20) / active_rms(echo[: len(reply)])
    delay = int((DEVICE_BUFFER_MS + delay_ms) * SPEECH_RATE / 1000)
    near = np.zeros(len(far), np.float32)
    near[delay:] = echo[: len(far) - delay] * gain
    start = second + int(at_s * SPEECH_RATE)
    said = visitor[: len(far) - start]
    near[start : start + len(said)] += said
    onset = start + int(np.argmax(np.abs(said) > 0.01))
    return (near * MIC_GAIN).astype(np.float32), far, second, onset


def _runs(probabilities: np.ndarray, frames: int) -> list[int]:
    """Samples at which `frames` consecutive frames of speech have been heard."""
    run, hits = 0, []
    for k, probability in enumerate(probabilities):
        run = run + 1 if probability >= 0.5 else 0
        if run == frames:
            hits.append((k + 1) * FRAME)
    return hits


def _blocks(near: np.ndarray, far: np.ndarray, process) -> np.ndarray:
    out = np.zeros_like(near)
    for i in range(0, len(near) - BLOCK + 1, BLOCK):
        out[i : i + BLOCK] = process(near[i : i + BLOCK], far[i : i + BLOCK])
    return out


def _pcm(audio: np.ndarray) -> np.ndarray:
    return (np.clip(audio, -1, 1) * 32767).astype(np.int16)


def _aec3(tail_ms: int):
    def cancel(near: np.ndarray, far: np.ndarray) -> np.ndarray:
        aec3 = Aec3(tail_ms)

        def process(n, f):
            aec3.far_end(f)
            return aec3.near_end(n)

        return _blocks(near, far, process)

    return cancel


def _pywebrtc(near: np.ndarray, far: np.ndarray) -> np.ndarray:
    from pywebrtc_audio import EchoCanceller

    canceller = EchoCanceller(sample_rate=SPEECH_RATE)
    return _blocks(near, far, canceller.process)


def _speex(suppress: bool):
    def cancel(near: np.ndarray, far: np.ndarray) -> np.ndarray:
        from pyaec import Aec

        aec = Aec(BLOCK, SPEECH_RATE // 4, SPEECH_RATE, suppress)  # a 250 ms tail, the hall's RT60 / 2
        return _blocks(near, far, lambda n, f: np.array(aec.cancel_echo(_pcm(n).tolist(), _pcm(f).tolist())) / 32768)

    return cancel


if __name__ == "__main__":
    main()

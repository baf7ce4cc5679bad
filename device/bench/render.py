"""`orin-avatar bench render`: frames per second, CPU per frame, and how far the mouth is from the sound.

A synthesized reply plays on a wall-clock "sound card" while the avatar renders at the configured
rate (into the window when there is a display, else nowhere). The A/V offset compares, frame by
frame, how open the mouth is with the energy of the audio being played, and reports the lag that
lines them up best (positive: the mouth is late).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from engines.errors import InputError

from device.app import App
from device.avatar.animator import Avatar
from device.avatar.display import open_display
from device.avatar.renderer import Colours, Renderer
from device.conversation.visemes import viseme_timeline
from device.models import catalog

SENTENCE = "Welcome to the visitor centre! The main hall is straight ahead, and the cafe is upstairs."


def measure_render(app: App, seconds: float) -> dict:
    """Render a synthesized reply at the configured size and rate for `seconds`."""
    if seconds <= 0:
        raise InputError("--seconds must be above 0")
    tts = catalog.load_tts(app.store, variability=0.0)
    chunk = next(tts.synthesize(SENTENCE))
    return measure(app.settings.avatar, chunk.audio, viseme_timeline(chunk.phonemes), tts.sample_rate, seconds)


def measure(settings, audio: np.ndarray, visemes: tuple, rate: int, seconds: float) -> dict:
    renderer = Renderer(settings.width, settings.height, Colours.of(settings))
    sink = open_display(settings.display if settings.display != "file" else "none", settings.width, settings.height, settings.fps)
    avatar = Avatar()
    period = 1 / settings.fps
    opens, energies = [], []
    frames = 0
    cpu0, wall0 = time.process_time() + sink.helper_cpu_seconds(), time.monotonic()
    started = wall0
    avatar.speak(visemes, rate, lambda: int((time.monotonic() - started) * rate) % len(audio))
    while (now := time.monotonic()) - wall0 < seconds:
        pose = avatar.pose(now - wall0)
        sink.show(renderer.render(pose))
        position = int((now - started) * rate) % len(audio)
        window = audio[max(0, position - rate // 60):position + rate // 60]
        opens.append(pose.mouth.open)
        energies.append(float(np.sqrt(np.mean(window ** 2))) if window.size else 0.0)
        frames += 1
        time.sleep(max(0.0, wall0 + frames * period - time.monotonic()))
    cpu, wall = time.process_time() + sink.helper_cpu_seconds() - cpu0, time.monotonic() - wall0
    sink.close()
    lag, correlation = _best_lag(np.array(opens), np.array(energies))
    print(f"rendered {frames} frames", file=sys.stderr)
    return {"width": settings.width, "height": settings.height, "display": sink.name, "target_fps": settings.fps,
            "fps": round(frames / wall, 2), "cpu_ms_per_frame": round(cpu / frames * 1000, 3),
            "cpu_percent_of_one_core": round(cpu / wall * 100, 1),
            "av_offset_ms": round(lag * 1000 / (frames / wall), 1), "av_correlation": round(correlation, 3)}


def _best_lag(mouth: np.ndarray, energy: np.ndarray, max_lag: int = 3) -> tuple[int, float]:
    """The shift (in frames) of the mouth against the audio energy with the highest correlation,
    within +-3 frames (100 ms): further out the syllable rhythm (about 5 a second) correlates again."""
    best = (0, -1.0)
    for lag in range(-max_lag, max_lag + 1):
        a = mouth[max(0, lag):len(mouth) + min(0, lag)]
        b = energy[max(0, -lag):len(energy) + min(0, -lag)]
        if a.std() > 0 and b.std() > 0:
            r = float(np.corrcoef(a, b)[0, 1])
            if r > best[1]:
                best = (lag, r)
    return best

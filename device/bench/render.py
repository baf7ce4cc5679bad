"""`orin-avatar bench render`: frames per second, CPU per frame, and how far the mouth is from the sound.

A synthesized reply (two sentences, then half a second of silence, looped) plays on a wall-clock
"sound card" while the avatar renders at the configured rate (into the window when there is a
display, else nowhere). The A/V offset compares how open the mouth is in each frame with the energy
of the sound around the sample playing when the frame was drawn, shifted in 5 ms steps, and reports
the shift that lines them up best (positive: the mouth is late). It is looked up on the sound, not
at frame resolution: a search over whole frames of a 1.5 s loop (this bench until 2026-12-02) ran
into its own +-100 ms bound and reported +100 ms at correlation 0.35 where the mouth was 35 ms late.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from engines.errors import InputError

from device.app import App
from device.avatar.animator import Avatar
from device.avatar.display import open_display
from device.avatar.styles import Style, open_style
from device.conversation.visemes import spoken_with_visemes
from device.models import catalog

SENTENCE = "Welcome to the visitor centre! The main hall is straight ahead, and the cafe is upstairs."
MAX_LAG_MS = 150  # beyond this the syllable rhythm (about 5 a second) lines up again


def measure_render(app: App, seconds: float, portrait: Path | None = None) -> dict:
    """Render a synthesized reply at the configured size and rate for `seconds`, in the configured
    style or as the portrait of `portrait`."""
    if seconds <= 0:
        raise InputError("--seconds must be above 0")
    tts = catalog.load_tts(app.store, variability=0.0)
    audio, visemes = spoken_with_visemes(tts, SENTENCE)
    settings = app.settings.avatar
    if portrait is not None:
        settings = dataclasses.replace(settings, style="portrait", portrait=str(portrait))
    renderer = open_style(settings, app.store, app.threads)
    silence = np.zeros(tts.sample_rate // 2, np.float32)
    return measure(settings, renderer, np.concatenate([audio, silence]), visemes, tts.sample_rate, seconds)


def measure(settings, renderer: Style, audio: np.ndarray, visemes: tuple, rate: int, seconds: float) -> dict:
    sink = open_display(
        settings.display if settings.display != "file" else "none", settings.width, settings.height, settings.fps
    )
    avatar = Avatar()
    period = 1 / settings.fps
    opens, playing = [], []
    frames = 0
    cpu0, wall0 = time.process_time() + sink.helper_cpu_seconds(), time.monotonic()
    started = wall0
    avatar.speak(visemes, rate, lambda: int((time.monotonic() - started) * rate) % len(audio))
    while (now := time.monotonic()) - wall0 < seconds:
        pose = avatar.pose(now - wall0)
        sink.show(renderer.render(pose))
        opens.append(pose.mouth.open)
        playing.append(int((now - started) * rate))
        frames += 1
        time.sleep(max(0.0, wall0 + frames * period - time.monotonic()))
    cpu, wall = time.process_time() + sink.helper_cpu_seconds() - cpu0, time.monotonic() - wall0
    sink.close()
    lag_ms, correlation = mouth_lag(np.array(opens), np.array(playing), audio, rate)
    print(f"rendered {frames} frames", file=sys.stderr)
    return {
        "style": settings.style,
        "width": settings.width,
        "height": settings.height,
        "display": sink.name,
        "target_fps": settings.fps,
        "fps": round(frames / wall, 2),
        "cpu_ms_per_frame": round(cpu / frames * 1000, 3),
        "cpu_percent_of_one_core": round(cpu / wall * 100, 1),
        "av_offset_ms": lag_ms,
        "av_correlation": round(correlation, 3),
    }


def mouth_lag(opens: np.ndarray, playing: np.ndarray, audio: np.ndarray, rate: int) -> tuple[int, float]:
    """The shift (ms) of the sound's energy that best matches how open the mouth was in each frame
    (`playing`: the sample of the looped `audio` playing when the frame was drawn); positive: the
    mouth shows what was heard that long before. Energy is the RMS over 20 ms, looked up per ms."""
    window = rate // 50
    squares = np.convolve(audio.astype(np.float64) ** 2, np.ones(window) / window, mode="same")
    energy = np.sqrt(squares[(np.arange(len(audio) * 1000 // rate) * rate) // 1000])
    best = (0, -1.0)
    if opens.std() == 0:
        return best
    for lag in range(-MAX_LAG_MS, MAX_LAG_MS + 1, 5):
        heard = energy[((playing * 1000) // rate - lag) % energy.size]
        if heard.std() > 0 and (r := float(np.corrcoef(opens, heard)[0, 1])) > best[1]:
            best = (lag, r)
    return best

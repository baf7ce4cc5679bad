"""Rendering the avatar along replies on their own playback clock (the demo's video, the benchmark)."""

from __future__ import annotations

import math

import numpy as np

from device.avatar.animator import Avatar, State
from device.avatar.renderer import Renderer

PAUSE_S = 0.6  # between replies the avatar listens


def render_replies(
    replies: list[tuple[np.ndarray, tuple, int]], renderer: Renderer, sink, fps: float, avatar: Avatar | None = None
) -> np.ndarray:
    """Render each (audio, visemes, rate) reply after a listening pause; return the soundtrack that
    goes with the frames. The mouth follows a sample clock advancing one frame's worth of samples
    per frame, as a sound card's would."""
    avatar = avatar or Avatar()
    frame_count, soundtrack = 0, []

    def show() -> None:
        nonlocal frame_count
        sink.show(renderer.render(avatar.pose(frame_count / fps)))
        frame_count += 1

    for audio, visemes, rate in replies:
        per_frame = rate / fps
        avatar.set_state(State.LISTENING)
        pause = int(PAUSE_S * fps)
        for _ in range(pause):
            show()
        played = [0]
        avatar.speak(visemes, rate, lambda: played[0])
        frames = math.ceil(len(audio) / per_frame)
        for frame in range(frames):
            played[0] = int(frame * per_frame)
            show()
        avatar.silence()
        soundtrack += [
            np.zeros(round(pause * per_frame), np.float32),
            np.pad(audio, (0, round(frames * per_frame) - len(audio))),
        ]
    return np.concatenate(soundtrack) if soundtrack else np.zeros(0, np.float32)

"""Echo cancellation: the microphone's frames with the robot's own voice taken out.

WebRTC's audio processing (AEC3 and its high-pass filter; webrtc-audio-processing 2.1, built by
setup.py): a well-kept adaptive filter with delay estimation, double-talk handling and a residual echo
suppressor, which is not something to write by hand. Its binding (webrtc_aec3.cc, loaded with ctypes)
is ours only to set the length of AEC3's linear filter (`[bargein] echo_tail_ms`): with the default
52 ms a hall's tail is left to the suppressor, which then silences a visitor talking over a loud reply
too (docs/lab/bargein.md). The far end is what the speaker is actually
handed (`played`, from the speaker's thread or the sound card's callback, at the voice's rate); the
near end is each microphone frame (`clean`, from the microphone's thread). Both go to the module in
10 ms blocks on the microphone's clock: a block the speaker is handed is put on the microphone's
timeline where it plays, and for each 10 ms of microphone audio the same 10 ms of that timeline is
given as the far end first. So the far end leads its echo by the same time from one reply to the
next: AEC3 finds that delay once and keeps it. (A far end queued and taken as it came would start
each reply at a different offset, and AEC3 lets the echo through for 100-300 ms every time it has
to find the delay again: measured, those were self-interruptions.)

Where a block plays: by the sound cards' own clocks when they give them (PortAudio's DAC and ADC
times), else by when it was handed (`PlaybackTimeline`). Measured on a PulseAudio null sink and its
monitor over five replies, the far end led its echo by exactly the set lead (20.0-20.1 ms) each
time by the cards' clocks; by when blocks were handed, 45-74 ms, a different delay each reply.
Noise suppression stays off: it cost recognition more than it gave in a loud hall.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from engines.errors import OrinAvatarError
from engines.model_specs import SPEECH_RATE

from device.sound.playback_timeline import PlaybackTimeline, far_end_resampler

BLOCK = SPEECH_RATE // 100  # the module takes 10 ms blocks
# A fresh start of playback goes on the microphone's timeline at the sample being taken when it was
# handed: its echo cannot come earlier, and the far end must lead it (AEC3 cannot cancel what it has
# not been given yet); the output and input latencies of the cards make it lead by tens of ms. The
# speaker says when playback starts afresh; the blocks in between follow each other, however their
# writes were paced (a sound server takes them in bursts), unless one comes a second late.
LATE_BLOCK = SPEECH_RATE
FAR_END_LIMIT = (
    SPEECH_RATE * 10
)  # far-end samples kept ahead of the microphone (10 s; a sound server may take 2 s at once)
# AEC3 lets echo through for a moment where the far end is not what it has been following: after a
# silence (a reply's first 100-150 ms; 24-32 dB over the room's level where a reply's next sentence
# came 0.43 s late) and after far end it was never given (a block handed too late: 14 ms lost left
# 32 dB), measured through the echo room (docs/lab/bargein.md). For SETTLE after either, `settling` says
# so and nothing pauses a reply. Silence is the far end under QUIET_POWER for longer than a reply's own
# gaps between sentences (100-330 ms in the bundled answers); a loss counts from LOST_GAP (the 2-6 ms
# a speaker thread loses now and then left no echo to hear: no self-interruption in 90 replies).
SETTLE = SPEECH_RATE * 300 // 1000
RETURN_GAP = SPEECH_RATE * 400 // 1000
LOST_GAP = SPEECH_RATE * 8 // 1000
QUIET_POWER = 1e-6  # -60 dBFS
BLOCK_MS = 4  # AEC3's own blocks, in which its linear filter's length is counted
DEFAULT_TAIL_MS = 160  # as [bargein] echo_tail_ms's default; WebRTC's own is 52


class EchoCancellerError(OrinAvatarError):
    """The echo canceller cannot be used here."""


def _binding() -> ctypes.CDLL:
    """The compiled binding, built into this package by setup.py."""
    here = Path(__file__).parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if (here / f"_webrtc_aec3{suffix}").exists():
            library = ctypes.CDLL(str(here / f"_webrtc_aec3{suffix}"))
            break
    else:
        raise EchoCancellerError(
            f"echo cancellation needs WebRTC's audio processing, built when orin-avatar is installed, "
            f"but {here}/_webrtc_aec3*.so is missing: reinstall (pip install -e . builds it) "
            f'or set [bargein] echo_canceller = "none"'
        )
    library.aec3_create.restype = ctypes.c_void_p
    library.aec3_create.argtypes = [ctypes.c_int]
    library.aec3_far_end.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    library.aec3_near_end.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    library.aec3_destroy.argtypes = [ctypes.c_void_p]
    return library


class Aec3:
    """One AEC3 instance: 10 ms blocks of 16 kHz int16, the far end of each block before its near end."""

    def __init__(self, tail_ms: int) -> None:
        self._library = _binding()
        self._handle = self._library.aec3_create(tail_ms // BLOCK_MS)
        if not self._handle:
            raise EchoCancellerError(
                f"AEC3 refused a linear filter of {tail_ms} ms: set [bargein] echo_tail_ms to 52..500"
            )
        self._cleaned = np.zeros(BLOCK, np.int16)

    def __del__(self) -> None:
        if getattr(self, "_handle", None):
            self._library.aec3_destroy(self._handle)

    def far_end(self, block: np.ndarray) -> None:
        self._check(self._library.aec3_far_end(self._handle, _pcm(block).ctypes.data), "far end")

    def near_end(self, block: np.ndarray) -> np.ndarray:
        self._check(
            self._library.aec3_near_end(self._handle, _pcm(block).ctypes.data, self._cleaned.ctypes.data), "near end"
        )
        return self._cleaned.astype(np.float32) / 32768

    @staticmethod
    def _check(code: int, what: str) -> None:
        if code != 0:
            raise EchoCancellerError(f"WebRTC's audio processing refused a {what} block (error {code})")


def _pcm(block: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray((np.clip(block, -1, 1) * 32767).astype(np.int16))


class EchoCanceller:
    """AEC3 between what the speaker plays and what the microphone hears."""

    def __init__(
        self, speaker_rate: int, tail_ms: int = DEFAULT_TAIL_MS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._aec3 = Aec3(tail_ms)
        self._resampler = far_end_resampler(speaker_rate)
        self._lock = threading.Lock()
        self._far = np.zeros(0, np.float32)  # the far end from microphone sample self._processed on
        self._timeline = PlaybackTimeline(0, LATE_BLOCK, clock)
        self._fresh = False  # the speaker said the device ran dry, and no block has been placed since
        self._processed = 0  # microphone samples through the module
        self._near = np.zeros(0, np.float32)
        self._out = np.zeros(BLOCK, np.float32)  # one block of latency: every frame in gives a frame out
        # The blocks the last `clean` made, up to the newest (the frame it returned ends before that one):
        # a judge of loudness need not wait the block of latency the frames have.
        self.newest = np.zeros(0, np.float32)
        self.near_power = 0.0  # running sums over the frames where the far end played, for ERLE
        self.out_power = 0.0
        self.far_end_s = 0.0  # seconds of playback the module has been given: it converges on the first few
        self._quiet = RETURN_GAP  # far-end samples in a row under QUIET_POWER, up to the microphone's last processed
        self._settled_from = 0  # the microphone sample from which AEC3 has had the far end steadily again

    def played(self, samples: np.ndarray, fresh: bool, at: float | None = None) -> None:
        """What the speaker was just handed (speaker thread or the card's callback); `fresh`: after the device
        ran dry; `at`: its DAC time, when the card gives it."""
        audio = self._resampler.resample_chunk(samples.astype(np.float32))
        self._fresh = self._fresh or fresh  # kept until the resampler gives something out
        if not len(audio):
            return
        with self._lock:
            start = self._timeline.place(len(audio), self._fresh, at)
            self._fresh = False
            if start < self._processed:  # late: what should already have played is not the far end any more
                if self._processed - start >= LOST_GAP:
                    self._settled_from = max(self._settled_from, self._processed + SETTLE)
                audio, start = audio[self._processed - start :], self._processed
            offset, end = start - self._processed, start - self._processed + len(audio)
            if end > FAR_END_LIMIT:
                return
            if len(self._far) < end:
                self._far = np.concatenate([self._far, np.zeros(end - len(self._far), np.float32)])
            self._far[offset:end] = audio

    def clean(self, frame: np.ndarray, captured_at: float | None = None) -> np.ndarray:
        """The microphone frame with the echo removed (microphone thread); same length, 10 ms later.
        `captured_at`: the ADC time of its first sample, when the card gives it."""
        with self._lock:
            self._timeline.capture(len(frame), captured_at)
        self._near = np.concatenate([self._near, frame])
        pieces = [self._out]
        while len(self._near) >= BLOCK:
            near, self._near = self._near[:BLOCK], self._near[BLOCK:]
            far = self._take_far()
            pieces.append(self._process(near, far))
        out = np.concatenate(pieces)
        self.newest = out[len(pieces[0]) :]
        self._out = out[len(frame) :]
        return out[: len(frame)]

    @property
    def settling(self) -> bool:
        """The canceller's newest output may still be echo it lets through while it finds the far end
        again (after a silence, or far end it was not given)."""
        with self._lock:
            return self._processed < self._settled_from

    def reset_erle(self) -> None:
        """Measure the enhancement from now on."""
        self.near_power = self.out_power = 0.0

    def erle_db(self) -> float | None:
        """Echo return loss enhancement so far: microphone power over output power while the speaker
        played, in dB (None before it has played)."""
        if self.out_power <= 0 or self.near_power <= 0:
            return None
        return round(10 * np.log10(self.near_power / self.out_power), 1)

    def _take_far(self) -> np.ndarray | None:
        """The next 10 ms of the far end on the microphone's timeline (None: nothing played then)."""
        with self._lock:
            far, self._far = self._far[:BLOCK], self._far[BLOCK:]
            self._processed += BLOCK
            if len(far) and np.mean(far**2) >= QUIET_POWER:
                if self._quiet >= RETURN_GAP:
                    self._settled_from = max(self._settled_from, self._processed - BLOCK + SETTLE)
                self._quiet = 0
            else:
                self._quiet += BLOCK
        return np.pad(far, (0, BLOCK - len(far))) if len(far) and np.any(far) else None

    def _process(self, near: np.ndarray, far: np.ndarray | None) -> np.ndarray:
        self._aec3.far_end(far if far is not None else np.zeros(BLOCK, np.float32))
        out = self._aec3.near_end(near)
        if far is not None and np.any(far):
            self.far_end_s += BLOCK / SPEECH_RATE
            self.near_power += float(np.dot(near, near))
            self.out_power += float(np.dot(out, out))
        return out

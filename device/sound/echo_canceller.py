"""Echo cancellation: the microphone's frames with the robot's own voice taken out.

WebRTC's audio processing (AEC3 and its high-pass filter), through livekit's
`AudioProcessingModule` (livekit 1.2.1, Apache-2.0, manylinux wheels for x86_64 and aarch64):
a well-kept adaptive filter with delay estimation, double-talk handling and a residual echo
suppressor, which is not something to write by hand. The far end is what the speaker is actually
handed (`played`, from the speaker's thread, at the voice's rate); the near end is each microphone
frame (`clean`, from the microphone's thread). Both go to the module in 10 ms blocks on the
microphone's clock: for each 10 ms of microphone audio, the next 10 ms of what was played (or
silence if nothing was) is given as the far end first; AEC3 finds the delay between them itself.
Noise suppression stays off: it cost recognition more than it gave in a loud hall.
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from engines.errors import OrinAvatarError
from engines.model_specs import SPEECH_RATE

BLOCK = SPEECH_RATE // 100  # the module takes 10 ms blocks
FAR_END_LIMIT = SPEECH_RATE  # far-end samples kept waiting for the microphone (1 s): older ones are dropped


class EchoCancellerError(OrinAvatarError):
    """The echo canceller cannot be used here."""


class EchoCanceller:
    """AEC3 between what the speaker plays and what the microphone hears."""

    def __init__(self, speaker_rate: int) -> None:
        import soxr

        try:
            from livekit import rtc
        except ImportError as exc:
            raise EchoCancellerError("echo cancellation needs livekit's audio processing: pip install "
                                     "'orin-avatar[bargein]' (or set [bargein] echo_canceller = \"none\")") from exc
        self._rtc = rtc
        self._apm = rtc.AudioProcessingModule(echo_cancellation=True, high_pass_filter=True)
        self._apm.set_stream_delay_ms(0)
        self._resampler = soxr.ResampleStream(speaker_rate, SPEECH_RATE, 1, dtype="float32")
        self._lock = threading.Lock()
        self._far: collections.deque[np.ndarray] = collections.deque()  # 16 kHz pieces, oldest first
        self._far_count = 0
        self._near = np.zeros(0, np.float32)
        self._out = np.zeros(BLOCK, np.float32)  # one block of latency: every frame in gives a frame out
        self.near_power = 0.0  # running sums over the frames where the far end played, for ERLE
        self.out_power = 0.0

    def played(self, samples: np.ndarray) -> None:
        """What the speaker was just handed (speaker thread)."""
        audio = self._resampler.resample_chunk(samples.astype(np.float32))
        with self._lock:
            self._far.append(audio)
            self._far_count += len(audio)
            while self._far_count > FAR_END_LIMIT:
                self._far_count -= len(self._far.popleft())

    def clean(self, frame: np.ndarray) -> np.ndarray:
        """The microphone frame with the echo removed (microphone thread); same length, 10 ms later."""
        self._near = np.concatenate([self._near, frame])
        pieces = [self._out]
        while len(self._near) >= BLOCK:
            near, self._near = self._near[:BLOCK], self._near[BLOCK:]
            far = self._take_far()
            pieces.append(self._process(near, far))
        out = np.concatenate(pieces)
        self._out = out[len(frame):]
        return out[:len(frame)]

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
        with self._lock:
            if self._far_count == 0:
                return None
            parts, needed = [], BLOCK
            while needed and self._far:
                piece = self._far.popleft()
                parts.append(piece[:needed])
                if len(piece) > needed:
                    self._far.appendleft(piece[needed:])
                needed -= len(parts[-1])
            self._far_count -= BLOCK - needed
        return np.pad(np.concatenate(parts), (0, needed))

    def _process(self, near: np.ndarray, far: np.ndarray | None) -> np.ndarray:
        far_frame = self._frame(far if far is not None else np.zeros(BLOCK, np.float32))
        self._apm.process_reverse_stream(far_frame)
        near_frame = self._frame(near)
        self._apm.process_stream(near_frame)
        out = np.frombuffer(near_frame.data, np.int16).astype(np.float32) / 32768
        if far is not None and np.any(far):
            self.near_power += float(np.dot(near, near))
            self.out_power += float(np.dot(out, out))
        return out

    def _frame(self, audio: np.ndarray):
        pcm = (np.clip(audio, -1, 1) * 32767).astype(np.int16)
        return self._rtc.AudioFrame(pcm.tobytes(), SPEECH_RATE, 1, BLOCK)

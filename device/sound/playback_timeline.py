"""Where the blocks handed to a speaker are heard, on the microphone's sample clock.

The microphone's frames and the speaker's blocks come on threads of their own, 32 ms and 20 ms at a
time. A block handed to the sound card while the microphone is taking sample `p` (its last frame's
position plus the time since, in samples) plays from `p + latency` if the card had run dry, else
right after the block before it, as a sound card's buffer does (a block up to `slack` late included). The echo canceller (where its far
end goes) and the echo room (where its echo goes) place blocks the same way, so from one reply to
the next the far end leads its echo by the same time, which AEC3 finds once and keeps.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from engines.model_specs import SPEECH_RATE

if TYPE_CHECKING:
    import soxr


class PlaybackTimeline:
    """Not thread-safe on its own: its owner calls it under its lock."""

    def __init__(self, latency: int, slack: int = 0, clock: Callable[[], float] = time.monotonic) -> None:
        """`latency`: microphone samples from handing a block to the card to its playing, when it ran dry;
        `slack`: how late (in samples) a block may come and still follow its predecessor."""
        self.latency = latency
        self.slack = slack
        self._clock = clock
        self.captured = 0  # microphone samples taken so far
        self._captured_at = clock()  # when the last of them came
        self.next = 0  # microphone sample where the next block handed plays

    def capture(self, count: int) -> None:
        """The microphone took `count` more samples, just now."""
        self.captured += count
        self._captured_at = self._clock()

    def place(self, count: int, fresh: bool = False) -> int:
        """A block of `count` (16 kHz) samples handed to the card now: the microphone sample it plays from.
        `fresh`: the card is known to have run dry before it (else it is judged by the time)."""
        now = self.captured + int((self._clock() - self._captured_at) * SPEECH_RATE)
        if fresh or self.next + self.slack <= now:  # the card ran dry (or never played): the block starts afresh
            self.next = now + self.latency
        start = self.next
        self.next += count
        return start


def far_end_resampler(speaker_rate: int) -> soxr.ResampleStream:
    """The speaker's blocks at 16 kHz as they come, for the echo canceller and the echo room: soxr's
    quick quality gives each block out at once (a sample's lag), so a block is placed where it was
    handed and the blocks follow each other as they play. (The high quality holds back 6-40 ms,
    swinging from block to block: each block placed by that lag moved against the one before,
    leaving gaps and overlaps of up to 14 ms, a far end AEC3 only partly followed.) Its aliasing
    above 5 kHz is far-end sound without an echo, which a canceller leaves alone."""
    import soxr

    return soxr.ResampleStream(speaker_rate, SPEECH_RATE, 1, dtype="float32", quality="QQ")

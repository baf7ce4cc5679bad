"""Where the blocks handed to a speaker are heard, on the microphone's sample clock.

The microphone's frames and the speaker's blocks come on threads of their own, 32 ms and 20 ms at a
time. The blocks of a playback follow each other on the microphone's timeline as a sound card plays
them; where a playback starts is known one of two ways:
- by the cards' own clocks, when they give them (PortAudio's callbacks: each output buffer's DAC
  time, each input buffer's ADC time, both from ALSA's status timestamps): the block goes at the
  microphone sample taken at its DAC time. These times jitter by a few ms from buffer to buffer
  (up to 3.4 ms on PulseAudio, whose delay figures move in steps), enough to break AEC3 if each
  buffer went where its own time says, so the blocks follow each other; they start afresh where
  the DAC times say when a block is due more than DEVICE_SLIP away from where it would follow (an
  xrun, capture dropped), or its DAC times have stayed beyond the jitter for DEVICE_STEADY (a sound
  server that played silence while its client was late, a playback first placed before the
  microphone gave its times). Following through such a shift left the far end 10-40 ms off its
  echo, a different offset on each start and after each stall: on a stalling server AEC3 then took
  4-41 dB out of most replies instead of 60-73 while it found the new delay (docs/lab/bargein.md).
- else by when it was handed: at the sample the microphone is taking then (its last frame's position
  plus the time since) plus `latency`, if the card had run dry, else right after the block before it
  (a block up to `slack` late included).
The echo canceller places its far end this way, so from one reply to the next the far end leads its
echo by the same time, which AEC3 finds once and keeps. The echo room (the sound card of tests and
replayed visits) places its echo by when blocks were handed, and gives the canceller each block's
DAC time and each frame's ADC time, as a real card does.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable

from engines.model_specs import SPEECH_RATE

if TYPE_CHECKING:
    import soxr

log = logging.getLogger(__name__)
# Device times are only as good as the driver's delay figures (on PulseAudio the echo came up to 3 ms
# before its DAC time), and AEC3 cannot cancel an echo that comes before its far end: a playback placed
# by its DAC time starts this much earlier. AEC3 finds the rest of the delay itself.
DEVICE_LEAD = SPEECH_RATE * 20 // 1000
DEVICE_JITTER = SPEECH_RATE * 4 // 1000  # how far a DAC time may move from buffer to buffer and still be followed
DEVICE_STEADY = SPEECH_RATE * 30 // 1000  # blocks due beyond the jitter this long: the playback has moved
DEVICE_SLIP = SPEECH_RATE * 40 // 1000  # a block due this far away has moved at once (an xrun)
# A DAC time further than this from the microphone's latest ADC time is not on the same clock (a
# device that stamps with another clock): its blocks are placed by when they were handed.
SAME_CLOCK_S = 5.0


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
        self._adc: tuple[int, float] | None = None  # a microphone sample and its ADC time, when the card gives them
        self._clocks_differ = False
        self.next = 0  # microphone sample where the next block handed plays
        self._moved = 0  # samples placed in a row whose DAC times said they play beyond the jitter elsewhere

    def capture(self, count: int, adc_time: float | None = None) -> None:
        """The microphone took `count` more samples, just now; `adc_time`: the card's time of the first."""
        if adc_time is not None:
            self._adc = (self.captured, adc_time)
        self.captured += count
        self._captured_at = self._clock()

    def place(self, count: int, fresh: bool = False, dac_time: float | None = None) -> int:
        """A block of `count` (16 kHz) samples handed to the card now: the microphone sample it plays from.
        `fresh`: the card is known to have run dry before it (else it is judged by the time); `dac_time`:
        when the card plays it, on the card's clock."""
        due = self._on_device_clock(dac_time)
        if due is not None:
            away = abs(due - self.next)
            self._moved = self._moved + count if away > DEVICE_JITTER else 0
            if away > DEVICE_SLIP or self._moved >= DEVICE_STEADY:
                self.next, self._moved = due, 0
        else:
            now = self.captured + int((self._clock() - self._captured_at) * SPEECH_RATE)
            if fresh or self.next + self.slack <= now:  # the card ran dry (or never played): the block starts afresh
                self.next = now + self.latency
        start = self.next
        self.next += count
        return start

    def _on_device_clock(self, dac_time: float | None) -> int | None:
        """The microphone sample taken at `dac_time`, less the lead (None: no device times to go by)."""
        if dac_time is None or self._adc is None:
            return None
        sample, adc_time = self._adc
        if abs(dac_time - adc_time) > SAME_CLOCK_S:
            if not self._clocks_differ:
                log.warning(
                    "the speaker's and the microphone's device times are %.0f s apart (not one clock): the far "
                    "end is placed by when it is handed",
                    dac_time - adc_time,
                )
            self._clocks_differ = True
            return None
        return sample + round((dac_time - adc_time) * SPEECH_RATE) - DEVICE_LEAD


def far_end_resampler(speaker_rate: int) -> soxr.ResampleStream:
    """The speaker's blocks at 16 kHz as they come, for the echo canceller and the echo room: soxr's
    quick quality gives each block out at once (a sample's lag), so a block is placed where it was
    handed and the blocks follow each other as they play. (The high quality holds back 6-40 ms,
    swinging from block to block: each block placed by that lag moved against the one before,
    leaving gaps and overlaps of up to 14 ms, a far end AEC3 only partly followed.) Its aliasing
    above 5 kHz is far-end sound without an echo, which a canceller leaves alone."""
    import soxr

    return soxr.ResampleStream(speaker_rate, SPEECH_RATE, 1, dtype="float32", quality="QQ")

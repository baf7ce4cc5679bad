"""Speakers: where reply chunks go, and the playback clock the avatar's mouth follows.

`Speaker` owns its queue and its thread; `play` never blocks the caller, `stop` drops everything
queued and what is left of the current chunk at once (an interruption), `hold` fades out and waits
where it is (a visitor started talking: maybe a question, maybe only "mm-hm") until `resume` or
`stop`, and `played` counts the samples actually played since the reply began, which is what
lip-sync is scheduled on. Taps (the echo canceller's far end) get every block handed to the device.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np

from engines.errors import InputError

from device.messages import ReplyChunk

log = logging.getLogger(__name__)

BLOCK_SECONDS = 0.02  # playback granularity: how soon a stop or a hold takes effect
FADE_SECONDS = 0.01  # a hold fades out over this long
CARD_BUFFER_S = 0.04  # a paced speaker's card buffer: two 20 ms periods (ALSA's, PulseAudio's)


def fade_of(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """The first FADE_SECONDS of `samples` (or all, if fewer) faded out to silence: a hold, not a click."""
    fade = samples[: max(1, int(sample_rate * FADE_SECONDS))]
    return fade * np.linspace(1, 0, len(fade), dtype=np.float32)


class Speaker:
    """Base: subclasses write blocks of samples (`_write`), waiting for the device (`_wait_for_device`,
    or a `_write` that blocks) at its pace."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._queue: queue.Queue[ReplyChunk | None] = queue.Queue()
        self._stop = threading.Event()
        self._held = threading.Event()
        self._go = threading.Event()  # set when not held: the playback thread waits on it
        self._go.set()
        # Called with each block handed to the device, whether it starts playback afresh (the device ran
        # dry before it) or follows the block before it, and when the device plays its first sample on
        # the device's clock (its DAC time), when the device says (else None).
        self.taps: list[Callable[[np.ndarray, bool, float | None], None]] = []
        self._idle = threading.Event()
        self._idle.set()
        self._lock = threading.Lock()
        self._played = 0
        self._pending = 0
        self.fault = ""  # why the last reply could not be played ("" once one plays again)
        self._thread = threading.Thread(target=self._run, name="speaker", daemon=True)
        self._thread.start()

    @property
    def played(self) -> int:
        """Samples of the current (or last) reply played so far."""
        return self._played

    @property
    def busy(self) -> bool:
        return not self._idle.is_set()

    @property
    def held(self) -> bool:
        return self._held.is_set()

    def play(self, chunk: ReplyChunk) -> None:
        if chunk.sample_rate != self.sample_rate:
            raise ValueError(f"chunk at {chunk.sample_rate} Hz for a speaker at {self.sample_rate} Hz")
        with self._lock:
            if chunk.index == 0:
                self._stop.clear()
                self.resume()
            self._pending += 1
            self._idle.clear()
        self._queue.put(chunk)

    def hold(self) -> None:
        """Fade out within a block and wait there, keeping the rest (from any thread)."""
        self._held.set()
        self._go.clear()

    def resume(self) -> None:
        """Go on from where `hold` stopped."""
        self._held.clear()
        self._go.set()

    def stop(self) -> None:
        """Silence now; queued chunks are dropped."""
        self._stop.set()
        self._held.clear()
        self._go.set()
        closing = False
        while True:
            try:
                if self._queue.get_nowait() is not None:
                    self._done_one()
                else:
                    closing = True
            except queue.Empty:
                break
        if closing:  # close() came meanwhile (stop() runs on the speaker's own thread after a failure too)
            self._queue.put(None)

    def wait_idle(self, timeout: float | None = None) -> bool:
        return self._idle.wait(timeout)

    def close(self) -> None:
        self.stop()
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        block = max(1, int(self.sample_rate * BLOCK_SECONDS))
        while True:
            fresh = self._queue.empty()  # nothing to play next: the device runs dry before this chunk
            if (chunk := self._queue.get()) is None:
                return
            if chunk.index == 0:
                self._played = 0
            try:
                fresh = self._play(chunk, block, fresh)
                if not self._stop.is_set():
                    self._finished_chunk(chunk.last)
            except Exception as error:  # a device or disk that fails must not end the thread: `busy` would stay set
                self._failed(error)
            self._done_one()

    def _play(self, chunk: ReplyChunk, block: int, fresh: bool) -> bool:
        """Hand `chunk` to the device block by block, at its pace; whether the device runs dry after it."""
        start = 0
        while start < len(chunk.audio) and not self._stop.is_set():
            samples = chunk.audio[start : start + block]
            self._wait_for_device(len(samples))
            if self._held.is_set():
                self._fade_out(samples, fresh)
                self._go.wait()
                fresh = True  # the device ran dry while it waited
                continue  # the faded block is played again in full on resume
            self._hand(samples, fresh)
            self.fault = ""  # the device takes samples again
            fresh = False
            self._played += len(samples)
            start += len(samples)
        return fresh

    def _failed(self, error: Exception) -> None:
        """The reply being played is dropped, said in one line (once while the fault lasts); the next one is tried."""
        why = f"{type(error).__name__}: {error}"
        if why != self.fault:
            log.error("the speaker failed, the rest of this reply is dropped: %s", why)
        self.fault = why
        self.stop()

    def _wait_for_device(self, count: int) -> None:
        """Until the device needs the next `count` samples: a hold that comes meanwhile then holds them
        back, instead of their being handed over already."""

    def _fade_out(self, samples: np.ndarray, fresh: bool) -> None:
        """Held before `samples`: hand a fade of their start instead, not a click."""
        self._hand(fade_of(samples, self.sample_rate), fresh)

    def _hand(self, samples: np.ndarray, fresh: bool) -> None:
        """Taps first, then the device."""
        at = self._dac_time(samples)
        for tap in self.taps:
            tap(samples, fresh, at)
        self._write(samples)

    def _dac_time(self, samples: np.ndarray) -> float | None:
        """When the device plays `samples`, on its clock, if it says (taps get it)."""
        return None

    def _finished_chunk(self, last: bool) -> None:
        """After a chunk played to its end (devices add trailing silence after the last)."""

    def _done_one(self) -> None:
        with self._lock:
            self._pending -= 1
            if self._pending == 0:
                self._idle.set()

    def _write(self, samples: np.ndarray) -> None:
        raise NotImplementedError


class RecordingSpeaker(Speaker):
    """Keeps what it plays (for the demo's files and for tests); `realtime` paces it like a
    sound card so the playback clock advances as it would on the robot. A `card` (the echo room)
    plays each block and says when, on the microphone's clock, as a real card's callback does: the
    taps get that DAC time."""

    def __init__(self, sample_rate: int, realtime: bool = False) -> None:
        self.realtime = realtime
        self.recorded: list[np.ndarray] = []
        self.card: Callable[[np.ndarray], float | None] | None = None
        self._next = 0.0
        super().__init__(sample_rate)

    def _dac_time(self, samples: np.ndarray) -> float | None:
        """The card (if any) plays them, and says when."""
        return self.card(samples) if self.card is not None else None

    def _write(self, samples: np.ndarray) -> None:
        self.recorded.append(samples)

    def _wait_for_device(self, count: int) -> None:
        """Block as a sound card taking `count` samples would (when `realtime`): until the samples
        before them have been taken. A writer that came late catches up, as a blocking write into a
        card's buffer returns at once while the buffer has room, unless it came so late that the
        card ran dry (CARD_BUFFER_S): then it starts afresh."""
        if self.realtime:
            now = time.monotonic()
            self._next = (now if now - self._next > CARD_BUFFER_S else self._next) + count / self.sample_rate
            time.sleep(max(0.0, self._next - now - count / self.sample_rate))

    def take(self) -> np.ndarray:
        """Everything played since the last take."""
        audio = np.concatenate(self.recorded) if self.recorded else np.zeros(0, np.float32)
        self.recorded = []
        return audio


class WavFileSpeaker(RecordingSpeaker):
    """The daemon's `--speaker FILE.wav`: plays at a sound card's pace and writes each block to the file
    as it goes (16-bit PCM), so nothing is kept in memory however long the daemon runs, and what was
    played is on disk when it stops."""

    def __init__(self, path: Path, sample_rate: int) -> None:
        import soundfile

        self.path = Path(path)
        self.seconds = 0.0
        try:  # O_NOFOLLOW: a symlink planted at the path is refused (ELOOP), never written through
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise InputError(f"{self.path} is a symbolic link: give the replies file's own path") from None
            raise
        self._file = soundfile.SoundFile(descriptor, "w", sample_rate, 1, "PCM_16", format="WAV", closefd=True)
        super().__init__(sample_rate, realtime=True)

    def _write(self, samples: np.ndarray) -> None:
        self._file.write(np.clip(samples, -1.0, 1.0))
        self.seconds += len(samples) / self.sample_rate

    def close(self) -> None:
        super().close()
        try:
            self._file.close()
        except Exception as error:  # the header's sizes cannot be written (a full disk): said, not raised at exit
            log.error("the replies file %s could not be closed whole: %s", self.path, error)

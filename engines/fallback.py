"""The fallback seam: a model on its engine when it can, on ONNX Runtime when it must.

Every call goes to the engine on the runner's own worker thread (the thread that holds the CUDA
context) and is awaited up to the model's deadline. If the engine is missing, raises, fails or
overruns the deadline, the same call is answered by the CPU runner, so no request is lost; the
event is logged with its reason and counted, and the engine is tried again after a backoff that
doubles up to `MAX_BACKOFF_S`. The engine can arrive later (`attach`) when a build finishes.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from engines.runner import Feeds, Runner

log = logging.getLogger(__name__)
FIRST_BACKOFF_S = 5.0
WARM_UP_CALLS = 3  # trtexec's --warmUp runs for 200 ms; a few calls load what lazy loading leaves
MAX_BACKOFF_S = 600.0


@dataclass
class FallbackStats:
    engine_calls: int = 0
    cpu_calls: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)  # reason kind -> count
    last_reason: str = ""


class FallbackRunner(Runner):
    """Its engine, counters and backoff are its own: changed only under its lock, through its methods
    (`attach`, `keep_on_cpu`, and the calls themselves), read through `snapshot`."""

    def __init__(
        self,
        name: str,
        cpu: Runner,
        deadline_ms: float,
        reason: str = "no engine yet",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock` (monotonic seconds) times the backoff; tests drive it."""
        super().__init__(name)
        self.clock = clock
        self.cpu = cpu
        self.deadline_s = deadline_ms / 1000
        self._stats = FallbackStats(last_reason=reason)
        self._engine: Runner | None = None
        self._worker = ThreadPoolExecutor(1, thread_name_prefix=f"engine-{name}")
        self._retry_at = 0.0
        self._backoff = FIRST_BACKOFF_S
        self._lock = threading.Lock()

    @property
    def backend(self) -> str:
        with self._lock:
            engine = self._usable_engine()
            return engine.backend if engine is not None else f"{self.cpu.backend} ({self._stats.last_reason})"

    @property
    def kind(self) -> str:
        with self._lock:
            engine = self._usable_engine()
        return engine.kind if engine is not None else self.cpu.kind

    @property
    def input_names(self) -> list[str]:
        return self.cpu.input_names

    def snapshot(self) -> FallbackStats:
        """A copy of the counters, consistent at one instant."""
        with self._lock:
            return FallbackStats(
                self._stats.engine_calls, self._stats.cpu_calls, dict(self._stats.fallbacks), self._stats.last_reason
            )

    def keep_on_cpu(self, reason: str) -> None:
        """No engine will come (a build failed, TensorRT refused it): say why in status."""
        with self._lock:
            self._stats.last_reason = reason

    def attach(self, engine: Runner, warm_up: Feeds | None = None) -> None:
        """Start using an engine (activated here, on the worker thread that will run it), after running
        `warm_up` through it WARM_UP_CALLS times: its first calls load kernels lazily and would miss a
        short deadline (the VAD's 5 ms), which starts the backoff before the engine ever served."""
        self._worker.submit(engine.activate).result()
        try:
            for _ in range(WARM_UP_CALLS if warm_up is not None else 0):
                self._worker.submit(engine.infer, warm_up).result()
        except BaseException:
            self._worker.submit(engine.release).result()  # its buffers and context, on the thread that holds them
            raise
        with self._lock:
            old, self._engine = self._engine, engine
            self._retry_at, self._backoff = 0.0, FIRST_BACKOFF_S
        if old is not None:
            self._worker.submit(old.release)
        log.info("%s now runs on %s", self.name, engine.backend)

    def _usable_engine(self) -> Runner | None:
        """The engine, unless it is backing off after a failure; under the lock."""
        return self._engine if self._engine is not None and self.clock() >= self._retry_at else None

    def _activate(self) -> None:
        self.cpu.activate()

    def _infer(self, feeds: Feeds) -> dict[str, np.ndarray]:
        with self._lock:
            engine = self._usable_engine()
        if engine is not None:
            future = self._worker.submit(engine.infer, feeds)
            try:
                outputs = future.result(timeout=self.deadline_s)
                with self._lock:
                    self._stats.engine_calls += 1
                    self._backoff = FIRST_BACKOFF_S
                return outputs
            except FutureTimeout:
                self._fall_back("deadline", f"slower than its {self.deadline_s * 1000:.0f} ms deadline")
            except Exception as exc:  # whatever the engine raised, the CPU answers
                self._fall_back("error", f"{type(exc).__name__}: {exc}")
        with self._lock:
            self._stats.cpu_calls += 1
        return self.cpu.infer(feeds)

    def _fall_back(self, kind: str, reason: str) -> None:
        with self._lock:
            self._stats.fallbacks[kind] = self._stats.fallbacks.get(kind, 0) + 1
            self._stats.last_reason = reason
            self._retry_at = self.clock() + self._backoff
            backoff, self._backoff = self._backoff, min(self._backoff * 2, MAX_BACKOFF_S)
        log.warning("%s: engine %s; this call and the next %.0f s run on the CPU", self.name, reason, backoff)

    def _release(self) -> None:
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            self._worker.submit(engine.release).result()
        self._worker.shutdown(wait=False)
        self.cpu.release()

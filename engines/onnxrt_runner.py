"""ONNX Runtime on the CPU: the runner every model can fall back to.

ONNX Runtime's CPU arena keeps every region it has grown to and never gives it back: recognition and
synthesis see new tensor shapes on almost every call, so a daemon's memory ratchets up over days
(microsoft/onnxruntime#11627; measured here: the voice alone went from 354 to 407 MB over 120
sentences). The run option "memory.enable_memory_arena_shrinkage" (onnxruntime_run_options_config_keys.h)
returns the regions a run leaves unused; it costs that run fresh pages, so a runner asks for it at most
every SHRINK_EVERY_S (the voice stays at about 150 MB, synthesis time within noise).

Optimizing a graph is most of what loading it costs (on two cores the recogniser's decoder takes 2.2 s
to load, 0.35 s unoptimized), and every start of the daemon or a command did it again. So a runner
given an `optimized` path keeps ONNX Runtime's optimized graph there on its first load (the session
option `optimized_model_filepath`), with its sha256 beside it, and afterwards loads that with optimization
off once its bytes are checked against that sha256 (else it is made again). The file is made
for one machine (at the "all" level ONNX Runtime lays out weights for the CPU it runs on), so its
name carries the model's sha256, ONNX Runtime's version and the CPU (`optimized_name`).

The robot runs several sessions at once (VAD, recognition's encoder and decoder, the voice, the text
encoder, faces), each with its own intra-op pool. By default a pool's threads spin after each run,
waiting for the next: on a CPU with few cores they take the cores the other sessions need, even the
encoder's spinning while the decoder runs. So spinning is off (the session option
"session.intra_op.allow_spinning", onnxruntime_session_options_config_keys.h; ONNX Runtime's
"Thread management" guide). Measured on two cores: recognising the bundled opening-hours question
339-355 against 418-441 ms; `bench turn`, nine runs each way back to back, turn p50 322-454 against
371-477 ms (docs/lab/end-of-turn.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import platform
import time
from pathlib import Path
from typing import Callable

import numpy as np

from engines.errors import RunnerError
from engines.files import sha256_file
from engines.runner import Feeds, Runner

SHRINK_EVERY_S = 30.0
ALLOW_SPINNING = "session.intra_op.allow_spinning"  # kOrtSessionOptionsConfigAllowIntraOpSpinning
log = logging.getLogger(__name__)


def optimized_name(model: Path, sha256: str) -> str:
    """The file name of `model`'s optimized graph for this machine and ONNX Runtime."""
    import onnxruntime as ort

    return f"{model.stem}@{sha256[:16]}-ort{ort.__version__}-{_cpu_tag()}.onnx"


def _cpu_tag() -> str:
    """The CPU's architecture and a short hash of its feature flags (what ONNX Runtime's kernels choose by)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    features = next((line for line in lines if line.startswith(("flags", "Features"))), "")
    return f"{platform.machine()}-{hashlib.sha256(features.encode()).hexdigest()[:8]}"


def digest_of(optimized: Path) -> Path:
    """Beside each kept optimized graph, the sha256 it was kept with."""
    return optimized.with_name(optimized.name + ".sha256")


def optimized_intact(optimized: Path) -> bool:
    """Whether a kept optimized graph still has the bytes it was kept with (a graph changed on disk would
    run with other weights, unseen: the model store's manifest covers only the models themselves)."""
    try:
        return digest_of(optimized).read_text().strip() == sha256_file(optimized)
    except OSError:
        return False


class OnnxRuntimeRunner(Runner):
    """Runs an ONNX file with ONNX Runtime's CPU execution provider."""

    def __init__(
        self,
        name: str,
        path: Path,
        threads: int = 1,
        clock: Callable[[], float] = time.monotonic,
        optimized: Path | None = None,
    ) -> None:
        """`optimized`: where this machine's optimized graph of `path` is kept (made on the first load),
        or None to optimize on every load."""
        super().__init__(name)
        self.path = path
        self.threads = threads
        self.clock = clock
        self.optimized = optimized
        self.loaded_from: Path | None = None  # the file the session was made from
        self._session = None
        self._outputs: list[str] = []
        self._shrink = None  # run options that give the arena's unused regions back
        self._shrunk_at = float("-inf")

    @property
    def kind(self) -> str:
        return "cpu"

    @property
    def backend(self) -> str:
        return "onnxruntime-cpu"

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self._session.get_inputs()]

    def _activate(self) -> None:
        import onnxruntime as ort

        self._session = self._load_optimized(ort) or self._optimize_and_keep(ort) or self._open(ort, self.path)
        self._outputs = [o.name for o in self._session.get_outputs()]
        self._shrink = ort.RunOptions()
        self._shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def _options(self, ort, optimize: bool = True):
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.add_session_config_entry(ALLOW_SPINNING, "0")
        if not optimize:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return options

    def _open(self, ort, path: Path, options=None):
        try:
            session = ort.InferenceSession(str(path), options or self._options(ort), providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT raises several unrelated exception types
            raise RunnerError(
                f"ONNX Runtime could not load {self.name} from {path}: {exc}. "
                "Run 'orin-avatar models sync' to repair the model store."
            ) from exc
        self.loaded_from = path
        return session

    def _load_optimized(self, ort):
        """The session from the kept optimized graph, or None (none kept, one whose bytes are not those
        kept, or one that does not load: removed)."""
        if self.optimized is None or not self.optimized.is_file():
            return None
        if not digest_of(self.optimized).is_file():
            log.info(
                "%s: %s was kept without its sha256 (an older version); optimizing again", self.name, self.optimized
            )
            self._remove_optimized()
            return None
        if not optimized_intact(self.optimized):
            log.warning(
                "%s: the optimized graph %s is not the one kept (its sha256 differs from %s); optimizing again",
                self.name,
                self.optimized,
                digest_of(self.optimized).name,
            )
            self._remove_optimized()
            return None
        try:
            return self._open(ort, self.optimized, self._options(ort, optimize=False))
        except RunnerError as exc:
            log.warning(
                "%s: the optimized graph %s does not load (%s); optimizing the model again",
                self.name,
                self.optimized,
                exc.__cause__,
            )
            self._remove_optimized()
            return None

    def _remove_optimized(self) -> None:
        self.optimized.unlink(missing_ok=True)
        digest_of(self.optimized).unlink(missing_ok=True)

    def _optimize_and_keep(self, ort):
        """The session from the model, its optimized graph kept at `optimized` (older ones of the model
        removed). None when no session was made this way (the graph cannot be written there, a read-only
        or full disk, or the model does not load: the caller's plain load says which)."""
        if self.optimized is None:
            return None
        partial = self.optimized.with_name(f"{self.optimized.name}.{os.getpid()}.partial")  # renamed when whole
        options = self._options(ort)
        options.optimized_model_filepath = str(partial)
        try:
            self.optimized.parent.mkdir(parents=True, exist_ok=True)
            session = self._open(ort, self.path, options)
        except (OSError, RunnerError) as exc:
            self._not_kept(partial, exc)
            return None
        try:  # the session is made; only the keeping can fail from here
            digest = sha256_file(partial)
            for older in self.optimized.parent.glob(f"{self.path.stem}@*.onnx"):  # not *.partial: others' work
                older.unlink(missing_ok=True)
                digest_of(older).unlink(missing_ok=True)
            digest_of(self.optimized).write_text(digest + "\n")
            partial.replace(self.optimized)
        except OSError as exc:
            self._not_kept(partial, exc)
        return session

    def _not_kept(self, partial: Path, reason: Exception) -> None:
        log.info(
            "%s: its optimized graph is not kept at %s (%s); the model is optimized on every load",
            self.name,
            self.optimized,
            reason,
        )
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)

    def _infer(self, feeds: Feeds) -> dict[str, np.ndarray]:
        options, now = None, self.clock()
        if now - self._shrunk_at >= SHRINK_EVERY_S:
            options, self._shrunk_at = self._shrink, now
        try:
            values = self._session.run(self._outputs, dict(feeds), options)
        except Exception as exc:
            raise RunnerError(f"{self.name} inference failed on ONNX Runtime: {exc}") from exc
        return dict(zip(self._outputs, values))

    def _release(self) -> None:
        self._session = None

"""Engines for the store's models: found in the cache or built, validated, or the model stays on the CPU.

For each model the precision ladder of its spec is walked: a rung whose valid engine is cached
is loaded and validated again; otherwise it is built in a child process and validated; a rung
that fails is recorded with its reason and the next is tried. `serve` does this in the background
for a running daemon and attaches the engine to the model's fallback runner when it is ready.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engines import tensorrt_support
from engines.calibration_table import read_table, render_trt_cache
from engines.engine_cache import EngineCache, EngineKey, EngineRecord, forget
from engines.errors import OrinAvatarError
from engines.fallback import FallbackRunner
from engines.files import sha256_file
from engines.model_specs import MODELS, ModelSpec
from engines.onnx_check import check_onnx
from engines.onnxrt_runner import OnnxRuntimeRunner
from engines.platform import Platform, probe_platform
from engines.qdq_model import make_qdq_model, output_tensors, tensor_names, weighted_layers
from engines.store.model_store import ModelStore
from engines.tensorrt_runner import TensorRTRunner
from engines.trt_builder import BuildInterrupted, BuildRequest, EngineBuildError, build_in_child
from engines.validation import validate

log = logging.getLogger(__name__)
Report = Callable[[str], None]
# A build that was killed or timed out (memory is short at first boot, other work ran) is tried again,
# after 10 minutes, then 20, 40, 80; a refusal or a failed validation is final for its key.
BUILD_ATTEMPTS = 5
RETRY_AFTER_S = 600.0
RETRY_POLL_S = 60.0


@dataclass(frozen=True)
class EngineSettings:
    """[engines] in the settings file."""

    enabled: bool  # use TensorRT where it is installed
    precision: str  # auto (each model's ladder) | int8 | fp16 | fp32
    dla_core: int  # -1: GPU only; 0 or 1: that DLA core, with GPU fallback
    workspace_mb: int
    # The builder's tactic memory (MemoryPoolType.TACTIC_DRAM), which on an iGPU defaults to 75% of the
    # device's memory (the bindings' docstring): a first-boot build could take it from the daemon.
    tactic_dram_mb: int
    optimization_level: int  # 0..5, TensorRT's default 3; lower builds faster
    build_timeout_s: float

    def __post_init__(self) -> None:
        if self.precision not in ("auto", "int8", "fp16", "fp32"):
            raise ValueError(f"precision must be auto, int8, fp16 or fp32, got {self.precision!r}")
        if self.dla_core not in (-1, 0, 1):
            raise ValueError(f"dla_core must be -1, 0 or 1, got {self.dla_core}")
        if not 64 <= self.workspace_mb <= 65536:
            raise ValueError(f"workspace_mb must be between 64 and 65536, got {self.workspace_mb}")
        if not max(256, self.workspace_mb) <= self.tactic_dram_mb <= 65536:
            raise ValueError(
                f"tactic_dram_mb must be between 256 (and workspace_mb, {self.workspace_mb}) and 65536, "
                f"got {self.tactic_dram_mb}"
            )
        if not 0 <= self.optimization_level <= 5:
            raise ValueError(f"optimization_level must be between 0 and 5, got {self.optimization_level}")
        if self.build_timeout_s < 10:
            raise ValueError(f"build_timeout_s must be 10 or more, got {self.build_timeout_s}")


@dataclass(frozen=True)
class Outcome:
    """What a model ends up on."""

    model: str
    engine: Path | None
    precision: str | None
    reasons: tuple[str, ...]  # why rungs above it (or all of them) were not used
    record: EngineRecord | None = None


class EngineManager:
    def __init__(
        self,
        store: ModelStore,
        cache_root: Path,
        settings: EngineSettings,
        tables: Path,
        platform: Platform | None = None,
        report: Report = log.info,
        build_missing: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`tables`: the directory of shipped calibration tables; `report` receives build progress of
        the background builds (`serve`); `build_missing`: whether `serve` builds engines that are not
        cached yet (the daemon) or only uses the valid ones there are (demo, benchmarks); `clock`: wall
        time, when an interrupted build is tried again."""
        self.store = store
        self.cache = EngineCache(cache_root)
        self.settings = settings
        self.platform = platform or probe_platform()
        self.tables = Path(tables)
        self.report = report
        self.build_missing = build_missing
        self.clock = clock
        self.retry_poll_s = RETRY_POLL_S  # how often the builds thread looks for a retry that is due
        self._queue: queue.Queue = queue.Queue()
        self._server: threading.Thread | None = None

    @property
    def unavailable(self) -> str | None:
        """Why no model can use TensorRT here, or None."""
        if not self.settings.enabled:
            return "TensorRT is disabled in the settings ([engines] enabled = false)"
        return self.platform.problem

    def ladder(self, spec: ModelSpec, precision: str | None = None) -> tuple[str, ...]:
        chosen = precision or self.settings.precision
        if chosen != "auto":
            return (chosen,)
        has_table = (self.tables / f"{spec.name}.json").is_file()
        return tensorrt_support.precisions(self.platform.tensorrt, has_table, spec.quantized)

    def dla_core(self, spec: ModelSpec, wanted: int | None) -> tuple[int | None, str]:
        """The DLA core `spec`'s model may use (None: the GPU), and why not when it may not."""
        core = wanted if wanted is not None else (self.settings.dla_core if self.settings.dla_core >= 0 else None)
        if core is None:
            return None, ""
        if core >= self.platform.dla_cores:
            return None, f"DLA core {core} was asked for, but this device has {self.platform.dla_cores} DLA core(s)"
        problem = tensorrt_support.dla_problem(spec.static, self.platform.tensorrt)
        return (None, problem) if problem else (core, "")

    def key(self, spec: ModelSpec, precision: str, dla_core: int | None) -> EngineKey:
        table = self.tables / f"{spec.name}.json"
        return EngineKey(
            model=spec.model,
            onnx_sha256=self.store.entries()[spec.model].sha256,
            table_sha256=sha256_file(table) if precision == "int8" and table.is_file() and not spec.quantized else None,
            precision=precision,
            dla_core=dla_core,
            profile={k: [list(s) for s in v] for k, v in spec.profile.items()},
            workspace_mb=self.settings.workspace_mb,
            tactic_dram_mb=self.settings.tactic_dram_mb,
            optimization_level=self.settings.optimization_level,
            platform={k: v for k, v in self.platform.as_dict().items() if k not in ("problem", "dla_cores")},
        )

    def ensure(
        self,
        model: str,
        precision: str | None = None,
        dla_core: int | None = None,
        force: bool = False,
        report: Report = log.info,
        build: bool = True,
    ) -> Outcome:
        """A validated engine for `model`, walking down its ladder; built if need be (and `build`)."""
        spec = MODELS[model.removesuffix(".onnx")]
        if self.unavailable:
            return Outcome(spec.model, None, None, (self.unavailable,))
        if spec.cpu_reason:
            return Outcome(spec.model, None, None, (spec.cpu_reason,))
        dla, why_not_dla = self.dla_core(spec, dla_core)
        if why_not_dla:
            report(f"{spec.name}: not on the DLA ({why_not_dla})")
        reasons: list[str] = []
        keys = set()
        with self.cache.lock(spec.model):
            for rung in self.ladder(spec, precision):
                if dla is not None and not tensorrt_support.on_dla(rung):
                    report(f"{spec.name}: the {rung} rung runs on the GPU (the DLA runs only FP16 and INT8)")
                key = self.key(spec, rung, dla if tensorrt_support.on_dla(rung) else None)
                keys.add(key.digest)
                outcome = self._rung(spec, key, force, report, build)
                if outcome.engine is not None:
                    self.cache.remove_stale(spec.model, keys)
                    return Outcome(spec.model, outcome.engine, rung, tuple(reasons), outcome.record)
                reasons.append(f"{rung}: {outcome.reasons[0]}")
                report(f"{spec.name}: {rung} not used ({outcome.reasons[0]})")
            self.cache.remove_stale(spec.model, keys)
        return Outcome(spec.model, None, None, tuple(reasons))

    def _rung(self, spec: ModelSpec, key: EngineKey, force: bool, report: Report, build: bool) -> Outcome:
        record = self.cache.record(key)
        path = self.cache.engine_path(key)
        if record is not None and not force:
            if record.status != "valid" and not (build and record.retry_after and self.clock() >= record.retry_after):
                return Outcome(spec.model, None, key.precision, (_failure(record),), record)
            if path.is_file():
                problem = self._unchanged(path, record) or self._validate(spec, key, path, record)
                if problem is None:
                    report(f"{spec.name}: cached {key.precision} engine {key.digest} is valid")
                    return Outcome(spec.model, path, key.precision, (), record)
                report(f"{spec.name}: cached engine {key.digest} is unusable ({problem}); rebuilding")
                forget(path)
        if not build:
            return Outcome(
                spec.model,
                None,
                key.precision,
                ("no engine built yet (this command does not build; 'orin-avatar build' or the daemon does)",),
            )
        return self._build(spec, key, report, record)

    def _build(self, spec: ModelSpec, key: EngineKey, report: Report, before: EngineRecord | None) -> Outcome:
        started = time.monotonic()
        attempts = before.attempts + 1 if before is not None and before.status == "failed" else 1
        record = EngineRecord(key.digest, spec.model, key.precision, "failed", attempts=attempts)
        try:
            request = self._request(spec, key)
            build_in_child(request, self.settings.build_timeout_s, report)
            record.build_seconds = round(time.monotonic() - started, 1)
            problem = self._validate(spec, key, Path(request.output), record)
        except BuildInterrupted as exc:
            problem = str(exc)
            if attempts < BUILD_ATTEMPTS:  # the next start (or `build`) tries again after the back-off
                record.retry_after = self.clock() + RETRY_AFTER_S * 2 ** (attempts - 1)
        except OrinAvatarError as exc:
            problem = str(exc)
        except Exception as exc:  # whatever went wrong preparing the build, the rung failed: record why
            log.exception("%s: %s rung failed unexpectedly", spec.name, key.precision)
            problem = f"{type(exc).__name__}: {exc}"
        if problem is not None:
            record.reason = problem
            forget(self.cache.engine_path(key))
            self.cache.save(key, record)
            return Outcome(spec.model, None, key.precision, (problem,), record)
        record.status, record.sha256 = "valid", sha256_file(self.cache.engine_path(key))
        self.cache.save(key, record)
        report(
            f"{spec.name}: {key.precision} engine ready in {record.build_seconds:.0f} s "
            f"(cosine {record.validation['worst_cosine']:.4f} against ONNX Runtime FP32)"
        )
        return Outcome(spec.model, self.cache.engine_path(key), key.precision, (), record)

    def _request(self, spec: ModelSpec, key: EngineKey) -> BuildRequest:
        onnx_path = self.store.path(spec.model)  # hash checked against the manifest
        model = check_onnx(onnx_path, self.store.root)
        cache, fp16_layers = None, ()
        self.cache.directory(spec.model).mkdir(parents=True, exist_ok=True)
        if key.precision == "int8" and not spec.quantized:
            table_path = self.tables / f"{spec.name}.json"
            if not table_path.is_file():
                raise EngineBuildError(f"no calibration table {table_path}; run 'orin-avatar calibrate {spec.name}'")
            table = read_table(table_path, key.onnx_sha256, tensor_names(model), set(weighted_layers(model)))
            if tensorrt_support.strongly_typed(self.platform.tensorrt):  # explicit quantization: a Q/DQ model
                onnx_path = self.cache.directory(spec.model) / f"{key.digest}.qdq.onnx"
                make_qdq_model(self.store.path(spec.model), table, onnx_path)
                model = check_onnx(onnx_path, onnx_path.parent)
            else:
                cache = render_trt_cache(table, self.platform.tensorrt, output_tensors(model, table.fp16_nodes))
                fp16_layers = table.fp16_nodes
        refused = tensorrt_support.refusals(model, self.platform.tensorrt)
        if refused:
            raise EngineBuildError(
                f"TensorRT {self.platform.tensorrt} would refuse {spec.model}: " + "; ".join(str(r) for r in refused)
            )
        return BuildRequest(
            model=spec.model,
            onnx_path=str(onnx_path),
            precision=key.precision,
            calibration_cache=cache,
            fp16_layers=tuple(fp16_layers),
            dla_core=key.dla_core,
            profile=spec.profile,
            workspace_mb=self.settings.workspace_mb,
            tactic_dram_mb=self.settings.tactic_dram_mb,
            optimization_level=self.settings.optimization_level,
            timing_cache=str(self.cache.timing_cache_path(key.platform)),
            output=str(self.cache.engine_path(key)),
            quantized=spec.quantized,
        )

    @staticmethod
    def _unchanged(path: Path, record: EngineRecord) -> str | None:
        """Why the engine file is not the one built and validated (None: it is)."""
        return None if sha256_file(path) == record.sha256 else "its bytes changed since it was built and validated"

    def _validate(self, spec: ModelSpec, key: EngineKey, path: Path, record: EngineRecord) -> str | None:
        """Deserialize, create a context, run the golden inputs, compare with ONNX Runtime FP32."""
        engine = TensorRTRunner(spec.name, path, key.dla_core, key.precision)
        reference = OnnxRuntimeRunner(spec.name, self.store.path(spec.model))
        try:
            with engine, reference:
                result = validate(engine, reference, spec.golden(), spec.min_cosine)
                off_dla = engine.layers_off_dla() if key.dla_core is not None else []
        except OrinAvatarError as exc:
            return str(exc)
        except Exception as exc:  # PyCUDA's errors, a TypeError from the bindings: unusable, and said why
            log.exception("%s: the %s engine could not be run", spec.name, key.precision)
            return f"{type(exc).__name__}: {exc}"
        record.validation = result.as_dict() | ({"layers_on_gpu": off_dla} if key.dla_core is not None else {})
        if off_dla:
            log.warning(
                "%s: %d layer(s) left DLA core %d for the GPU: %s",
                spec.name,
                len(off_dla),
                key.dla_core,
                ", ".join(off_dla[:10]),
            )
        return None if result.passed else f"does not match ONNX Runtime FP32: {result.detail}"

    # --- the daemon's side ---------------------------------------------------------------------

    def serve(self, runner: FallbackRunner, model: str) -> None:
        """Find or build the engine in the background and switch `runner` to it when ready. Builds
        run one at a time (each can take most of the Orin's memory), in the order asked."""
        self._queue.put((runner, model))
        if self._server is None:
            self._server = threading.Thread(target=self._serve_all, name="engine-builds", daemon=True)
            self._server.start()

    def _serve_all(self) -> None:
        """The engine-builds thread: each model asked for, one at a time; a model whose build was
        interrupted is asked for again when its retry is due (a kiosk runs for days)."""
        later: list[tuple[float, FallbackRunner, str]] = []  # (retry due, runner, model)
        while True:
            try:
                runner, model = self._queue.get(timeout=self.retry_poll_s if later else None)
            except queue.Empty:
                pass
            else:
                try:
                    later += self._serve_one(runner, model)
                finally:
                    self._queue.task_done()
            due = [item for item in later if item[0] <= self.clock()]
            later = [item for item in later if item[0] > self.clock()]
            for _, runner, model in due:
                later += self._serve_one(runner, model)

    def _serve_one(self, runner: FallbackRunner, model: str) -> list[tuple[float, FallbackRunner, str]]:
        """Attach `model`'s engine to `runner`, or keep it on the CPU; when it is to be tried again."""
        try:
            outcome = self.ensure(model, report=self.report, build=self.build_missing)
            if outcome.engine is not None:
                dla = outcome.record.components.get("dla_core") if outcome.record else None
                engine = TensorRTRunner(runner.name, outcome.engine, dla, outcome.precision)
                runner.attach(engine, warm_up=MODELS[model.removesuffix(".onnx")].golden())
                return []
            runner.keep_on_cpu("; ".join(outcome.reasons) or "no engine")
        except Exception as exc:  # a failed engine leaves the model on the CPU, never the daemon down
            runner.keep_on_cpu(str(exc))
            log.warning("%s stays on the CPU: %s", model, exc)
        spec = MODELS[model.removesuffix(".onnx")]
        retries = [r.retry_after for r in self.cache.records() if r.model == spec.model and r.retry_after > 0]
        return [(min(retries), runner, model)] if retries and self.build_missing else []

    def wait(self) -> None:
        """Until every engine asked for is attached or given up."""
        self._queue.join()


def _failure(record: EngineRecord) -> str:
    """Why a recorded rung failed, and when it is tried again if it will be."""
    if not record.retry_after:
        return record.reason
    when = time.strftime("%H:%M", time.localtime(record.retry_after))
    return f"{record.reason} (attempt {record.attempts} of {BUILD_ATTEMPTS}; tried again after {when})"

"""Building a TensorRT engine from ONNX, in a child process.

The build runs in its own process (spawned, never forked from the threaded daemon) with a capped
workspace and a timeout, so an out-of-memory kill or a crash inside the builder ends only the
child; the parent reports why and the model stays on the CPU. Calls follow NVIDIA's Python API for
8.6, 10.x and 11.x (shared/TENSORRT_API.md): flags by name with getattr guards, every return value
checked, the calibrator serving the cache only.
"""

from __future__ import annotations

import importlib
import multiprocessing
import signal
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engines.errors import OrinAvatarError
from engines.files import file_lock, write_atomic


class EngineBuildError(OrinAvatarError):
    """TensorRT could not build an engine; the message says why and what to try."""


@dataclass(frozen=True)
class BuildRequest:
    model: str
    onnx_path: str  # the plain model, or its Q/DQ version for explicit quantization
    precision: str  # int8 | fp16 | fp32
    calibration_cache: bytes | None  # implicit INT8 (TensorRT 8.6 and 10.x)
    calibration_header: str | None  # what the cache's first line must be for the running TensorRT
    dla_core: int | None
    profile: dict  # input -> (min, opt, max) shapes
    workspace_mb: int
    optimization_level: int
    timing_cache: str | None
    output: str  # where the child writes the serialized engine


Report = Callable[[str], None]


def build_in_child(request: BuildRequest, timeout_s: float, report: Report) -> Path:
    """Build in a spawned process; return the engine file or raise EngineBuildError."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child_main, args=(request, sender), name=f"trt-build-{request.model}", daemon=True)
    child.start()
    sender.close()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if receiver.poll(0.2):
                try:
                    kind, text = receiver.recv()
                except EOFError:  # the child is gone without a word: killed or crashed
                    child.join(timeout=5)
                    raise EngineBuildError(_death(request.model, child.exitcode)) from None
                if kind == "progress":
                    report(text)
                    continue
                if kind == "error":
                    raise EngineBuildError(text)
                if kind == "done":
                    return Path(request.output)
            if time.monotonic() > deadline:
                child.kill()
                raise EngineBuildError(f"building {request.model} took longer than {timeout_s:.0f} s and was stopped; "
                                       "raise [engines] build_timeout_s or lower the optimization level")
    finally:
        child.join(timeout=5)
        if child.is_alive():
            child.kill()


def _death(model: str, exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " - usually out of memory: lower [engines] workspace_mb or stop other GPU work" if -exitcode == signal.SIGKILL else ""
        return f"the TensorRT builder for {model} was killed by {name}{hint}"
    return f"the TensorRT builder for {model} exited with status {exitcode} before finishing"


def _child_main(request: BuildRequest, pipe) -> None:
    try:
        build_engine(request, lambda text: pipe.send(("progress", text)))
        pipe.send(("done", ""))
    except EngineBuildError as exc:
        pipe.send(("error", str(exc)))
    except Exception as exc:  # anything else from TensorRT, reported with its type
        pipe.send(("error", f"{type(exc).__name__} while building {request.model}: {exc}"))
    finally:
        pipe.close()


def build_engine(request: BuildRequest, report: Report) -> None:
    trt = importlib.import_module("tensorrt")
    major = int(trt.__version__.split(".")[0])
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(_network_flags(trt, major))
    parser = trt.OnnxParser(network, logger)
    report(f"{request.model}: parsing ONNX")
    if not parser.parse_from_file(request.onnx_path):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise EngineBuildError(f"TensorRT's ONNX parser rejected {request.model}: {errors or 'no detail'}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, request.workspace_mb << 20)
    if hasattr(config, "builder_optimization_level"):
        config.builder_optimization_level = request.optimization_level
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    profile = _profile(trt, builder, config, request)
    _precision(trt, major, config, request, profile)
    if request.dla_core is not None:
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = request.dla_core
        config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
    timing = _load_timing_cache(config, request.timing_cache)
    report(f"{request.model}: building {request.precision} engine (minutes on first boot)")
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise EngineBuildError(
            f"TensorRT could not build {request.model} in {request.precision}: likely causes: 1) out of "
            "workspace memory (\"Could not find any implementation\"), 2) a layer unsupported in this precision, "
            "3) a calibration cache TensorRT ignored; see the TensorRT log lines above")
    if timing is not None and request.timing_cache:
        with file_lock(Path(request.timing_cache + ".lock")):
            write_atomic(Path(request.timing_cache), bytes(memoryview(config.get_timing_cache().serialize())))
    write_atomic(Path(request.output), bytes(memoryview(serialized)))
    report(f"{request.model}: engine built")


def _network_flags(trt, major: int) -> int:
    """8.6 needs EXPLICIT_BATCH to parse ONNX; 10.x ignores it; 11.x has no such flag (and other
    bit values), so flags are looked up by name, never by number."""
    if major >= 10:
        return 0
    return 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)


def _profile(trt, builder, config, request: BuildRequest):
    if not request.profile:
        return None
    profile = builder.create_optimization_profile()
    for name, (low, opt, high) in request.profile.items():
        try:
            profile.set_shape(name, tuple(low), tuple(opt), tuple(high))
        except ValueError as exc:
            raise EngineBuildError(f"{request.model}: shape profile of {name} {low}/{opt}/{high} is inconsistent: {exc}") from None
    if config.add_optimization_profile(profile) < 0:
        raise EngineBuildError(f"{request.model}: TensorRT refused the shape profile {request.profile}")
    return profile


def _precision(trt, major: int, config, request: BuildRequest, profile) -> None:
    if request.precision == "fp32":
        return
    if major >= 11:
        # Strongly typed: no precision flags exist; INT8 comes only from Q/DQ nodes in the model.
        if request.precision == "fp16":
            raise EngineBuildError("TensorRT 11 is strongly typed: FP16 needs an FP16 ONNX model, which this build does not make")
        return
    config.set_flag(trt.BuilderFlag.FP16)  # layers left out of INT8 run in FP16, not FP32
    if request.precision != "int8":
        return
    config.set_flag(trt.BuilderFlag.INT8)
    if request.calibration_cache is None:
        return  # explicit quantization: the Q/DQ model carries the scales
    header = request.calibration_cache.split(b"\n", 1)[0].decode()
    if header != request.calibration_header:
        # TensorRT would silently skip the cache and try to calibrate without data.
        raise EngineBuildError(f"the calibration cache for {request.model} says {header!r}, TensorRT {trt.__version__} "
                               f"expects {request.calibration_header!r}; it must be rendered for this TensorRT")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # deprecated in 10.1, still the way on 10.3
        config.int8_calibrator = cache_only_calibrator(trt, request.calibration_cache)
        if profile is not None and hasattr(config, "set_calibration_profile"):
            config.set_calibration_profile(profile)


def cache_only_calibrator(trt, cache: bytes):
    """A calibrator that serves the shipped cache and no data (DeepStream and Polygraphy do this).
    Its methods cannot fail: TensorRT swallows exceptions raised in them, so the cache is checked
    before the build instead."""
    algorithm = cache.split(b"\n", 1)[0].decode().rsplit("-", 1)[-1]
    base = trt.IInt8MinMaxCalibrator if algorithm == "MinMaxCalibration" else trt.IInt8EntropyCalibrator2

    class CacheOnlyCalibrator(base):
        def __init__(self) -> None:
            base.__init__(self)

        def get_batch_size(self) -> int:
            return 1

        def get_batch(self, names):
            return None

        def read_calibration_cache(self):
            return cache

        def write_calibration_cache(self, data) -> None:
            return None

    return CacheOnlyCalibrator()


def _load_timing_cache(config, path: str | None):
    if not path:
        return None
    data = Path(path).read_bytes() if Path(path).is_file() else b""
    cache = config.create_timing_cache(data)
    if not config.set_timing_cache(cache, False):
        cache = config.create_timing_cache(b"")  # a cache from another TensorRT: start afresh
        config.set_timing_cache(cache, False)
    return cache

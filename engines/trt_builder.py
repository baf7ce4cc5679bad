"""Building a TensorRT engine from ONNX, in a child process.

The build runs in its own process (spawned, never forked from the threaded daemon) with a capped
workspace and a timeout, so an out-of-memory kill or a crash inside the builder ends only the
child; the parent reports why and the model stays on the CPU. Calls follow NVIDIA's Python bindings of
8.6, 10.x and 11.x (NVIDIA/TensorRT python/src at v8.6.1, v10.3.0, v10.16, v11.1; every name used here
is checked against the real bindings by tests/test_tensorrt_bindings.py): flags by name, every return
value checked, the calibrator serving the cache only. docs/integrator/tensorrt.md explains the choices.
"""

from __future__ import annotations

import functools
import importlib
import multiprocessing
import signal
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engines.errors import OrinAvatarError
from engines.files import file_lock, write_atomic


class EngineBuildError(OrinAvatarError):
    """TensorRT could not build an engine; the message says why and what to try."""


class BuildInterrupted(EngineBuildError):
    """The build did not finish: killed (the out-of-memory killer's SIGKILL) or timed out. Unlike a
    refusal or a crash, worth trying again later, when the device may have more memory and time free."""


@dataclass(frozen=True)
class BuildRequest:
    model: str
    onnx_path: str  # the plain model, or its Q/DQ version for explicit quantization
    precision: str  # int8 | fp16 | fp32
    calibration_cache: bytes | None  # implicit INT8 (TensorRT 8.6 and 10.x)
    dla_core: int | None
    profile: dict  # input -> (min, opt, max) shapes
    workspace_mb: int
    tactic_dram_mb: int
    optimization_level: int
    timing_cache: str | None
    output: str  # where the child writes the serialized engine
    fp16_layers: tuple[str, ...] = ()  # ONNX nodes the table keeps out of INT8 (implicit INT8)
    quantized: bool = False  # the model carries its own Q/DQ nodes (ModelSpec.quantized)


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
                    killed = child.exitcode == -signal.SIGKILL
                    raise (BuildInterrupted if killed else EngineBuildError)(
                        _death(request.model, child.exitcode)
                    ) from None
                if kind == "progress":
                    report(text)
                    continue
                if kind == "error":
                    raise EngineBuildError(text)
                if kind == "done":
                    return Path(request.output)
            if time.monotonic() > deadline:
                child.kill()
                raise BuildInterrupted(
                    f"building {request.model} took longer than {timeout_s:.0f} s and was stopped; "
                    "raise [engines] build_timeout_s or lower the optimization level"
                )
    finally:
        child.join(timeout=5)
        if child.is_alive():
            child.kill()


def _death(model: str, exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = (
            " - usually out of memory: lower [engines] workspace_mb or stop other GPU work"
            if -exitcode == signal.SIGKILL
            else ""
        )
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
    logger = process_logger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(_network_flags(trt, major))
    parser = trt.OnnxParser(network, logger)
    _parser_flags(trt, parser)
    report(f"{request.model}: parsing ONNX")
    if not parser.parse_from_file(request.onnx_path):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise EngineBuildError(f"TensorRT's ONNX parser rejected {request.model}: {errors or 'no detail'}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, request.workspace_mb << 20)
    config.set_memory_pool_limit(trt.MemoryPoolType.TACTIC_DRAM, request.tactic_dram_mb << 20)
    config.builder_optimization_level = request.optimization_level
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    profile = _profile(trt, builder, config, request)
    calibrator = _precision(trt, major, config, request, profile)
    if request.fp16_layers and major < 11:
        _keep_in_fp16(trt, network, config, request, report)
    if request.dla_core is not None:
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = request.dla_core
        config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
    timing = _load_timing_cache(config, request.timing_cache)
    report(f"{request.model}: building {request.precision} engine (minutes on first boot)")
    serialized = builder.build_serialized_network(network, config)
    if calibrator is not None and calibrator.asked_for_data:
        # TensorRT skips a cache whose header is not its own version and algorithm, then tries to
        # calibrate: the only word the running library gives on the header is that it asks for data.
        header = request.calibration_cache.split(b"\n", 1)[0].decode()
        raise EngineBuildError(
            f"TensorRT {trt.__version__} ignored the calibration cache for {request.model} (header "
            f"{header!r} is not its own) and asked for calibration data; re-render the table for "
            "this TensorRT (see docs/integrator/tensorrt.md)"
        )
    if serialized is None:
        raise EngineBuildError(
            f"TensorRT could not build {request.model} in {request.precision}: likely causes: 1) out of "
            'workspace memory ("Could not find any implementation"), 2) a layer unsupported in this precision; '
            "see the TensorRT log lines above"
        )
    if timing is not None:
        _save_timing_cache(config, Path(request.timing_cache))
    write_atomic(Path(request.output), bytes(memoryview(serialized)))
    report(f"{request.model}: engine built")


_LOGGER_LOCK = threading.Lock()


def process_logger(trt):
    """The process's one TensorRT logger, TensorRT's plugin library registered with it. TensorRT keeps
    the first logger it is given and the plugin library stores its pointer globally (inferPlugin.cpp),
    so a logger made per runner would dangle once that runner is gone; Polygraphy and jetson-inference
    keep one. Plugins are registered before anything parses or deserializes: 8.6's parser may put
    plugins into an engine, and `deserialize_cuda_engine` returns None for an engine whose plugins are
    not registered."""
    with _LOGGER_LOCK:  # two runners' threads may ask first at once
        return _registered_logger(trt)


@functools.cache
def _registered_logger(trt):
    logger = trt.Logger(trt.Logger.WARNING)
    if not trt.init_libnvinfer_plugins(logger, ""):
        raise EngineBuildError(
            "TensorRT's plugin library (libnvinfer_plugin) could not be initialized; "
            "reinstall JetPack's TensorRT packages"
        )
    return logger


def _parser_flags(trt, parser) -> None:
    """Import InstanceNormalization natively rather than as the InstanceNormalization_TRT plugin
    (the default on 8.6; 10.x imports natively already)."""
    flags = getattr(trt, "OnnxParserFlag", None)
    if flags is not None and hasattr(flags, "NATIVE_INSTANCENORM"):
        parser.set_flag(flags.NATIVE_INSTANCENORM)


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
        try:  # the bindings raise RuntimeError (PY_ASSERT_RUNTIME_ERROR in pyCore.cpp)
            profile.set_shape(name, tuple(low), tuple(opt), tuple(high))
        except (RuntimeError, ValueError) as exc:
            raise EngineBuildError(
                f"{request.model}: shape profile of {name} {low}/{opt}/{high} is inconsistent: {exc}"
            ) from None
    if config.add_optimization_profile(profile) < 0:
        raise EngineBuildError(f"{request.model}: TensorRT refused the shape profile {request.profile}")
    return profile


def _precision(trt, major: int, config, request: BuildRequest, profile):
    """Precision flags (8.6/10.x) and the cache-only calibrator for implicit INT8; returns it."""
    if major >= 11:
        # Strongly typed: no precision flags exist; INT8 comes only from Q/DQ nodes in the model,
        # FP16 only from an FP16 model, and a plain model builds in FP32.
        if request.precision == "fp16":
            raise EngineBuildError(
                "TensorRT 11 is strongly typed: FP16 needs an FP16 ONNX model, which this build does not make"
            )
        return None
    if request.quantized:
        config.set_flag(trt.BuilderFlag.INT8)  # explicit quantization: Q/DQ nodes build only with INT8 on
        # 8.x/10.x (TensorRT developer guide), whatever the rung
    if request.precision == "fp32":
        return None
    config.set_flag(trt.BuilderFlag.FP16)  # layers left out of INT8 run in FP16, not FP32
    if request.precision != "int8":
        return None
    config.set_flag(trt.BuilderFlag.INT8)
    if request.calibration_cache is None:
        return None  # explicit quantization: the Q/DQ model carries the scales
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # deprecated in 10.1, still the way on 10.x
        calibrator = cache_only_calibrator(trt, request.calibration_cache)
        config.int8_calibrator = calibrator
        if profile is not None:
            config.set_calibration_profile(profile)
    return calibrator


def _keep_in_fp16(trt, network, config, request: BuildRequest, report: Report) -> None:
    """Layers the table keeps out of INT8 run in FP16, and the builder must obey it: without scales
    alone TensorRT may still fuse them into INT8 neighbours (TensorRT developer guide, "Layer-Level
    Control of Precision": a layer precision is a preference unless OBEY_PRECISION_CONSTRAINTS).
    A network output keeps the type the network gives it."""
    wanted, found = set(request.fp16_layers), set()
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        if layer.name in wanted:
            layer.precision = trt.float16
            for output in range(layer.num_outputs):
                if not layer.get_output(output).is_network_output:
                    layer.set_output_type(output, trt.float16)
            found.add(layer.name)
    if wanted - found:
        report(
            f"{request.model}: no TensorRT layer named {', '.join(sorted(wanted - found))}; those stay out of "
            "INT8 by their missing scales only"
        )
    config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)


def cache_only_calibrator(trt, cache: bytes):
    """A calibrator that serves the shipped cache and no data (DeepStream and Polygraphy do this).
    Its methods cannot fail: TensorRT swallows exceptions raised in them, so the cache is checked
    before the build instead."""
    algorithm = cache.split(b"\n", 1)[0].decode().rsplit("-", 1)[-1]
    base = trt.IInt8MinMaxCalibrator if algorithm == "MinMaxCalibration" else trt.IInt8EntropyCalibrator2

    class CacheOnlyCalibrator(base):
        def __init__(self) -> None:
            base.__init__(self)
            self.asked_for_data = False

        def get_batch_size(self) -> int:
            return 1

        def get_batch(self, names):
            self.asked_for_data = True  # TensorRT did not take the cache
            return None

        def read_calibration_cache(self):
            return cache

        def write_calibration_cache(self, data) -> None:
            return None

    return CacheOnlyCalibrator()


def _load_timing_cache(config, path: str | None):
    """The builder's timing cache from `path`; one that cannot be read (damaged, or from another
    TensorRT) is started afresh: it only saves time, and a build must never fail on it."""
    if not path:
        return None
    data = Path(path).read_bytes() if Path(path).is_file() else b""
    cache = config.create_timing_cache(data)  # None for bytes that are no timing cache
    if cache is None or not config.set_timing_cache(cache, False):
        cache = config.create_timing_cache(b"")
        config.set_timing_cache(cache, False)
    return cache


def _save_timing_cache(config, path: Path) -> None:
    """Write this build's timings into the file, keeping what other builds wrote there since this one
    read it (merged under the file's lock, as Polygraphy's save does)."""
    with file_lock(path.with_name(path.name + ".lock")):
        cache = config.get_timing_cache()
        on_disk = config.create_timing_cache(path.read_bytes()) if path.is_file() else None
        if on_disk is not None:
            cache.combine(on_disk, True)
        write_atomic(path, bytes(memoryview(cache.serialize())))

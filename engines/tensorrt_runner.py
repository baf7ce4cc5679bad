"""A TensorRT engine behind the Runner seam, on PyCUDA.

Every runner shares the device's primary context (`retain_primary_context`, the one the CUDA runtime
and TensorRT use; never pycuda.autoinit, which binds one thread, and never a context per model, whose
kernels would take turns and which costs memory) and pushes it for each call. It owns a stream and
page-locked host and device buffers sized once for the largest shapes of the optimization profile.
Each inference: set input shapes, copy in asynchronously, set tensor addresses, `execute_async_v3`,
copy out, one synchronize. Every TensorRT call's result is checked. PyCUDA releases a context only
from the thread that retained it, and a stream only while its context is current, so `release` runs
on the activating thread (the fallback runner's worker) and frees everything before the pop.
"""

from __future__ import annotations

import importlib
import json
import threading
from pathlib import Path

import numpy as np

from engines.errors import RunnerError
from engines.runner import Feeds, Runner
from engines.trt_builder import process_logger


class TensorRTRunner(Runner):
    def __init__(self, name: str, engine_path: Path, dla_core: int | None = None, precision: str = "") -> None:
        super().__init__(name)
        self.engine_path = Path(engine_path)
        self.dla_core = dla_core
        self.precision = precision
        self._lock = threading.Lock()
        self._io: dict[str, dict] = {}
        self._stream = self._execution = self._engine = None

    @property
    def kind(self) -> str:
        return "tensorrt"

    @property
    def backend(self) -> str:
        device = f"dla{self.dla_core}" if self.dla_core is not None else "gpu"
        return f"tensorrt-{device}-{self.precision}" if self.precision else f"tensorrt-{device}"

    @property
    def input_names(self) -> list[str]:
        return [n for n, io in self._io.items() if io["input"]]

    def _activate(self) -> None:
        trt = importlib.import_module("tensorrt")
        cuda = importlib.import_module("pycuda.driver")
        cuda.init()
        self._cuda = cuda
        self._context = cuda.Device(0).retain_primary_context()
        self._context.push()
        try:
            self._load(trt)
        except BaseException:
            self._free()
            self._context.pop()
            self._context.detach()
            raise
        self._context.pop()

    def _load(self, trt) -> None:
        runtime = trt.Runtime(process_logger(trt))
        if self.dla_core is not None:
            runtime.DLA_core = self.dla_core
        self._engine = runtime.deserialize_cuda_engine(self.engine_path.read_bytes())
        if self._engine is None:
            raise RunnerError(
                f"TensorRT could not deserialize {self.engine_path} (corrupt, or built by another "
                "TensorRT or GPU); it will be rebuilt"
            )
        self._execution = self._engine.create_execution_context()
        if self._execution is None:
            raise RunnerError(f"TensorRT could not create an execution context for {self.name} (out of GPU memory?)")
        self._stream = self._cuda.Stream()
        if self._engine.num_optimization_profiles > 0:
            self._execution.set_optimization_profile_async(0, self._stream.handle)
        for i in range(self._engine.num_io_tensors):
            name = self._engine.get_tensor_name(i)
            is_input = self._engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            dtype = np.dtype(trt.nptype(self._engine.get_tensor_dtype(name)))
            shape = self._max_shape(name, is_input)
            size = max(1, int(np.prod(shape)))
            self._io[name] = {
                "input": is_input,
                "dtype": dtype,
                "host": self._cuda.pagelocked_empty(size, dtype),
                "device": self._cuda.mem_alloc(size * dtype.itemsize),
            }
            if not self._execution.set_tensor_address(name, int(self._io[name]["device"])):
                raise RunnerError(f"{self.name}: TensorRT refused the address of tensor {name}")

    def _max_shape(self, name: str, is_input: bool) -> tuple[int, ...]:
        shape = tuple(self._engine.get_tensor_shape(name))
        if -1 not in shape:
            return shape
        if is_input:
            return tuple(self._engine.get_tensor_profile_shape(name, 0)[2])
        # An output's largest shape follows from the largest inputs.
        for input_name, io in self._io.items():
            if io["input"]:
                self._execution.set_input_shape(
                    input_name, tuple(self._engine.get_tensor_profile_shape(input_name, 0)[2])
                )
        shape = tuple(self._execution.get_tensor_shape(name))
        if -1 in shape:
            raise RunnerError(f"{self.name}: output {name} has a data-dependent shape; run this model on the CPU")
        return shape

    def layers_off_dla(self) -> list[str]:
        """Layers of a DLA engine that GPU fallback moved to the GPU (DLA work shows as ForeignNode; the
        reformat copies TensorRT puts at the DLA's edges move data, they did not leave it)."""
        trt = importlib.import_module("tensorrt")
        with self._lock:
            self._context.push()
            try:
                text = self._engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
            finally:
                self._context.pop()
        layers = json.loads(text).get("Layers", [])
        return [name for name in map(_layer_name, layers) if "ForeignNode" not in name and not _reformat(name)]

    def _infer(self, feeds: Feeds) -> dict[str, np.ndarray]:
        with self._lock:
            self._context.push()
            try:
                return self._run(feeds)
            finally:
                self._context.pop()

    def _run(self, feeds: Feeds) -> dict[str, np.ndarray]:
        for name, io in self._io.items():
            if not io["input"]:
                continue
            array = np.ascontiguousarray(feeds[name], dtype=io["dtype"])
            if array.size > io["host"].size:
                raise RunnerError(f"{self.name}: input {name} of shape {array.shape} exceeds the engine's profile")
            if not self._execution.set_input_shape(name, array.shape):
                raise RunnerError(f"{self.name}: for input {name}, failed to set shape to {array.shape}")
            live = io["host"][: array.size]  # only what this call uses: buffers are sized for the largest profile
            live[:] = array.ravel()
            self._cuda.memcpy_htod_async(io["device"], live, self._stream)
        if not self._execution.execute_async_v3(stream_handle=self._stream.handle):
            raise RunnerError(f"{self.name}: TensorRT execution failed")
        shapes = {}
        for name, io in self._io.items():
            if not io["input"]:
                shapes[name] = tuple(self._execution.get_tensor_shape(name))
                self._cuda.memcpy_dtoh_async(io["host"][: int(np.prod(shapes[name]))], io["device"], self._stream)
        self._stream.synchronize()
        return {
            name: self._io[name]["host"][: int(np.prod(shape))].reshape(shape).copy() for name, shape in shapes.items()
        }

    def _release(self) -> None:
        self._context.push()
        try:
            self._free()
        finally:
            self._context.pop()
            self._context.detach()

    def _free(self) -> None:
        """Device buffers, the stream, the execution context and the engine, while the context is current."""
        for io in self._io.values():
            io["device"].free()
        self._io = {}
        self._stream = self._execution = self._engine = None


def _layer_name(layer: dict | str) -> str:
    return layer.get("Name", "") if isinstance(layer, dict) else str(layer)


def _reformat(name: str) -> bool:
    """A copy TensorRT inserts between devices or formats ("Reformatting CopyNode for Input Tensor 0 to ...")."""
    return name.startswith("Reformatting CopyNode")

"""Simulated pycuda.driver: contexts that must be current in the calling thread, device memory
as host bytes addressed by integers, streams, and asynchronous copies (done at once).

As PyCUDA's own source behaves (src/cpp/cuda.hpp, `context::detach` and `stream::~stream`):
`Device.retain_primary_context()` returns the device's primary context (not made current);
`detach()` releases a context only from the thread that created or retained it (from another
thread PyCUDA assumes the context is gone and frees nothing: counted in `LEAKED`); a stream
destroyed while no context is current cannot be freed, and PyCUDA warns (kept in `WARNINGS`)."""

from __future__ import annotations

import itertools
import os
import threading

import numpy as np


class Error(Exception):
    pass


class LogicError(Error):
    pass


_initialized = False
_memory: dict[int, bytearray] = {}
_addresses = itertools.count(0x7F0000000000, 0x100000)
_current = threading.local()
LEAKED: list[str] = []  # contexts whose detach came from another thread
WARNINGS: list[str] = []  # clean-up failures PyCUDA would print


def init(flags: int = 0) -> None:
    global _initialized
    _initialized = True


def get_version() -> tuple[int, int, int]:
    return (12, 6, 0)


def get_driver_version() -> int:
    return 12060


def _require_init() -> None:
    if not _initialized:
        raise LogicError("cuInit has not been called")


def _stack() -> list:
    if not hasattr(_current, "stack"):
        _current.stack = []
    return _current.stack


def _require_context() -> None:
    if not _stack():
        raise LogicError("explicit_context_dependent failed: invalid device context - no currently active context?")


class Context:
    def __init__(self, device: "Device", primary: bool = False) -> None:
        self.device = device
        self.primary = primary
        self.detached = False
        self.thread = threading.get_ident()

    def push(self) -> None:
        if self.detached:
            raise LogicError("context was detached")
        _stack().append(self)

    @staticmethod
    def pop() -> None:
        if not _stack():
            raise LogicError("cannot pop non-current context")
        _stack().pop()

    def detach(self) -> None:
        if self.thread != threading.get_ident():
            LEAKED.append(f"{'primary ' if self.primary else ''}context detached from another thread")
            return
        self.detached = True


class Device:
    def __init__(self, ordinal: int) -> None:
        _require_init()
        if ordinal >= self.count():
            raise LogicError(f"invalid device ordinal {ordinal}")
        self.ordinal = ordinal

    @staticmethod
    def count() -> int:
        _require_init()
        return int(os.environ.get("TRT_SIM_GPUS", "1"))

    def name(self) -> str:
        return os.environ.get("TRT_SIM_GPU", "Orin (nvgpu)")

    def compute_capability(self) -> tuple[int, int]:
        return (8, 7)

    def make_context(self) -> Context:
        context = Context(self)
        context.push()
        return context

    def retain_primary_context(self) -> Context:
        return Context(self, primary=True)


class DeviceAllocation:
    def __init__(self, size: int) -> None:
        self.address = next(_addresses)
        _memory[self.address] = bytearray(size)

    def __int__(self) -> int:
        return self.address

    def free(self) -> None:
        _require_context()
        _memory.pop(self.address, None)


def mem_alloc(size: int) -> DeviceAllocation:
    _require_context()
    return DeviceAllocation(int(size))


def pagelocked_empty(shape, dtype) -> np.ndarray:
    _require_context()
    return np.empty(shape, dtype)


class Stream:
    def __init__(self) -> None:
        _require_context()
        self.handle = next(_addresses)

    def __del__(self) -> None:
        if not _stack():
            WARNINGS.append(
                "PyCUDA WARNING: a clean-up operation failed (dead context maybe?) "
                "cuStreamDestroy failed: invalid device context"
            )

    def synchronize(self) -> None:
        _require_context()


copied_bytes = 0  # host <-> device, in this process: what a runner's calls cost in copies


def memcpy_htod_async(dest, src: np.ndarray, stream: Stream | None = None) -> None:
    global copied_bytes
    _require_context()
    data = np.ascontiguousarray(src).tobytes()
    copied_bytes += len(data)
    buffer = _memory[int(dest)]
    if len(data) > len(buffer):
        raise LogicError("copy larger than the allocation")
    buffer[: len(data)] = data


def memcpy_dtoh_async(dest: np.ndarray, src, stream: Stream | None = None) -> None:
    global copied_bytes
    _require_context()
    buffer = _memory[int(src)]
    view = dest.reshape(-1).view(np.uint8)
    copied_bytes += view.size
    view[:] = np.frombuffer(bytes(buffer[: view.size]), np.uint8)


def _read(address: int, size: int) -> np.ndarray:
    return np.frombuffer(bytes(_memory[address][:size]), np.uint8).copy()


def _write(address: int, data: bytes) -> bool:
    buffer = _memory.get(address)
    if buffer is None or len(data) > len(buffer):
        return False
    buffer[: len(data)] = data
    return True

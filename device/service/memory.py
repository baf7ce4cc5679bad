"""Giving freed heap memory back to the operating system, for a process that runs for weeks.

glibc's malloc keeps memory that threads have freed in per-thread arenas and does not return pages
in the middle of a heap. The conversation's threads allocate and free tens of megabytes a turn
(audio, ONNX Runtime's tensors), so without a trim the daemon's resident memory creeps up for
days (measured by `orin-avatar bench soak`). `malloc_trim(0)` returns every free page of every
arena (glibc >= 2.8); elsewhere (musl, no glibc) there is nothing to call and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)


def _malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError, TypeError):
        log.info("no glibc malloc_trim here: freed memory is left to the allocator")
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def release_free_memory() -> bool:
    """Return freed heap pages to the system; True if there was anything to return."""
    return bool(_TRIM(0)) if _TRIM is not None else False

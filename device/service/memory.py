"""Giving freed heap memory back to the operating system, for a process that runs for weeks.

glibc's malloc keeps memory that threads have freed in per-thread arenas and does not return pages
in the middle of a heap. The conversation's threads allocate and free tens of megabytes a turn
(audio, ONNX Runtime's tensors), so without a trim the daemon's resident memory creeps up for
days (measured by `orin-avatar bench soak`). `malloc_trim(0)` returns every free page of every
arena (glibc >= 2.8); elsewhere (musl, no glibc) there is nothing to call and nothing is done.

The trim alone left a slope of 0.1-0.28 MB a minute over three 30-minute soaks: with up to eight
arenas per core, each of the daemon's ~20 threads fragments an arena of its own. Two arenas
(`mallopt(M_ARENA_MAX, 2)`, what MALLOC_ARENA_MAX=2 does, set before the threads start) measured
0.02 MB a minute, with no change in turn latency (the threads mostly wait or run native code that
keeps its own buffers).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)


M_ARENA_MAX = -8  # glibc's malloc.h
ARENAS = 2


def _glibc(function: str):
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c")), function)
    except (OSError, AttributeError, TypeError):
        log.info("no glibc %s here: memory is left to the allocator as it is", function)
        return None


_TRIM = _glibc("malloc_trim")
if _TRIM is not None:
    _TRIM.argtypes, _TRIM.restype = [ctypes.c_size_t], ctypes.c_int


def limit_arenas() -> bool:
    """At most ARENAS malloc arenas for the threads started from now on; True if it took."""
    mallopt = _glibc("mallopt")
    return mallopt is not None and bool(mallopt(ctypes.c_int(M_ARENA_MAX), ctypes.c_int(ARENAS)))


def release_free_memory() -> bool:
    """Return freed heap pages to the system; True if there was anything to return."""
    return bool(_TRIM(0)) if _TRIM is not None else False

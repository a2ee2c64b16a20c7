"""The process's heap, set up once by the first Session: kernels' output buffers come back from
freed memory instead of from fresh pages of the operating system.

Every kernel allocates its outputs (NumPy, through malloc), and a training step frees and
allocates the same sizes again and again. glibc's malloc serves a request of 128 KiB or more
with its own mmap and unmaps it when freed; its "dynamic threshold" is meant to stop that for
sizes that repeat, but raises the threshold to the freed size and then still maps a request of
that same size. So every large output was fresh memory, and writing it cost one page fault per
4 KiB: measured here, allocating and filling two 256 KiB arrays took 170 us (96 faults), two
6 MiB arrays 3.0-4.0 ms (996 faults), against 13 us and 0.42 ms once the memory is reused. In a
step those faults were charged to the kernels that write the buffers: the digits CNN's
first MaxPoolGrad took 118 us of which its compiled loop, on warm memory, needs 60.

TensorFlow keeps freed buffers in its own allocator. We keep them in malloc's: buffers up to
MMAP_THRESHOLD come from the heap (glibc's own largest dynamic threshold), and a freed top of
the heap is returned to the operating system only beyond TRIM_THRESHOLD, so a process holds
about its peak step memory, as TensorFlow's does. The setting is process-wide, like the
library's own; a user's MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ or glibc.malloc
tunables are respected, and a C library without mallopt (not glibc) is left alone.
"""

from __future__ import annotations

import ctypes
import os
import threading

MMAP_THRESHOLD = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD = 256 << 20

# mallopt's parameter numbers (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")

_lock = threading.Lock()
_configured = False


def configure() -> bool:
    """Sets malloc's thresholds (once per process); whether this call or an earlier one did."""
    global _configured
    with _lock:
        if not _configured:
            _configured = _set_thresholds()
        return _configured


def _user_tuned() -> bool:
    return any(name in os.environ for name in _USER_SETTINGS) or "glibc.malloc." in os.environ.get(
        "GLIBC_TUNABLES", ""
    )


def _set_thresholds() -> bool:
    if _user_tuned():
        return False
    # the process's own symbols: the C library it runs on
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # the mmap threshold first: setting it turns the dynamic one off
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )

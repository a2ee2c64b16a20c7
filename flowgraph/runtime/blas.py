"""BLAS runs single-threaded: intra-op parallelism belongs to the devices' pools (DESIGN.md
decision 10, runtime/threadpool.py).

OpenBLAS's own threads spin and wait on each other: a 256x256 sgemm was measured at ~140 GFLOP/s
on one thread but 1.5 GFLOP/s on OpenBLAS's 2 threads while another process held one of the two
cores. TensorFlow avoids this by sharding kernels over its own pool; so do we, and every BLAS
library loaded in the process (NumPy's and SciPy's) is limited to one thread at run time through
threadpoolctl, so that users need no environment variables. The limit is process-wide, like the
libraries' own setting.
"""

from __future__ import annotations

import threading

import scipy.linalg  # noqa: F401  (loads SciPy's BLAS too, so that the limit covers it)
from threadpoolctl import threadpool_info, threadpool_limits

_lock = threading.Lock()
_limited = False


def single_threaded() -> None:
    """Limits every loaded BLAS library to one thread (once per process)."""
    global _limited
    if _limited:
        return
    with _lock:
        if not _limited:
            threadpool_limits(1, user_api="blas")
            _limited = True


def num_threads() -> list[int]:
    """The thread count of each loaded BLAS library (for tests and diagnostics)."""
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]

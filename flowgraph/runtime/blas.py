"""Intra-op parallelism: the thread count of the BLAS library NumPy calls into.

TensorFlow's ConfigProto.intra_op_parallelism_threads bounds the threads one kernel may use.
Our expensive kernels are BLAS calls, so the setting goes to the BLAS library loaded by NumPy
(OpenBLAS, found among the process's loaded libraries). The count is process-wide, like the
library's own; a value of 0 leaves the library's default (one thread per core).
"""

from __future__ import annotations

import ctypes
import logging
import threading

log = logging.getLogger(__name__)

_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)
_GETTERS = (
    "scipy_openblas_get_num_threads64_",
    "openblas_get_num_threads64_",
    "openblas_get_num_threads",
)
_lock = threading.Lock()
_lib = None


def _library():
    global _lib
    if _lib is None:
        import numpy  # noqa: F401  (loads the BLAS library)

        try:
            with open("/proc/self/maps") as f:
                paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower()})
        except OSError:
            paths = []
        _lib = False
        for path in paths:
            lib = ctypes.CDLL(path)
            if any(hasattr(lib, n) for n in _SETTERS):
                _lib = lib
                break
    return _lib or None


def get_num_threads() -> int | None:
    """The BLAS thread count, or None if the BLAS library is not one we can control."""
    lib = _library()
    if lib is None:
        return None
    getter = next(getattr(lib, n) for n in _GETTERS if hasattr(lib, n))
    return int(getter())


def set_num_threads(n: int) -> bool:
    """Sets the BLAS thread count (n > 0); False if the BLAS library cannot be controlled."""
    if n <= 0:
        raise ValueError(f"intra-op thread count must be positive, got {n}")
    lib = _library()
    if lib is None:
        log.warning("intra_op_parallelism_threads=%d: NumPy's BLAS library cannot be configured", n)
        return False
    setter = next(getattr(lib, n_) for n_ in _SETTERS if hasattr(lib, n_))
    with _lock:
        setter(ctypes.c_int(n))
    return True

"""The C library's log, sin and cos, applied to whole arrays, for kernels that must reproduce
TensorFlow's numbers bit for bit.

TensorFlow's CPU random kernels compute Box-Muller, gamma and Poisson samples with the C
library's scalar `logf`, `sincosf`, `log`, `exp`, ... NumPy's own float32 loops (SIMD
approximations) and even its float64 `log` differ from glibc's in the last bit for a few
percent of inputs, and each such bit shows up in a sample. numba compiles a loop that calls
the very same libm entry points, so these ufuncs give TensorFlow's results on the same C
library. They are compiled on first use (about a second, then cached on disk); without numba
the float64 NumPy functions stand in (float32 results are the float64 ones rounded), which
differ from glibc's in the last bit of rare values.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import threading

import numpy as np

_lock = threading.Lock()
# glibc's lgamma itself (numba's math.lgamma is CPython's own algorithm, not the C library's)
_c_lgamma = ctypes.CDLL(ctypes.util.find_library("m")).lgamma
_c_lgamma.restype = ctypes.c_double
_c_lgamma.argtypes = [ctypes.c_double]
_ufuncs: dict | None = None


def _log(x):
    return math.log(x)


def _log1p(x):
    return math.log1p(x)


def _exp(x):
    return math.exp(x)


def _lgamma(x):
    return _c_lgamma(x)


def _sin(x):
    return math.sin(x)


def _cos(x):
    return math.cos(x)


# name -> (the scalar function numba compiles into a ufunc, the NumPy stand-in)
_FUNCTIONS = {
    "log": (_log, np.log),
    "log1p": (_log1p, np.log1p),
    "exp": (_exp, np.exp),
    "sin": (_sin, np.sin),
    "cos": (_cos, np.cos),
}


def _compile() -> dict:
    """{name: ufunc over float32 and float64}, calling libm through numba when it is there."""
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        return {name: _rounded(fallback) for name, (_, fallback) in _FUNCTIONS.items()}
    sigs = ["float32(float32)", "float64(float64)"]
    return {
        name: numba.vectorize(sigs, cache=True, nopython=True)(scalar)
        for name, (scalar, _) in _FUNCTIONS.items()
    }


def _rounded(fallback):
    def f(x):
        x = np.asarray(x)
        return fallback(x.astype(np.float64)).astype(x.dtype)

    return f


def ufuncs() -> dict:
    global _ufuncs
    if _ufuncs is None:
        with _lock:
            if _ufuncs is None:
                _ufuncs = _compile()
    return _ufuncs


def log(x: np.ndarray) -> np.ndarray:
    """logf on float32 arrays, log on float64 arrays."""
    return ufuncs()["log"](x)


def log1p(x: np.ndarray) -> np.ndarray:
    return ufuncs()["log1p"](x)


def exp(x: np.ndarray) -> np.ndarray:
    return ufuncs()["exp"](x)


_lgamma_ufunc = None


def lgamma(x: np.ndarray) -> np.ndarray:
    """The C library's lgamma on float64 arrays (TF's Poisson kernel calls std::lgamma),
    compiled on first use (not cached on disk: it calls through a ctypes pointer)."""
    global _lgamma_ufunc
    if _lgamma_ufunc is None:
        with _lock:
            if _lgamma_ufunc is None:
                try:
                    import numba
                except ImportError:  # pragma: no cover - numba is a dependency
                    from scipy.special import gammaln as ufunc
                else:
                    ufunc = numba.vectorize(["float64(float64)"], nopython=True)(_lgamma)
                _lgamma_ufunc = ufunc
    return _lgamma_ufunc(np.asarray(x, np.float64))


def sincos(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sin x, cos x) in x's precision (glibc's sincosf gives the same bits as sinf, cosf)."""
    table = ufuncs()
    return table["sin"](x), table["cos"](x)

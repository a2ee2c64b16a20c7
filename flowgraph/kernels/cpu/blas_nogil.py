"""BLAS gemm (C = alpha * A @ B + beta * C) and axpy (y += alpha * x) into existing arrays,
called without the GIL.

Kernels that accumulate a product into a buffer they own (the fused weight-gradient updates,
weight_updates.py) need gemm's `beta`, which np.matmul lacks. scipy.linalg.blas.sgemm has it but
holds the GIL for the whole product (measured: a thread counting in Python made 0.1M steps/s
beside it against 2.9M beside np.matmul), so the pool's other shards and kernels would wait
for it. This calls the same routine (SciPy's BLAS, through the function pointers that
scipy.linalg.cython_blas exports) with ctypes, which releases the GIL for a foreign call, and
passes leading dimensions, so a transposed operand or a block of rows is read in place.

Arrays are NumPy's row-major; BLAS is column-major. A row-major C is a column-major C^T, so
C^T = B^T A^T is computed: each operand goes in as its memory with 'N' where it is row-major
(its memory, read column-major, is its transpose) and 'T' where it is column-major.
"""

from __future__ import annotations

import ctypes

import numpy as np
from scipy.linalg import cython_blas

_P = ctypes.c_void_p
_GEMM_PROTO = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, *[_P] * 11)
_AXPY_PROTO = ctypes.CFUNCTYPE(None, *[_P] * 6)


def _routine(name: str, proto):
    capsule = cython_blas.__pyx_capi__[name]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = _P, [ctypes.py_object, ctypes.c_char_p]
    return proto(get_pointer(capsule, get_name(capsule)))


# element type -> (gemm, axpy, the C type of their scalars)
_ROUTINES = {
    np.dtype(np.float32): (
        _routine("sgemm", _GEMM_PROTO),
        _routine("saxpy", _AXPY_PROTO),
        ctypes.c_float,
    ),
    np.dtype(np.float64): (
        _routine("dgemm", _GEMM_PROTO),
        _routine("daxpy", _AXPY_PROTO),
        ctypes.c_double,
    ),
}
DTYPES = frozenset(_ROUTINES)


def _int(v: int):
    return ctypes.byref(ctypes.c_int(v))


def _layout(x: np.ndarray) -> tuple[bytes, int, np.ndarray]:
    """(trans, leading dimension, array) under which BLAS reads the row-major 2-D `x` as x^T
    (see the module docstring); a copy where `x` is neither row- nor column-major."""
    rows, cols = x.shape
    size = x.itemsize
    if x.strides[1] == size and x.strides[0] % size == 0 and x.strides[0] >= max(1, cols) * size:
        return b"N", x.strides[0] // size, x
    if x.strides[0] == size and x.strides[1] % size == 0 and x.strides[1] >= max(1, rows) * size:
        return b"T", x.strides[1] // size, x
    x = np.ascontiguousarray(x)
    return b"N", max(1, cols), x


def gemm(alpha: float, a: np.ndarray, b: np.ndarray, beta: float, c: np.ndarray) -> None:
    """c = alpha * a @ b + beta * c in place. `a` (m, k) and `b` (k, n) are any 2-D views of
    c's dtype (float32 or float64); `c` (m, n) has contiguous rows (a block of rows of a
    C-contiguous array qualifies). The caller checks shapes and that c aliases neither."""
    m, n = c.shape
    k = a.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:  # BLAS scales by beta; its argument checks would refuse the empty operands
        c *= beta
        return
    routine, _, scalar = _ROUTINES[c.dtype]
    if c.strides[1] != c.itemsize or c.strides[0] < n * c.itemsize:
        raise ValueError(f"gemm: c's rows are not contiguous (strides {c.strides})")
    trans_b, ld_b, b = _layout(b)
    trans_a, ld_a, a = _layout(a)
    ld_c = c.strides[0] // c.itemsize
    routine(
        trans_b,
        trans_a,
        _int(n),
        _int(m),
        _int(k),
        ctypes.byref(scalar(alpha)),
        _P(b.ctypes.data),
        _int(ld_b),
        _P(a.ctypes.data),
        _int(ld_a),
        ctypes.byref(scalar(beta)),
        _P(c.ctypes.data),
        _int(ld_c),
    )


def axpy(alpha: float, x: np.ndarray, y: np.ndarray) -> None:
    """y += alpha * x in place, one pass; x and y C-contiguous, of one shape and dtype."""
    if x.shape != y.shape or x.dtype != y.dtype:
        raise ValueError(f"axpy: {x.shape} {x.dtype} and {y.shape} {y.dtype} differ")
    if not (x.flags.c_contiguous and y.flags.c_contiguous):
        raise ValueError("axpy: x and y must be C-contiguous")
    if y.size:
        _, routine, scalar = _ROUTINES[y.dtype]
        one = _int(1)
        routine(
            _int(y.size),
            ctypes.byref(scalar(alpha)),
            _P(x.ctypes.data),
            one,
            _P(y.ctypes.data),
            one,
        )

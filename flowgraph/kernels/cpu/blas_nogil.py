"""BLAS gemm (C = alpha * A @ B + beta * C) and axpy (y += alpha * x) into existing arrays,
called without the GIL.

Kernels that accumulate a product into a buffer they own (the fused weight-gradient updates,
weight_updates.py) need gemm's `beta`, which np.matmul lacks. scipy.linalg.blas.sgemm has it but
holds the GIL for the whole product (measured: a thread counting in Python made 0.1M steps/s
beside it against 2.9M beside np.matmul), so the pool's other shards and kernels would wait
for it. This calls the routines through ctypes, which releases the GIL for a foreign call, with
leading dimensions, so a transposed operand or a block of rows is read in place.

The library: NumPy's own OpenBLAS where it exports its 64-bit-integer CBLAS (NumPy's wheels
since 2.0), else SciPy's BLAS through the function pointers scipy.linalg.cython_blas exports.
They are different OpenBLAS builds, and NumPy's was faster on the weight-gradient shapes
(one core, Haswell kernels, CPU time, GFLOP/s SciPy's -> NumPy's: 784x256 @ 256x1024 with
the left operand transposed 102 -> 109; 256x784x1024 98 -> 105; 64x3136x1024 73 -> 92).

Arrays are NumPy's row-major. An operand is passed as its memory with its leading dimension,
'N' where it is row-major and 'T' where it is column-major (its memory, read row-major, is its
transpose). Fortran BLAS is column-major: a row-major C is a column-major C^T, so it computes
C^T = B^T A^T, with the same flags.
"""

from __future__ import annotations

import ctypes

import numpy as np
from scipy.linalg import cython_blas
from threadpoolctl import threadpool_info

_P = ctypes.c_void_p
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def _numpy_cblas() -> dict | None:
    """{routine name: function} of NumPy's ILP64 CBLAS, or None where no loaded OpenBLAS
    exports one."""
    for info in threadpool_info():
        if info["internal_api"] != "openblas":
            continue
        lib = ctypes.CDLL(info["filepath"])  # the loaded library (dlopen counts a reference)
        try:
            return {name: getattr(lib, f"scipy_cblas_{name}64_") for name in _CBLAS_ARGS}
        except AttributeError:
            continue
    return None


_I, _E = ctypes.c_int64, ctypes.c_int  # ILP64's integers, CBLAS's enums
_CBLAS_ARGS = {
    "sgemm": [_E, _E, _E, _I, _I, _I, ctypes.c_float, _P, _I, _P, _I, ctypes.c_float, _P, _I],
    "dgemm": [_E, _E, _E, _I, _I, _I, ctypes.c_double, _P, _I, _P, _I, ctypes.c_double, _P, _I],
    "saxpy": [_I, ctypes.c_float, _P, _I, _P, _I],
    "daxpy": [_I, ctypes.c_double, _P, _I, _P, _I],
}


def _fortran_routine(name: str, proto):
    capsule = cython_blas.__pyx_capi__[name]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = _P, [ctypes.py_object, ctypes.c_char_p]
    return proto(get_pointer(capsule, get_name(capsule)))


def _int(v: int):
    return ctypes.byref(ctypes.c_int(v))


def _cblas_gemm(routine):
    def call(flags_a, flags_b, m, n, k, alpha, a, b, beta, c, ld_c):
        (ta, ld_a), (tb, ld_b) = flags_a, flags_b
        routine(_ROW_MAJOR, ta, tb, m, n, k, alpha, a, ld_a, b, ld_b, beta, c, ld_c)

    return call


def _fortran_gemm(routine, scalar):
    def call(flags_a, flags_b, m, n, k, alpha, a, b, beta, c, ld_c):
        (ta, ld_a), (tb, ld_b) = flags_a, flags_b
        chars = {_NO_TRANS: b"N", _TRANS: b"T"}
        routine(
            chars[tb], chars[ta], _int(n), _int(m), _int(k), ctypes.byref(scalar(alpha)),
            _P(b), _int(ld_b), _P(a), _int(ld_a), ctypes.byref(scalar(beta)), _P(c), _int(ld_c),
        )  # fmt: skip

    return call


def _cblas_axpy(routine):
    return lambda size, alpha, x, y: routine(size, alpha, x, 1, y, 1)


def _fortran_axpy(routine, scalar):
    def call(size, alpha, x, y):
        one = _int(1)
        routine(_int(size), ctypes.byref(scalar(alpha)), _P(x), one, _P(y), one)

    return call


def _routines(numpy_first: bool = True) -> dict:
    """element type -> (gemm, axpy) callables taking plain ints and addresses: NumPy's CBLAS
    where there is one (and `numpy_first`), else SciPy's Fortran BLAS."""
    cblas = _numpy_cblas() if numpy_first else None
    if cblas is not None:
        for name, argtypes in _CBLAS_ARGS.items():
            cblas[name].argtypes, cblas[name].restype = argtypes, None
        return {
            np.dtype(np.float32): (_cblas_gemm(cblas["sgemm"]), _cblas_axpy(cblas["saxpy"])),
            np.dtype(np.float64): (_cblas_gemm(cblas["dgemm"]), _cblas_axpy(cblas["daxpy"])),
        }
    gemm_proto = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, *[_P] * 11)
    axpy_proto = ctypes.CFUNCTYPE(None, *[_P] * 6)
    return {
        np.dtype(t): (
            _fortran_gemm(_fortran_routine(p + "gemm", gemm_proto), scalar),
            _fortran_axpy(_fortran_routine(p + "axpy", axpy_proto), scalar),
        )
        for t, p, scalar in ((np.float32, "s", ctypes.c_float), (np.float64, "d", ctypes.c_double))
    }


_ROUTINES = _routines()
DTYPES = frozenset(_ROUTINES)


def _layout(x: np.ndarray) -> tuple[tuple[int, int], np.ndarray]:
    """((trans flag, leading dimension), array) under which BLAS reads the 2-D `x` in place
    (see the module docstring); a copy where `x` is neither row- nor column-major."""
    rows, cols = x.shape
    size = x.itemsize
    if x.strides[1] == size and x.strides[0] % size == 0 and x.strides[0] >= max(1, cols) * size:
        return (_NO_TRANS, x.strides[0] // size), x
    if x.strides[0] == size and x.strides[1] % size == 0 and x.strides[1] >= max(1, rows) * size:
        return (_TRANS, x.strides[1] // size), x
    x = np.ascontiguousarray(x)
    return (_NO_TRANS, max(1, cols)), x


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
    routine, _ = _ROUTINES[c.dtype]
    if c.strides[1] != c.itemsize or c.strides[0] < n * c.itemsize:
        raise ValueError(f"gemm: c's rows are not contiguous (strides {c.strides})")
    flags_a, a = _layout(a)
    flags_b, b = _layout(b)
    ld_c = c.strides[0] // c.itemsize
    routine(
        flags_a, flags_b, m, n, k, alpha, a.ctypes.data, b.ctypes.data, beta, c.ctypes.data, ld_c
    )


def axpy(alpha: float, x: np.ndarray, y: np.ndarray) -> None:
    """y += alpha * x in place, one pass; x and y C-contiguous, of one shape and dtype."""
    if x.shape != y.shape or x.dtype != y.dtype:
        raise ValueError(f"axpy: {x.shape} {x.dtype} and {y.shape} {y.dtype} differ")
    if not (x.flags.c_contiguous and y.flags.c_contiguous):
        raise ValueError("axpy: x and y must be C-contiguous")
    if y.size:
        _ROUTINES[y.dtype][1](y.size, alpha, x.ctypes.data, y.ctypes.data)

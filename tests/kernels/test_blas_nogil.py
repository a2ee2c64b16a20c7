"""kernels/cpu/blas_nogil.py: gemm and axpy into existing arrays, against NumPy, for every
layout an operand can have (row-major, column-major, a block of rows, a strided copy), on both
libraries it can call (NumPy's CBLAS and SciPy's Fortran BLAS)."""

from __future__ import annotations

import numpy as np
import pytest

from flowgraph.kernels.cpu import blas_nogil
from flowgraph.kernels.cpu.blas_nogil import axpy, gemm


@pytest.fixture(autouse=True, params=["numpy", "scipy"])
def library(request, monkeypatch):
    if request.param == "numpy" and blas_nogil._numpy_cblas() is None:
        pytest.skip("NumPy's BLAS exports no ILP64 CBLAS here")
    monkeypatch.setattr(blas_nogil, "_ROUTINES", blas_nogil._routines(request.param == "numpy"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(5, 7, 3), (1, 4, 6), (6, 1, 1), (3, 0, 2), (0, 3, 3)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm_matches_numpy(dtype, m, k, n, ta, tb):
    rng = np.random.RandomState(0)
    a_mem = rng.randn(*((k, m) if ta else (m, k))).astype(dtype)
    b_mem = rng.randn(*((n, k) if tb else (k, n))).astype(dtype)
    a, b = (a_mem.T if ta else a_mem), (b_mem.T if tb else b_mem)
    c = rng.randn(m, n).astype(dtype)
    expect = 0.5 * c - 0.25 * (a @ b)
    gemm(-0.25, a, b, 0.5, c)
    np.testing.assert_allclose(c, expect, rtol=1e-5, atol=1e-5)
    # a block of rows of c, from the matching rows of a
    c = rng.randn(m + 2, n).astype(dtype)
    expect = c.copy()
    expect[1 : m + 1] += a @ b
    gemm(1.0, a, b, 1.0, c[1 : m + 1])
    np.testing.assert_allclose(c, expect, rtol=1e-5, atol=1e-5)


def test_gemm_copies_an_operand_that_is_neither_row_nor_column_major():
    rng = np.random.RandomState(1)
    a = rng.randn(8, 6)[::2, ::2]  # (4, 3), both strides non-unit
    b = rng.randn(3, 5)
    c = np.zeros((4, 5))
    gemm(1.0, a, b, 0.0, c)
    np.testing.assert_allclose(c, a @ b)


def test_gemm_refuses_an_output_without_contiguous_rows():
    c = np.zeros((4, 6))[:, ::2]
    with pytest.raises(ValueError, match="not contiguous"):
        gemm(1.0, np.ones((4, 2)), np.ones((2, 3)), 0.0, c)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_axpy(dtype):
    x = np.arange(12, dtype=dtype).reshape(3, 4)
    y = np.ones((3, 4), dtype)
    axpy(-2.0, x, y)
    np.testing.assert_array_equal(y, 1 - 2 * np.arange(12).reshape(3, 4))
    with pytest.raises(ValueError, match="differ"):
        axpy(1.0, x, np.ones(12, dtype))

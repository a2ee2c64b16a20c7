"""CPU kernels of the decompositions and least squares (Svd, SelfAdjointEigV2, MatrixSolveLs)
and of Cross, each one batched LAPACK/NumPy call over `[..., M, N]`.

Eigen- and singular vectors are unique only up to sign (a phase, for complex inputs): LAPACK's
choice may differ from Eigen's, which TensorFlow uses, so programs (and our tests) should rely
only on sign-invariant quantities, as TensorFlow's own tests do. float16 is computed in float32.
"""

from __future__ import annotations

import numpy as np

from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.linalg import _adjoint, _check_square, _invalid, _lapack, _shape_str


@register_kernel("Cross")
def cross(ctx, a, b):
    if a.shape != b.shape:
        raise _invalid(
            f"Both inputs must be of same shape: {_shape_str(a.shape)} vs. {_shape_str(b.shape)}"
        )
    if a.ndim < 1:
        raise _invalid("Input must be at least 1D")
    if a.shape[-1] != 3:
        raise _invalid(f"Trailing dimension must be of size 3: {_shape_str(a.shape)}")
    a0, a1, a2 = np.moveaxis(a, -1, 0)
    b0, b1, b2 = np.moveaxis(b, -1, 0)
    # Written out rather than np.cross, which refuses the unsigned and wraps nothing itself.
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


@register_kernel("SelfAdjointEigV2", expensive=True)
def self_adjoint_eig(ctx, x):
    """Eigenvalues in ascending order; reads only the lower triangle, as Eigen does."""
    _check_square(x)
    a = _lapack(x)
    try:
        if ctx.attrs["compute_v"]:
            e, v = np.linalg.eigh(a, UPLO="L")
            return e.astype(x.dtype), v.astype(x.dtype, copy=False)
        e = np.linalg.eigvalsh(a, UPLO="L")
    except np.linalg.LinAlgError:
        raise _invalid(
            "Self-adjoint eigen decomposition was not successful. The input might not be valid."
        ) from None
    return e.astype(x.dtype), np.zeros([0], x.dtype)


@register_kernel("Svd", expensive=True)
def svd(ctx, x):
    """s descending, [..., min(M, N)]; u and v (not v^H) with thin or full columns."""
    if x.ndim < 2:
        raise _invalid(f"Input must have rank >= 2, got {x.ndim}")
    a = _lapack(x)
    full, compute_uv = ctx.attrs["full_matrices"], ctx.attrs["compute_uv"]
    m, n = x.shape[-2:]
    batch = x.shape[:-2]
    if a.size == 0:  # LAPACK refuses empty matrices: identity bases, no singular values
        p = min(m, n)
        s = np.zeros(batch + (p,), x.dtype)
        u_cols, v_cols = (m, n) if full else (p, p)
        u = np.broadcast_to(np.eye(m, u_cols, dtype=x.dtype), batch + (m, u_cols))
        v = np.broadcast_to(np.eye(n, v_cols, dtype=x.dtype), batch + (n, v_cols))
        if not compute_uv:
            return s, np.zeros([0], x.dtype), np.zeros([0], x.dtype)
        return s, u.copy(), v.copy()
    try:
        if not compute_uv:
            s = np.linalg.svd(a, compute_uv=False)
            return s.astype(x.dtype), np.zeros([0], x.dtype), np.zeros([0], x.dtype)
        u, s, vh = np.linalg.svd(a, full_matrices=full)
    except np.linalg.LinAlgError:
        raise _invalid("SVD did not converge. The input might not be valid.") from None
    return s.astype(x.dtype), u.astype(x.dtype, copy=False), _adjoint(vh).astype(x.dtype)


@register_kernel("MatrixSolveLs", expensive=True)
def matrix_solve_ls(ctx, matrix, rhs, l2_regularizer):
    """fast: the (regularized) normal equations by Cholesky, of the first kind when M >= N
    (X = (A^H A + l2 I)^-1 A^H B), of the second kind otherwise (X = A^H (A A^H + l2 I)^-1 B).
    Not fast: the minimum-norm least-squares solution of a possibly rank-deficient A, through
    the pseudo-inverse; l2_regularizer is then ignored, as in TF."""
    if np.ndim(l2_regularizer) != 0:
        raise _invalid(f"l2_regularizer must be scalar, got {_shape_str(np.shape(l2_regularizer))}")
    l2 = float(l2_regularizer)
    if l2 < 0:
        raise _invalid(f"l2_regularizer must be >= 0, got {l2}")
    _check_ls_shapes(matrix, rhs)
    m, n = matrix.shape[-2:]
    out_shape = matrix.shape[:-2] + (n, rhs.shape[-1])
    if matrix.size == 0 or rhs.size == 0:
        return np.zeros(out_shape, rhs.dtype)
    a, b = _lapack(matrix), _lapack(rhs)
    if not ctx.attrs["fast"]:
        rcond = np.finfo(a.dtype).eps * max(m, n)
        return np.matmul(np.linalg.pinv(a, rcond=rcond), b).astype(rhs.dtype)
    a_h = _adjoint(a)
    if m >= n:
        return _cholesky_solve(a_h @ a, a_h @ b, l2).astype(rhs.dtype)
    return (a_h @ _cholesky_solve(a @ a_h, b, l2)).astype(rhs.dtype)


def _check_ls_shapes(matrix, rhs) -> None:
    if matrix.ndim < 2 or rhs.ndim != matrix.ndim:
        raise _invalid(
            f"Input matrix and right-hand side must have the same rank >= 2, got "
            f"{_shape_str(matrix.shape)} and {_shape_str(rhs.shape)}"
        )
    if matrix.shape[:-2] != rhs.shape[:-2]:
        raise _invalid(
            f"All input tensors must have the same outer dimensions: "
            f"{_shape_str(matrix.shape)} vs. {_shape_str(rhs.shape)}"
        )
    if matrix.shape[-2] != rhs.shape[-2]:
        raise _invalid(
            f"Input matrix and right-hand side must have the same number of rows: "
            f"{matrix.shape[-2]} vs. {rhs.shape[-2]}"
        )


def _cholesky_solve(gramian, rhs, l2: float):
    """(gramian + l2 I)^-1 rhs through L L^H = gramian + l2 I, two triangular solves."""
    if l2 > 0:
        gramian = gramian + l2 * np.eye(gramian.shape[-1], dtype=gramian.dtype)
    try:
        chol = np.linalg.cholesky(gramian)
    except np.linalg.LinAlgError:
        raise _invalid(
            "Input matrix was rank deficient or ill-conditioned. Try setting fast=False or "
            "provide a larger l2_regularizer > 0."
        ) from None
    return np.linalg.solve(_adjoint(chol), np.linalg.solve(chol, rhs))

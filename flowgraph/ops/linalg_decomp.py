"""Decompositions, least squares and the cross product, with TF1's signatures: tf.svd,
tf.self_adjoint_eig(vals), tf.matrix_solve_ls, tf.cholesky_solve, tf.cross; `LINALG` gives
their tf.linalg names (svd, eigh, eigvalsh, lstsq, cholesky_solve, cross).
"""

from __future__ import annotations

from flowgraph.framework.apply_op import apply_op
from flowgraph.ops import math as math_ops
from flowgraph.ops.math import name_scope

__all__ = [
    "cholesky_solve",
    "cross",
    "matrix_solve_ls",
    "self_adjoint_eig",
    "self_adjoint_eigvals",
    "svd",
]


def cross(a, b, name=None):
    """The cross product of 3-vectors along the last axis of a and b (same shape [..., 3]).

    Example: tf.cross([1., 0., 0.], [0., 1., 0.])  # [0., 0., 1.]
    """
    return apply_op("Cross", [a, b], name=name).outputs[0]


def svd(tensor, full_matrices=False, compute_uv=True, name=None):
    """The singular value decomposition tensor = u @ diag(s) @ adjoint(v) of each inner
    matrix: s real, descending, [..., min(M, N)]; u [..., M, P], v [..., N, P] with P =
    min(M, N), or M and N with `full_matrices`. Returns s alone without `compute_uv`.

    Example: s, u, v = tf.svd(a)
    """
    op = apply_op("Svd", [tensor], name=name, compute_uv=compute_uv, full_matrices=full_matrices)
    s, u, v = op.outputs
    s = math_ops.real(s)
    return (s, u, v) if compute_uv else s


def self_adjoint_eig(tensor, name=None):
    """(e, v): the eigenvalues (ascending) and eigenvectors (columns) of each Hermitian inner
    matrix, from its lower triangle.

    Example: e, v = tf.linalg.eigh(a)  # a @ v == v * e[..., None, :]
    """
    e, v = apply_op("SelfAdjointEigV2", [tensor], name=name, compute_v=True).outputs
    return e, v


def self_adjoint_eigvals(tensor, name=None):
    """The eigenvalues (ascending) of each Hermitian inner matrix, without the vectors."""
    return apply_op("SelfAdjointEigV2", [tensor], name=name, compute_v=False).outputs[0]


def matrix_solve_ls(matrix, rhs, l2_regularizer=0.0, fast=True, name=None):
    """X minimizing ||matrix @ X - rhs||^2 + l2_regularizer ||X||^2 for each inner matrix
    ([..., M, N] and [..., M, K] -> [..., N, K]); for M < N the minimum-norm solution. `fast`
    solves the normal equations by Cholesky (A must have full rank); otherwise a complete
    orthogonal decomposition handles rank-deficient A and ignores l2_regularizer.

    Example: x = tf.linalg.lstsq(a, b, l2_regularizer=0.01)
    """
    return apply_op("MatrixSolveLs", [matrix, rhs, l2_regularizer], name=name, fast=fast).outputs[0]


def cholesky_solve(chol, rhs, name=None):
    """X with A @ X = rhs, given chol = tf.cholesky(A): two triangular solves.

    Example: x = tf.cholesky_solve(tf.cholesky(a), b)
    """
    with name_scope(name, "cholesky_solve", [chol, rhs]):
        y = apply_op("MatrixTriangularSolve", [chol, rhs], lower=True, adjoint=False).outputs[0]
        return apply_op("MatrixTriangularSolve", [chol, y], lower=True, adjoint=True).outputs[0]


LINALG = {  # tf.linalg.<key> -> function
    "cholesky_solve": cholesky_solve,
    "cross": cross,
    "eigh": self_adjoint_eig,
    "eigvalsh": self_adjoint_eigvals,
    "lstsq": matrix_solve_ls,
    "svd": svd,
}

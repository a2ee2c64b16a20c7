"""tf.linalg.expm: the matrix exponential by scaling and squaring with Pade approximants
(Higham, "The scaling and squaring method for the matrix exponential revisited", 2005), built
of graph ops as TensorFlow's linalg_impl.matrix_exponential is, so its gradient comes from
theirs (MatMul, MatrixSolve, SelectV2 and the squaring while_loop).

Each batch matrix takes the lowest Pade order accurate at its 1-norm (3, 5, 7 or, scaled by
2^-s, 7 in single precision; up to 13 in double), then is squared s times. Half precision is
computed in float32 (TF's half path overflows: the order-7 coefficients exceed 65504).
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes
from flowgraph.framework.convert import constant, convert_to_tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import control_flow, reduction
from flowgraph.ops import linalg as linalg_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops.math import name_scope

__all__ = ["expm"]

# Pade coefficients b_0..b_m of each order m (TF's _matrix_exp_padeM).
_PADE = {
    3: [120.0, 60.0, 12.0],
    5: [30240.0, 15120.0, 3360.0, 420.0, 30.0],
    7: [17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0],
    9: [17643225600.0, 8821612800.0, 2075673600.0, 302702400.0, 30270240.0, 2162160.0,
        110880.0, 3960.0, 90.0],
    13: [64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
         129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
         40840800.0, 960960.0, 16380.0, 182.0],
}  # fmt: skip
# (orders tried by increasing 1-norm, the norm bounds between them, the norm the last order
# takes after scaling), per precision.
_SINGLE = ([3, 5, 7], [4.258730016922831e-001, 1.880152677804762e000], 3.925724783138660)
_DOUBLE = (
    [3, 5, 7, 9, 13],
    [1.495585217958292e-002, 2.539398330063230e-001, 9.504178996162932e-001, 2.097847961257068e000],
    5.371920351148152,
)


def _pade(matrix, order: int, ident):
    """(U, V) of the order-`order` approximant: exp(A) ~ (V - U)^-1 (V + U)."""
    b = [constant(v, matrix.dtype) for v in _PADE[order]]
    a2 = linalg_ops.matmul(matrix, matrix)
    if order == 13:
        a4 = linalg_ops.matmul(a2, a2)
        a6 = linalg_ops.matmul(a4, a2)
        inner = linalg_ops.matmul(a6, a6 + b[11] * a4 + b[9] * a2)
        u = linalg_ops.matmul(matrix, inner + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * ident)
        v = linalg_ops.matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2)
        return u, v + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * ident
    powers = [ident, a2]  # A^0, A^2, A^4, ...
    while len(powers) <= order // 2:
        powers.append(linalg_ops.matmul(powers[-1], a2))
    k = order // 2
    u_sum, v_sum = powers[k], b[order - 1] * powers[k]
    for j in range(k):
        u_sum = u_sum + b[2 * j + 1] * powers[j]
        v_sum = v_sum + b[2 * j] * powers[j]
    return linalg_ops.matmul(matrix, u_sum), v_sum


def expm(input, name=None):
    """exp(A) = sum A^n / n! of each square matrix in [..., M, M] (float16/32/64, complex).

    Example: tf.linalg.expm([[0., 1.], [-1., 0.]])  # a rotation by one radian
    """
    with name_scope(name, "matrix_exponential", [input]):
        matrix = convert_to_tensor(input, name="input")
        dtype = matrix.dtype.base_dtype
        if dtype == dtypes.float16:  # the Pade coefficients overflow half: compute in float
            return math_ops.cast(expm(math_ops.cast(matrix, dtypes.float32)), dtypes.float16)
        if dtype in (dtypes.float32, dtypes.complex64):
            orders, bounds, max_norm = _SINGLE
        elif dtype in (dtypes.float64, dtypes.complex128):
            orders, bounds, max_norm = _DOUBLE
        else:
            raise ValueError(f"tf.linalg.expm does not support matrices of type {dtype.name}")
        if matrix.shape.ndims is not None and matrix.shape[-2:].as_list() == [0, 0]:
            return matrix
        static_batch = matrix.shape[:-2]
        batch = static_batch.as_list() if static_batch.is_fully_defined() else None
        dyn_shape = array_ops.shape(matrix)
        flat = array_ops.reshape(matrix, array_ops.concat([[-1], dyn_shape[-2:]], 0))
        real = dtype.real_dtype
        l1_norm = reduction.reduce_max(reduction.reduce_sum(math_ops.abs(flat), axis=-2), axis=-1)
        l1_norm = array_ops.reshape(l1_norm, [-1, 1, 1])
        n = array_ops.shape(flat)[-1]
        ident = linalg_ops.eye(n, batch_shape=array_ops.shape(flat)[:1], dtype=dtype)
        squarings = math_ops.maximum(
            math_ops.floor(math_ops.log(l1_norm / constant(max_norm, real)) / np.log(2.0)),
            constant(0.0, real),
        )
        scale = math_ops.cast(math_ops.pow(constant(2.0, real), squarings), dtype)
        pairs = [_pade(flat, m, ident) for m in orders[:-1]]
        pairs.append(_pade(flat / scale, orders[-1], ident))
        u, v = pairs[-1]
        for bound, (u_m, v_m) in reversed(list(zip(bounds, pairs[:-1]))):
            small = math_ops.less(l1_norm, constant(bound, real))
            u, v = math_ops.where_v2(small, u_m, u), math_ops.where_v2(small, v_m, v)
        finite = math_ops.is_finite(reduction.reduce_max(l1_norm))
        result = control_flow.cond(
            finite,
            lambda: linalg_ops.matrix_solve(v - u, u + v),
            lambda: array_ops.fill(array_ops.shape(flat), constant(np.nan, dtype)),
        )
        most = reduction.reduce_max(squarings)

        def body(i, r):
            return i + 1, math_ops.where_v2(math_ops.less(i, squarings), linalg_ops.matmul(r, r), r)

        _, result = control_flow.while_loop(
            lambda i, _: math_ops.logical_and(finite, math_ops.less(i, most)),
            body,
            [constant(0.0, real), result],
        )
        if batch is not None:
            return array_ops.reshape(result, batch + matrix.shape[-2:].as_list())
        return array_ops.reshape(result, dyn_shape)

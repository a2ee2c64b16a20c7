"""OpDefs of the decompositions and least squares of TensorFlow's linalg_ops.cc (Svd,
SelfAdjointEigV2, MatrixSolveLs) and of math_ops.cc's Cross, with TF's shape functions: a
decomposition without its vectors (compute_uv/compute_v false) gives [0]-shaped placeholders
for them, as TF does.
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
from flowgraph.opdefs.linalg import _LINALG_TYPES, _inner, _square


def _cross_shape(ctx) -> TensorShape:
    """a and b of one shape [..., 3]."""
    a, b = (s.with_rank_at_least(1) for s in ctx.input_shapes)
    shape = a.merge_with(b)
    if shape.ndims is not None and not shape[-1].is_compatible_with(3):
        raise ValueError(f"Dimension must be 3 but is {shape[-1]}")
    return shape


register_op(
    OpDef(
        "Cross",
        inputs=["a: T", "b: T"],
        outputs=["product: T"],
        attrs=["T: realnumbertypes"],
        shape_fn=_cross_shape,
    )
)


def _batch_and_dims(shape: TensorShape):
    """(batch shape, m, n) of a [..., m, n] shape; (unknown, None, None) at unknown rank."""
    shape = shape.with_rank_at_least(2)
    if shape.ndims is None:
        return unknown_shape(), None, None
    return shape[:-2], shape[-2].value, shape[-1].value


def _self_adjoint_eig_shape(ctx):
    """e: [..., n]; v: [..., n, n], or [0] without compute_v."""
    batch, n, _ = _batch_and_dims(_square(ctx.input_shapes[0]))
    v = batch.concatenate([n, n]) if ctx.attrs["compute_v"] else TensorShape([0])
    return [batch.concatenate([n]), v]


def _svd_shape(ctx):
    """s: [..., p] with p = min(m, n); u: [..., m, p or m], v: [..., n, p or n] (full_matrices),
    both [0] without compute_uv."""
    batch, m, n = _batch_and_dims(ctx.input_shapes[0])
    p = None if m is None or n is None else min(m, n)
    if not ctx.attrs["compute_uv"]:
        return [batch.concatenate([p]), TensorShape([0]), TensorShape([0])]
    full = ctx.attrs["full_matrices"]
    u = batch.concatenate([m, m if full else p])
    v = batch.concatenate([n, n if full else p])
    return [batch.concatenate([p]), u, v]


def _solve_ls_shape(ctx) -> TensorShape:
    """matrix [..., m, n], rhs [..., m, k] -> [..., n, k]; l2_regularizer a scalar."""
    ctx.input_shapes[2].with_rank(0)
    matrix = ctx.input_shapes[0].with_rank_at_least(2)
    rhs = ctx.input_shapes[1].with_rank_at_least(2)
    if matrix.ndims is None or rhs.ndims is None:
        return unknown_shape()
    if matrix.ndims != rhs.ndims:
        raise ValueError(f"Shapes must be equal rank, but are {matrix.ndims} and {rhs.ndims}")
    _inner(matrix[-2], rhs[-2])
    batch = matrix[:-2].merge_with(rhs[:-2])
    return batch.concatenate([matrix[-1].value, rhs[-1].value])


register_op(
    OpDef(
        "SelfAdjointEigV2",
        inputs=["input: T"],
        outputs=["e: T", "v: T"],
        attrs=["compute_v: bool = true", f"T: {_LINALG_TYPES}"],
        shape_fn=_self_adjoint_eig_shape,
    )
)
register_op(
    OpDef(
        "Svd",
        inputs=["input: T"],
        outputs=["s: T", "u: T", "v: T"],
        attrs=["compute_uv: bool = true", "full_matrices: bool = false", f"T: {_LINALG_TYPES}"],
        shape_fn=_svd_shape,
    )
)
register_op(
    OpDef(
        "MatrixSolveLs",
        inputs=["matrix: T", "rhs: T", "l2_regularizer: double"],
        outputs=["output: T"],
        attrs=[f"T: {_LINALG_TYPES}", "fast: bool = true"],
        shape_fn=_solve_ls_shape,
    )
)

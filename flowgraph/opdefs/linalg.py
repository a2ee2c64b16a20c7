"""OpDefs of the matrix row of Table 1 (TensorFlow's math_ops.cc MatMul/BatchMatMul and
linalg_ops.cc): products, inverses, decompositions, solves, and diagonal/band helpers.

Batched ops take `[..., M, N]` tensors; the leading dims are the batch. Shape functions check
squareness and inner dimensions statically when the dims are known, like TF's.
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import Dimension, TensorShape, broadcast_shape, unknown_shape

_MATMUL_TYPES = "{half, bfloat16, float, double, int32, int64, complex64, complex128}"
_LINALG_TYPES = "{half, float, double, complex64, complex128}"
_DIAG_TYPES = (
    "{half, float, double, int8, int16, int32, int64, uint8, uint16, complex64, complex128, bool}"
)


def _inner(k1: Dimension, k2: Dimension):
    if not k1.is_compatible_with(k2):
        raise ValueError(f"Dimensions must be equal, but are {k1} and {k2}")


def _matmul_shape(ctx) -> TensorShape:
    a, b = (s.with_rank(2) for s in ctx.input_shapes)
    ta, tb = ctx.attrs["transpose_a"], ctx.attrs["transpose_b"]
    m, k = (a[1], a[0]) if ta else (a[0], a[1])
    k2, n = (b[1], b[0]) if tb else (b[0], b[1])
    _inner(k, k2)
    return TensorShape([m.value, n.value])


def _batch_matmul_shape(ctx, broadcast_batch: bool) -> TensorShape:
    """[..., m, k] x [..., k, n] -> [..., m, n]; V2 broadcasts the batch dims, V1 merges them."""
    a, b = (s.with_rank_at_least(2) for s in ctx.input_shapes)
    if a.ndims is None or b.ndims is None:
        return unknown_shape()
    adj_x, adj_y = ctx.attrs["adj_x"], ctx.attrs["adj_y"]
    m, k = (a[-1], a[-2]) if adj_x else (a[-2], a[-1])
    k2, n = (b[-1], b[-2]) if adj_y else (b[-2], b[-1])
    _inner(k, k2)
    if broadcast_batch:
        batch = broadcast_shape(a[:-2], b[:-2])
    else:
        if a.ndims != b.ndims:
            raise ValueError(f"Shapes must be equal rank, but are {a.ndims} and {b.ndims}")
        batch = a[:-2].merge_with(b[:-2])
    return batch.concatenate([m.value, n.value])


register_op(
    OpDef(
        "MatMul",
        inputs=["a: T", "b: T"],
        outputs=["product: T"],
        attrs=["transpose_a: bool = false", "transpose_b: bool = false", f"T: {_MATMUL_TYPES}"],
        shape_fn=_matmul_shape,
    )
)
for _op, _bcast in (("BatchMatMul", False), ("BatchMatMulV2", True)):
    register_op(
        OpDef(
            _op,
            inputs=["x: T", "y: T"],
            outputs=["output: T"],
            attrs=[f"T: {_MATMUL_TYPES}", "adj_x: bool = false", "adj_y: bool = false"],
            shape_fn=lambda ctx, _b=_bcast: _batch_matmul_shape(ctx, _b),
        )
    )


def _square(shape: TensorShape) -> TensorShape:
    """`shape` as [..., n, n]; a definite non-square raises ValueError."""
    shape = shape.with_rank_at_least(2)
    if shape.ndims is not None:
        if not shape[-1].is_compatible_with(shape[-2]):
            raise ValueError(f"Dimensions must be equal, but are {shape[-2]} and {shape[-1]}")
        n = shape[-1].merge_with(shape[-2]).value
        return shape[:-2].concatenate([n, n])
    return shape


def _square_unchanged(ctx) -> TensorShape:
    return _square(ctx.input_shapes[0])


def _determinant_shape(ctx) -> TensorShape:
    shape = _square(ctx.input_shapes[0])
    return unknown_shape() if shape.ndims is None else shape[:-2]


def _solve_shape(ctx) -> TensorShape:
    """matrix [..., n, n], rhs [..., n, k] -> [..., n, k]; batch dims must agree."""
    matrix = _square(ctx.input_shapes[0])
    rhs = ctx.input_shapes[1].with_rank_at_least(2)
    if matrix.ndims is None or rhs.ndims is None:
        return rhs if rhs.ndims is not None else unknown_shape()
    if matrix.ndims != rhs.ndims:
        raise ValueError(f"Shapes must be equal rank, but are {matrix.ndims} and {rhs.ndims}")
    _inner(matrix[-1], rhs[-2])
    batch = matrix[:-2].merge_with(rhs[:-2])
    return batch.concatenate([matrix[-1].merge_with(rhs[-2]).value, rhs[-1].value])


register_op(
    OpDef(
        "MatrixInverse",
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=["adjoint: bool = false", f"T: {_LINALG_TYPES}"],
        shape_fn=_square_unchanged,
    )
)
register_op(
    OpDef(
        "Cholesky",
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=[f"T: {_LINALG_TYPES}"],
        shape_fn=_square_unchanged,
    )
)
register_op(
    OpDef(
        "MatrixDeterminant",
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=[f"T: {_LINALG_TYPES}"],
        shape_fn=_determinant_shape,
    )
)
register_op(
    OpDef(
        "LogMatrixDeterminant",
        inputs=["input: T"],
        outputs=["sign: T", "log_abs_determinant: T"],
        attrs=[f"T: {_LINALG_TYPES}"],
        shape_fn=lambda ctx: [_determinant_shape(ctx)] * 2,
    )
)
register_op(
    OpDef(
        "MatrixSolve",
        inputs=["matrix: T", "rhs: T"],
        outputs=["output: T"],
        attrs=["adjoint: bool = false", f"T: {_LINALG_TYPES}"],
        shape_fn=_solve_shape,
    )
)
register_op(
    OpDef(
        "MatrixTriangularSolve",
        inputs=["matrix: T", "rhs: T"],
        outputs=["output: T"],
        attrs=["lower: bool = true", "adjoint: bool = false", f"T: {_LINALG_TYPES}"],
        shape_fn=_solve_shape,
    )
)


# -- diagonals and bands ----------------------------------------------------------------------
def _diag_shape(ctx) -> TensorShape:
    """Diag: a rank-k diagonal gives a rank-2k tensor of shape diagonal.shape + diagonal.shape."""
    shape = ctx.input_shapes[0]
    if shape.ndims is None:
        return unknown_shape()
    if shape.ndims == 0:
        raise ValueError("Shape must be at least rank 1 but is rank 0")
    return shape.concatenate(shape)


def _diag_part_shape(ctx) -> TensorShape:
    """DiagPart: a rank-2k input of shape s + s gives shape s."""
    shape = ctx.input_shapes[0]
    if shape.ndims is None:
        return unknown_shape()
    if shape.ndims == 0 or shape.ndims % 2:
        raise ValueError(f"Input must have even and non-zero rank, input rank is {shape.ndims}")
    k = shape.ndims // 2
    return shape[:k].merge_with(shape[k:])


def _matrix_diag_shape(ctx) -> TensorShape:
    shape = ctx.input_shapes[0].with_rank_at_least(1)
    if shape.ndims is None:
        return unknown_shape()
    return shape.concatenate([shape[-1].value])


def _matrix_diag_part_shape(ctx) -> TensorShape:
    shape = ctx.input_shapes[0].with_rank_at_least(2)
    if shape.ndims is None:
        return unknown_shape()
    m, n = shape[-2].value, shape[-1].value
    k = None if m is None or n is None else min(m, n)
    return shape[:-2].concatenate([k])


def _matrix_set_diag_shape(ctx) -> TensorShape:
    shape = ctx.input_shapes[0].with_rank_at_least(2)
    diag = ctx.input_shapes[1].with_rank_at_least(1)
    if shape.ndims is not None and diag.ndims is not None:
        if diag.ndims != shape.ndims - 1:
            raise ValueError(f"Shape must be rank {shape.ndims - 1} but is rank {diag.ndims}")
        want = _matrix_diag_part_shape(ctx)
        if not want.is_compatible_with(diag):
            raise ValueError(f"Shapes {want} and {diag} are not compatible")
    return shape


def _band_part_shape(ctx) -> TensorShape:
    for i in (1, 2):
        if ctx.input_shapes[i].ndims not in (None, 0):
            raise ValueError(f"Shape must be rank 0 but is rank {ctx.input_shapes[i].ndims}")
    return ctx.input_shapes[0].with_rank_at_least(2)


register_op(
    OpDef(
        "Diag",
        inputs=["diagonal: T"],
        outputs=["output: T"],
        attrs=[f"T: {_DIAG_TYPES}"],
        shape_fn=_diag_shape,
    )
)
register_op(
    OpDef(
        "DiagPart",
        inputs=["input: T"],
        outputs=["diagonal: T"],
        attrs=[f"T: {_DIAG_TYPES}"],
        shape_fn=_diag_part_shape,
    )
)
register_op(
    OpDef(
        "MatrixDiag",
        inputs=["diagonal: T"],
        outputs=["output: T"],
        attrs=["T: type"],
        shape_fn=_matrix_diag_shape,
    )
)
register_op(
    OpDef(
        "MatrixDiagPart",
        inputs=["input: T"],
        outputs=["diagonal: T"],
        attrs=["T: type"],
        shape_fn=_matrix_diag_part_shape,
    )
)
register_op(
    OpDef(
        "MatrixSetDiag",
        inputs=["input: T", "diagonal: T"],
        outputs=["output: T"],
        attrs=["T: type"],
        shape_fn=_matrix_set_diag_shape,
    )
)
register_op(
    OpDef(
        "MatrixBandPart",
        inputs=["input: T", "num_lower: Tindex", "num_upper: Tindex"],
        outputs=["band: T"],
        attrs=["T: type", "Tindex: {int32, int64} = DT_INT64"],
        shape_fn=_band_part_shape,
    )
)


def _qr_shape(ctx):
    s = ctx.input_shapes[0].with_rank_at_least(2)
    if s.ndims is None:
        return [s, s]
    batch, m, n = s[:-2], s[-2].value, s[-1].value
    k = None if m is None or n is None else min(m, n)
    if ctx.attrs["full_matrices"]:
        return [batch.concatenate([m, m]), batch.concatenate([m, n])]
    return [batch.concatenate([m, k]), batch.concatenate([k, n])]


register_op(
    OpDef(
        "Qr",
        inputs=["input: T"],
        outputs=["q: T", "r: T"],
        attrs=["full_matrices: bool = false", "T: {half, float, double, complex64, complex128}"],
        shape_fn=_qr_shape,
    )
)

"""OpDefs of the set ops (TensorFlow's set_ops.cc): sets are the values along the last
dimension of a dense tensor, or the values of one row (all indices but the last) of a sparse
tensor; results are sparse, each row's elements sorted.
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape

_T = "T: {int8, int16, int32, int64, uint8, uint16, string}"
_OPERATION = ["set_operation: string", "validate_indices: bool = true", _T]
_SPARSE = ["indices: int64", "values: T", "shape: int64"]
_RESULT = ["result_indices: int64", "result_values: T", "result_shape: int64"]


def _result(rank):
    return [TensorShape([None, rank]), TensorShape([None]), TensorShape([rank])]


def _dense_dense_shape(ctx):
    a = ctx.input_shapes[0].with_rank_at_least(2)
    b = ctx.input_shapes[1].with_rank_at_least(2)
    if a.ndims is None or b.ndims is None:
        return _result(a.ndims if b.ndims is None else b.ndims)
    if a.ndims != b.ndims:
        raise ValueError(f"Shape must be rank {a.ndims} but is rank {b.ndims}")
    a[:-1].merge_with(b[:-1])
    return _result(a.ndims)


def _dense_sparse_shape(ctx):
    a = ctx.input_shapes[0].with_rank_at_least(2)
    ctx.input_shapes[1].with_rank(2)
    ctx.input_shapes[2].with_rank(1)
    ctx.input_shapes[3].with_rank(1)
    return _result(a.ndims)


def _sparse_sparse_shape(ctx):
    for i in range(6):
        ctx.input_shapes[i].with_rank(2 if i % 3 == 0 else 1)
    return _result(ctx.input_shapes[2][0].merge_with(ctx.input_shapes[5][0]).value)


def _prefixed(prefix, args):
    return [f"{prefix}_{a}" for a in args]


register_op(
    OpDef(
        "SetSize",
        inputs=_prefixed("set", _SPARSE),
        outputs=["size: int32"],
        attrs=["validate_indices: bool = true", _T],
        shape_fn=lambda ctx: unknown_shape(),
    )
)
register_op(
    OpDef(
        "DenseToDenseSetOperation",
        inputs=["set1: T", "set2: T"],
        outputs=_RESULT,
        attrs=_OPERATION,
        shape_fn=_dense_dense_shape,
    )
)
register_op(
    OpDef(
        "DenseToSparseSetOperation",
        inputs=["set1: T", *_prefixed("set2", _SPARSE)],
        outputs=_RESULT,
        attrs=_OPERATION,
        shape_fn=_dense_sparse_shape,
    )
)
register_op(
    OpDef(
        "SparseToSparseSetOperation",
        inputs=[*_prefixed("set1", _SPARSE), *_prefixed("set2", _SPARSE)],
        outputs=_RESULT,
        attrs=_OPERATION,
        shape_fn=_sparse_sparse_shape,
    )
)

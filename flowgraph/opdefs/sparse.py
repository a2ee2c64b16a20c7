"""OpDefs of the sparse ops (TensorFlow's sparse_ops.cc): ops over SparseTensors passed as their
three components, indices (int64 [N, rank]), values ([N]) and dense_shape (int64 [rank]).

Names, inputs and attrs are TF 1.15's, so GraphDefs that contain them import and run.
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape

_INDEX = "{int32, int64}"


def _entries(ctx, i: int):
    """The entry count N of a sparse input whose indices are input i ([N, rank])."""
    return ctx.input_shapes[i].with_rank(2)[0].value


def _rank(ctx, i: int):
    """The rank of a sparse input whose dense_shape is input i ([rank])."""
    return ctx.input_shapes[i].with_rank(1)[0].value


def _sparse_out(n, rank):
    """Shapes of (indices, values, dense_shape) of a sparse output."""
    return [TensorShape([n, rank]), TensorShape([n]), TensorShape([rank])]


def _sparse_to_dense_shape(ctx):
    return ctx.input_as_shape(1)


register_op(
    OpDef(
        "SparseToDense",
        inputs=[
            "sparse_indices: Tindices",
            "output_shape: Tindices",
            "sparse_values: T",
            "default_value: T",
        ],
        outputs=["dense: T"],
        attrs=["validate_indices: bool = true", "T: type", f"Tindices: {_INDEX}"],
        shape_fn=_sparse_to_dense_shape,
    )
)


def _matmul_shape(ctx):
    a_shape = ctx.input_as_shape(2)
    b = ctx.input_shapes[3].with_rank(2)
    if a_shape.ndims is not None and a_shape.ndims != 2:
        raise ValueError(f"Shape must be rank 2 but is rank {a_shape.ndims}")
    rows = a_shape[1 if ctx.attrs["adjoint_a"] else 0].value if a_shape.ndims else None
    cols = b[0 if ctx.attrs["adjoint_b"] else 1].value
    return TensorShape([rows, cols])


register_op(
    OpDef(
        "SparseTensorDenseMatMul",
        inputs=["a_indices: Tindices", "a_values: T", "a_shape: int64", "b: T"],
        outputs=["product: T"],
        attrs=[
            "T: type",
            "Tindices: {int32, int64} = DT_INT64",
            "adjoint_a: bool = false",
            "adjoint_b: bool = false",
        ],
        shape_fn=_matmul_shape,
    )
)

register_op(
    OpDef(
        "SparseTensorDenseAdd",
        inputs=["a_indices: Tindices", "a_values: T", "a_shape: Tindices", "b: T"],
        outputs=["output: T"],
        attrs=["T: numbertypes", f"Tindices: {_INDEX}"],
        shape_fn=lambda ctx: ctx.input_shapes[3],
    )
)


def _reduce_shape(ctx):
    shape = ctx.input_as_shape(2)
    axes = ctx.input_constant(3)
    if shape.ndims is None or axes is None or not shape.is_fully_defined():
        return unknown_shape()
    dims = shape.as_list()
    axes = {int(a) % len(dims) for a in axes.reshape(-1)} if dims else set()
    if ctx.attrs["keep_dims"]:
        return TensorShape([1 if i in axes else d for i, d in enumerate(dims)])
    return TensorShape([d for i, d in enumerate(dims) if i not in axes])


for _op in ("SparseReduceSum", "SparseReduceMax"):
    register_op(
        OpDef(
            _op,
            inputs=[
                "input_indices: int64",
                "input_values: T",
                "input_shape: int64",
                "reduction_axes: int32",
            ],
            outputs=["output: T"],
            attrs=[
                "keep_dims: bool = false",
                "T: numbertypes" if _op.endswith("Sum") else "T: realnumbertypes",
            ],
            shape_fn=_reduce_shape,
        )
    )


def _concat_shape(ctx):
    n = ctx.attrs["N"]
    ranks = {_rank(ctx, 2 * n + i) for i in range(n)} - {None}
    rank = ranks.pop() if len(ranks) == 1 else None
    rows = [_entries(ctx, i) for i in range(n)]
    total = None if None in rows else sum(rows)
    return _sparse_out(total, rank)


register_op(
    OpDef(
        "SparseConcat",
        inputs=["indices: N * int64", "values: N * T", "shapes: N * int64"],
        outputs=["output_indices: int64", "output_values: T", "output_shape: int64"],
        attrs=["concat_dim: int", "N: int >= 2", "T: type"],
        shape_fn=_concat_shape,
    )
)

register_op(
    OpDef(
        "SparseSoftmax",
        inputs=["sp_indices: int64", "sp_values: T", "sp_shape: int64"],
        outputs=["output: T"],
        attrs=["T: {half, float, double}"],
        shape_fn=lambda ctx: ctx.input_shapes[1].with_rank(1),
    )
)


def _add_shape(ctx):
    return _sparse_out(None, _rank(ctx, 2) or _rank(ctx, 5))


register_op(
    OpDef(
        "SparseAdd",
        inputs=[
            "a_indices: int64",
            "a_values: T",
            "a_shape: int64",
            "b_indices: int64",
            "b_values: T",
            "b_shape: int64",
            "thresh: Treal",
        ],
        outputs=["sum_indices: int64", "sum_values: T", "sum_shape: int64"],
        attrs=["T: numbertypes", "Treal: realnumbertypes"],
        shape_fn=_add_shape,
    )
)
register_op(
    OpDef(
        "SparseAddGrad",
        inputs=[
            "backprop_val_grad: T",
            "a_indices: int64",
            "b_indices: int64",
            "sum_indices: int64",
        ],
        outputs=["a_val_grad: T", "b_val_grad: T"],
        attrs=["T: numbertypes"],
        shape_fn=lambda ctx: [TensorShape([_entries(ctx, 1)]), TensorShape([_entries(ctx, 2)])],
    )
)


def _reshape_shape(ctx):
    rank = ctx.input_shapes[2].with_rank(1)[0].value
    return [TensorShape([_entries(ctx, 0), rank]), TensorShape([rank])]


register_op(
    OpDef(
        "SparseReshape",
        inputs=["input_indices: int64", "input_shape: int64", "new_shape: int64"],
        outputs=["output_indices: int64", "output_shape: int64"],
        shape_fn=_reshape_shape,
    )
)

register_op(
    OpDef(
        "SparseReorder",
        inputs=["input_indices: int64", "input_values: T", "input_shape: int64"],
        outputs=["output_indices: int64", "output_values: T"],
        attrs=["T: type"],
        shape_fn=lambda ctx: ctx.input_shapes[:2],
    )
)


def _fill_empty_rows_shape(ctx):
    rank = _rank(ctx, 2)
    return [
        TensorShape([None, rank]),
        TensorShape([None]),
        TensorShape([None]),
        TensorShape([_entries(ctx, 0)]),
    ]


register_op(
    OpDef(
        "SparseFillEmptyRows",
        inputs=["indices: int64", "values: T", "dense_shape: int64", "default_value: T"],
        outputs=[
            "output_indices: int64",
            "output_values: T",
            "empty_row_indicator: bool",
            "reverse_index_map: int64",
        ],
        attrs=["T: type"],
        shape_fn=_fill_empty_rows_shape,
    )
)
register_op(
    OpDef(
        "SparseFillEmptyRowsGrad",
        inputs=["reverse_index_map: int64", "grad_values: T"],
        outputs=["d_values: T", "d_default_value: T"],
        attrs=["T: type"],
        shape_fn=lambda ctx: [ctx.input_shapes[0], TensorShape([])],
    )
)


def _split_shape(ctx):
    n = ctx.attrs["num_split"]
    rank = _rank(ctx, 3)
    return [TensorShape([None, rank])] * n + [TensorShape([None])] * n + [TensorShape([rank])] * n


register_op(
    OpDef(
        "SparseSplit",
        inputs=["split_dim: int64", "indices: int64", "values: T", "shape: int64"],
        outputs=[
            "output_indices: num_split * int64",
            "output_values: num_split * T",
            "output_shape: num_split * int64",
        ],
        attrs=["num_split: int >= 1", "T: type"],
        shape_fn=_split_shape,
    )
)

# Element-wise ops of a SparseTensor and a dense tensor broadcast to its shape; the result has
# the sparse operand's entries (TF's sparse_dense_cwise_*).
for _op in ("SparseDenseCwiseMul", "SparseDenseCwiseDiv", "SparseDenseCwiseAdd"):
    register_op(
        OpDef(
            _op,
            inputs=["sp_indices: int64", "sp_values: T", "sp_shape: int64", "dense: T"],
            outputs=["output: T"],
            attrs=["T: numbertypes"],
            shape_fn=lambda ctx: TensorShape([_entries(ctx, 0)]),
        )
    )

register_op(
    OpDef(
        "SparseSlice",
        inputs=["indices: int64", "values: T", "shape: int64", "start: int64", "size: int64"],
        outputs=["output_indices: int64", "output_values: T", "output_shape: int64"],
        attrs=["T: type"],
        shape_fn=lambda ctx: _sparse_out(None, _rank(ctx, 2)),
    )
)
register_op(
    OpDef(
        "SparseSliceGrad",
        inputs=[
            "backprop_val_grad: T",
            "input_indices: int64",
            "input_start: int64",
            "output_indices: int64",
        ],
        outputs=["val_grad: T"],
        attrs=["T: numbertypes"],
        shape_fn=lambda ctx: TensorShape([_entries(ctx, 1)]),
    )
)
for _op in ("SparseSparseMaximum", "SparseSparseMinimum"):
    register_op(
        OpDef(
            _op,
            inputs=[
                "a_indices: int64",
                "a_values: T",
                "a_shape: int64",
                "b_indices: int64",
                "b_values: T",
                "b_shape: int64",
            ],
            outputs=["output_indices: int64", "output_values: T"],
            attrs=["T: realnumbertypes"],
            shape_fn=lambda ctx: _sparse_out(None, _rank(ctx, 2))[:2],
        )
    )
for _op in ("SparseReduceSumSparse", "SparseReduceMaxSparse"):
    register_op(
        OpDef(
            _op,
            inputs=[
                "input_indices: int64",
                "input_values: T",
                "input_shape: int64",
                "reduction_axes: int32",
            ],
            outputs=["output_indices: int64", "output_values: T", "output_shape: int64"],
            attrs=[
                "keep_dims: bool = false",
                "T: numbertypes" if "Sum" in _op else "T: realnumbertypes",
            ],
            shape_fn=lambda ctx: _sparse_out(None, None),
        )
    )

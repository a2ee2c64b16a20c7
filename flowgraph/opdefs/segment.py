"""OpDefs of the segment reductions, DynamicPartition, Bincount, HistogramFixedWidth and Einsum
(TensorFlow's math_ops.cc and data_flow_ops.cc), with TF's names, inputs and attrs.

Segment reductions reduce the rows of `data` that share a segment id: the sorted ones
(Segment*) take ids in increasing order and make `last id + 1` rows; the unsorted ones
(UnsortedSegment*) take any order and `num_segments` rows; the sparse ones
(SparseSegment*) first gather `data[indices]`. UnsortedSegmentSum is in grad_support.py.
"""

from __future__ import annotations

import re

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
from flowgraph.opdefs.grad_support import _unsorted_segment_sum_shape

_INDEX = "{int32, int64}"


def _segment_shape(ctx):
    data, ids = ctx.input_shapes[:2]
    ids.with_rank(1)
    if data.ndims is None:
        return unknown_shape()
    data.with_rank_at_least(1)[0].merge_with(ids[0])
    return TensorShape([None]).concatenate(data[1:])


for _op, _types in (
    ("SegmentSum", "numbertypes"),
    ("SegmentMean", "numbertypes"),
    ("SegmentProd", "numbertypes"),
    ("SegmentMax", "realnumbertypes"),
    ("SegmentMin", "realnumbertypes"),
):
    register_op(
        OpDef(
            _op,
            inputs=["data: T", "segment_ids: Tindices"],
            outputs=["output: T"],
            attrs=[f"T: {_types}", f"Tindices: {_INDEX}"],
            shape_fn=_segment_shape,
        )
    )

for _op, _types in (
    ("UnsortedSegmentProd", "numbertypes"),
    ("UnsortedSegmentMax", "realnumbertypes"),
    ("UnsortedSegmentMin", "realnumbertypes"),
):
    register_op(
        OpDef(
            _op,
            inputs=["data: T", "segment_ids: Tindices", "num_segments: Tnumsegments"],
            outputs=["output: T"],
            attrs=[
                f"T: {_types}",
                f"Tindices: {_INDEX}",
                "Tnumsegments: {int32, int64} = DT_INT32",
            ],
            shape_fn=_unsorted_segment_sum_shape,
        )
    )


def _sparse_segment_shape(ctx):
    data, indices, ids = ctx.input_shapes[:3]
    indices.with_rank(1).merge_with(ids.with_rank(1))
    if data.ndims is None:
        return unknown_shape()
    rows = ctx.input_constant(3) if len(ctx.input_shapes) == 4 else None
    return TensorShape([None if rows is None else int(rows)]).concatenate(data[1:])


# sparse_gradient (TF 2.x) only chooses how TF represents the gradient; the value is the same.
_SPARSE_ATTRS = [
    "T: {half, float, double}",
    f"Tidx: {_INDEX} = DT_INT32",
    f"Tsegmentids: {_INDEX} = DT_INT32",
    "sparse_gradient: bool = false",
]
for _kind in ("Sum", "Mean", "SqrtN"):
    _types = "realnumbertypes" if _kind == "Sum" else "{half, float, double}"
    _attrs = [f"T: {_types}"] + _SPARSE_ATTRS[1:]
    register_op(
        OpDef(
            f"SparseSegment{_kind}",
            inputs=["data: T", "indices: Tidx", "segment_ids: Tsegmentids"],
            outputs=["output: T"],
            attrs=_attrs,
            shape_fn=_sparse_segment_shape,
        )
    )
    register_op(
        OpDef(
            f"SparseSegment{_kind}WithNumSegments",
            inputs=[
                "data: T",
                "indices: Tidx",
                "segment_ids: Tsegmentids",
                "num_segments: Tnumsegments",
            ],
            outputs=["output: T"],
            attrs=_attrs + ["Tnumsegments: {int32, int64} = DT_INT32"],
            shape_fn=_sparse_segment_shape,
        )
    )


def _dynamic_partition_shape(ctx):
    data, parts = ctx.input_shapes
    n = ctx.attrs["num_partitions"]
    if data.ndims is None or parts.ndims is None:
        return [unknown_shape()] * n
    data[: parts.ndims].merge_with(parts)
    return [TensorShape([None]).concatenate(data[parts.ndims :])] * n


register_op(
    OpDef(
        "DynamicPartition",
        inputs=["data: T", "partitions: int32"],
        outputs=["outputs: num_partitions * T"],
        attrs=["num_partitions: int >= 1", "T: type"],
        shape_fn=_dynamic_partition_shape,
    )
)


def _bincount_shape(ctx):
    size = ctx.input_constant(1)
    return TensorShape([None if size is None else int(size)])


register_op(
    OpDef(
        "Bincount",
        inputs=["arr: int32", "size: int32", "weights: T"],
        outputs=["bins: T"],
        attrs=["T: {int32, int64, float, double}"],
        shape_fn=_bincount_shape,
    )
)


def _histogram_shape(ctx):
    ctx.input_shapes[1].with_rank(1)
    n = ctx.input_constant(2)
    return TensorShape([None if n is None else int(n)])


register_op(
    OpDef(
        "HistogramFixedWidth",
        inputs=["values: T", "value_range: T", "nbins: int32"],
        outputs=["out: dtype"],
        attrs=["T: {int32, int64, float, double}", "dtype: {int32, int64} = DT_INT32"],
        shape_fn=_histogram_shape,
    )
)


def parse_equation(equation: str, ranks: list) -> tuple[list[str], str]:
    """Input and output subscripts of an einsum `equation`, an ellipsis expanded to capital
    letters for the given input ranks (None if unknown). The output defaults to NumPy's
    implicit form: the letters that appear once, sorted."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(ranks):
        raise ValueError(f"Einsum equation {equation!r} has {len(inputs)} inputs, got {len(ranks)}")
    for s in inputs + [rhs]:
        if not re.fullmatch(r"[a-z]*(\.\.\.)?[a-z]*", s, flags=re.IGNORECASE):
            raise ValueError(f"Invalid einsum subscripts {s!r} in {equation!r}")
    widest = 0
    for s, r in zip(inputs, ranks):
        if "..." in s:
            if r is None:
                raise ValueError(f"Einsum with '...' needs inputs of known rank: {equation!r}")
            widest = max(widest, r - (len(s) - 3))
    ell = "".join(chr(ord("A") + i) for i in range(widest))
    expanded = []
    for s, r in zip(inputs, ranks):
        if "..." in s:
            n = r - (len(s) - 3)
            s = s.replace("...", ell[widest - n :])
        expanded.append(s)
    if not arrow:
        counts = {c: "".join(expanded).count(c) for c in set("".join(expanded))}
        rhs = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c.islower()))
    else:
        rhs = rhs.replace("...", ell)
    return expanded, rhs


def _einsum_shape(ctx):
    shapes = ctx.input_shapes
    ranks = [s.ndims for s in shapes]
    if "..." in ctx.attrs["equation"] and None in ranks:
        return unknown_shape()
    inputs, out = parse_equation(ctx.attrs["equation"], ranks)
    sizes = {}
    for subs, s in zip(inputs, shapes):
        if s.ndims is None:
            continue
        if len(subs) != s.ndims:
            raise ValueError(f"Einsum subscripts {subs!r} do not match an input of rank {s.ndims}")
        for c, d in zip(subs, s.as_list()):
            if d is not None and sizes.get(c) not in (None, 1) and d not in (1, sizes[c]):
                raise ValueError(f"Einsum dimension {c!r} has sizes {sizes[c]} and {d}")
            if d is not None and (sizes.get(c) in (None, 1)):
                sizes[c] = d
    return TensorShape([sizes.get(c) for c in out])


register_op(
    OpDef(
        "Einsum",
        inputs=["inputs: N * T"],
        outputs=["output: T"],
        attrs=["equation: string", "N: int >= 1", "T: type"],
        shape_fn=_einsum_shape,
    )
)


def _dense_bincount_shape(ctx):
    size = ctx.input_constant(1)
    rows = ctx.input_shapes[0]
    bins = None if size is None else int(size)
    if rows.ndims == 2:
        return TensorShape([rows[0].value, bins])
    return TensorShape([bins])


# TF 2's Bincount (what its compat.v1 tf.math.bincount builds): per row for a rank-2 input.
register_op(
    OpDef(
        "DenseBincount",
        inputs=["input: Tidx", "size: Tidx", "weights: T"],
        outputs=["output: T"],
        attrs=[
            "Tidx: {int32, int64}",
            "T: {int32, int64, float, double}",
            "binary_output: bool = false",
        ],
        shape_fn=_dense_bincount_shape,
    )
)

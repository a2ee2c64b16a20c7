"""Segment reductions (tf.segment_*, tf.unsorted_segment_*, tf.sparse_segment_*),
tf.dynamic_partition, tf.bincount, tf.histogram_fixed_width(_bins) and tf.einsum."""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.scopes import name_scope

__all__ = [
    "bincount",
    "dynamic_partition",
    "einsum",
    "histogram_fixed_width",
    "histogram_fixed_width_bins",
    "segment_max",
    "segment_mean",
    "segment_min",
    "segment_prod",
    "segment_sum",
    "sparse_segment_mean",
    "sparse_segment_sqrt_n",
    "sparse_segment_sum",
    "unsorted_segment_max",
    "unsorted_segment_mean",
    "unsorted_segment_min",
    "unsorted_segment_prod",
    "unsorted_segment_sqrt_n",
]


def _sorted(op_type: str, what: str):
    def wrapper(data, segment_ids, name=None):
        return apply_op(op_type, [data, segment_ids], name=name).outputs[0]

    wrapper.__name__ = wrapper.__qualname__ = "segment_" + op_type[len("Segment") :].lower()
    wrapper.__doc__ = (
        f"output[s] = the {what} of the rows data[i] with segment_ids[i] == s; `segment_ids` is "
        "sorted and has data's first dimension; an empty segment gives "
        + ("1." if what == "product" else "0.")
    )
    return wrapper


segment_sum = _sorted("SegmentSum", "sum")
segment_mean = _sorted("SegmentMean", "mean")
segment_max = _sorted("SegmentMax", "maximum")
segment_min = _sorted("SegmentMin", "minimum")
segment_prod = _sorted("SegmentProd", "product")


def _unsorted(op_type: str, what: str, empty: str):
    def wrapper(data, segment_ids, num_segments, name=None):
        return apply_op(op_type, [data, segment_ids, num_segments], name=name).outputs[0]

    wrapper.__name__ = wrapper.__qualname__ = "unsorted_segment_" + op_type[17:].lower()
    wrapper.__doc__ = (
        f"output[s] = the {what} of data[i] over the i with segment_ids[i] == s, for s < "
        f"num_segments; ids may be in any order, negative ids are dropped; an empty segment "
        f"gives {empty}."
    )
    return wrapper


unsorted_segment_max = _unsorted("UnsortedSegmentMax", "maximum", "the lowest value of the dtype")
unsorted_segment_min = _unsorted("UnsortedSegmentMin", "minimum", "the highest value of the dtype")
unsorted_segment_prod = _unsorted("UnsortedSegmentProd", "product", "1")


def _segment_counts(data, segment_ids, num_segments):
    """max(1, rows per segment), shaped to broadcast against the segment sums (TF's helper)."""
    from flowgraph.ops.array import concat, ones, shape
    from flowgraph.ops.array import rank as rank_of
    from flowgraph.ops.data_flow import unsorted_segment_sum
    from flowgraph.ops.math import maximum

    ids_shape = shape(segment_ids)
    counts = unsorted_segment_sum(ones(ids_shape, data.dtype), segment_ids, num_segments)
    extra = ones([rank_of(data) - rank_of(segment_ids)], dtypes.int32)
    counts = _reshape(counts, concat([shape(counts), extra], 0))
    return maximum(counts, 1)


def _reshape(x, s):
    from flowgraph.ops.array import reshape

    return reshape(x, s)


def unsorted_segment_mean(data, segment_ids, num_segments, name=None):
    """The mean of each segment's rows (0 for an empty segment); ids in any order."""
    from flowgraph.ops.data_flow import unsorted_segment_sum

    with name_scope(name, "UnsortedSegmentMean"):
        data = convert_to_tensor(data)
        segment_ids = convert_to_tensor(segment_ids)
        n = _segment_counts(data, segment_ids, num_segments)
        return unsorted_segment_sum(data, segment_ids, num_segments) / n


def unsorted_segment_sqrt_n(data, segment_ids, num_segments, name=None):
    """Each segment's sum divided by the square root of its row count (0 if empty)."""
    from flowgraph.ops.data_flow import unsorted_segment_sum
    from flowgraph.ops.math import sqrt

    with name_scope(name, "UnsortedSegmentSqrtN"):
        data = convert_to_tensor(data)
        segment_ids = convert_to_tensor(segment_ids)
        n = _segment_counts(data, segment_ids, num_segments)
        return unsorted_segment_sum(data, segment_ids, num_segments) / sqrt(n)


def _sparse(kind: str):
    def wrapper(data, indices, segment_ids, name=None, num_segments=None):
        if num_segments is not None:
            return apply_op(
                f"SparseSegment{kind}WithNumSegments",
                [data, indices, segment_ids, num_segments],
                name=name,
            ).outputs[0]
        return apply_op(f"SparseSegment{kind}", [data, indices, segment_ids], name=name).outputs[0]

    wrapper.__name__ = wrapper.__qualname__ = "sparse_segment_" + {"SqrtN": "sqrt_n"}.get(
        kind, kind.lower()
    )
    wrapper.__doc__ = (
        f"Segment{kind} of the rows data[indices[i]] by the sorted segment_ids[i] (the rows "
        "are gathered, not copied); `num_segments` fixes the output's row count."
    )
    return wrapper


sparse_segment_sum = _sparse("Sum")
sparse_segment_mean = _sparse("Mean")
sparse_segment_sqrt_n = _sparse("SqrtN")


def dynamic_partition(data, partitions, num_partitions, name=None) -> list:
    """`num_partitions` tensors: output k holds the rows of data whose partition is k, in order.

    Example: tf.dynamic_partition([10, 20, 30], [1, 0, 1], 2)  # [[20], [10, 30]]
    """
    return apply_op(
        "DynamicPartition", [data, partitions], name=name, num_partitions=num_partitions
    ).outputs


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype=dtypes.int32, name=None):
    """Counts (or sums `weights`) per value of the non-negative int32 `arr`; the output has
    max(arr) + 1 entries, at least `minlength` and at most `maxlength`."""
    from flowgraph.framework.convert import constant
    from flowgraph.ops.array import shape
    from flowgraph.ops.data_flow import unsorted_segment_sum
    from flowgraph.ops.math import cast, greater, maximum, minimum
    from flowgraph.ops.reduction import reduce_max, reduce_prod

    with name_scope(name, "bincount", [arr, weights, minlength, maxlength]):
        arr = convert_to_tensor(arr, name="arr", dtype=dtypes.int32)
        nonempty = greater(reduce_prod(shape(arr)), 0)
        output_size = cast(nonempty, dtypes.int32) * (reduce_max(arr) + 1)
        if minlength is not None:
            minlength = convert_to_tensor(minlength, name="minlength", dtype=dtypes.int32)
            output_size = maximum(minlength, output_size)
        if maxlength is not None:
            maxlength = convert_to_tensor(maxlength, name="maxlength", dtype=dtypes.int32)
            output_size = minimum(maxlength, output_size)
        if weights is not None:
            weights = convert_to_tensor(weights, name="weights")
            return unsorted_segment_sum(weights, arr, output_size)
        weights = constant([], dtype)
        return apply_op("Bincount", [arr, output_size, weights]).outputs[0]


def histogram_fixed_width(values, value_range, nbins=100, dtype=dtypes.int32, name=None):
    """Counts of `values` in `nbins` equal bins over [value_range[0], value_range[1]); values
    outside go to the first or last bin."""
    with name_scope(name, "histogram_fixed_width", [values, value_range, nbins]) as scope:
        values = convert_to_tensor(values, name="values")
        value_range = convert_to_tensor(value_range, values.dtype.base_dtype, name="value_range")
        return apply_op(
            "HistogramFixedWidth", [values, value_range, nbins], name=scope, dtype=dtype
        ).outputs[0]


def histogram_fixed_width_bins(values, value_range, nbins=100, dtype=dtypes.int32, name=None):
    """The bin index of each value, as histogram_fixed_width would count it (TF's formula)."""
    from flowgraph.ops.array import reshape, shape
    from flowgraph.ops.clip import clip_by_value
    from flowgraph.ops.math import cast, floor, truediv

    with name_scope(name, "histogram_fixed_width_bins", [values, value_range, nbins]):
        values = convert_to_tensor(values, name="values")
        s = shape(values)
        values = reshape(values, [-1])
        value_range = convert_to_tensor(value_range, values.dtype.base_dtype, name="value_range")
        nbins_t = convert_to_tensor(nbins, dtypes.int32, name="nbins")
        nbins_float = cast(nbins_t, values.dtype)
        scaled = truediv(values - value_range[0], value_range[1] - value_range[0])
        indices = clip_by_value(floor(nbins_float * scaled), 0, nbins_float - 1)
        return reshape(cast(indices, dtype), s)


def einsum(equation, *inputs, **kwargs):
    """Einstein summation over `inputs` (NumPy's notation, with '...'), e.g.
    tf.einsum('ij,jk->ik', a, b) is a matrix product; differentiable in every input."""
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"Invalid keyword arguments for einsum: {', '.join(kwargs)}")
    if not inputs:
        raise ValueError("einsum needs at least one input")
    return apply_op("Einsum", [list(inputs)], name=name, equation=equation).outputs[0]

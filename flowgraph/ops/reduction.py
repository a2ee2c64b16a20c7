"""Reductions and scans (Table 1 "Element-wise mathematical operations", TF's math_ops
reduce_*): Sum, Mean, Prod, Max, Min, Any, All, ArgMax/ArgMin, Cumsum/Cumprod, and the
composites reduce_logsumexp, count_nonzero, reduce_variance and reduce_std.

TF1's wrappers take `axis` (None reduces everything), `keepdims`, and the deprecated aliases
`reduction_indices` and `keep_dims`; giving both spellings of one argument is a ValueError.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes
from flowgraph.core.op_def import get_op_def
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import constant, convert_to_tensor
from flowgraph.ops import math as math_ops
from flowgraph.ops.math import name_scope

__all__ = [
    "argmax",
    "argmin",
    "count_nonzero",
    "cumprod",
    "cumsum",
    "reduce_all",
    "reduce_any",
    "reduce_logsumexp",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_std",
    "reduce_sum",
    "reduce_variance",
]


def _lookup(name, value, old_name, old_value):
    """TF's deprecated_argument_lookup: the new or the old spelling, never both."""
    if old_value is not None:
        if value is not None:
            raise ValueError(f"Cannot specify both '{name}' and '{old_name}'")
        return old_value
    return value


def _reduction_dims(x, axis):
    """`axis`, or every axis of x: a Const when x's rank is known, else Range(0, Rank(x))."""
    if axis is not None:
        # Tidx defaults to int32, so an empty list of axes is int32 too (not float32).
        return convert_to_tensor(axis, name="reduction_indices", preferred_dtype=dtypes.int32)
    if x.shape.ndims is not None:
        return constant(np.arange(x.shape.ndims, dtype=np.int32))
    rank = apply_op("Rank", [x]).outputs[0]
    return apply_op("Range", [0, rank, 1]).outputs[0]


def _reducer(op_type: str, py_name: str, doc: str):
    """The TF1 wrapper `py_name(input_tensor, axis, keepdims, name, reduction_indices,
    keep_dims)`."""

    def wrapper(
        input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None
    ):
        axis = _lookup("axis", axis, "reduction_indices", reduction_indices)
        keepdims = bool(_lookup("keepdims", keepdims, "keep_dims", keep_dims))
        # Any/All take bool only: `tf.reduce_all([], [0])` is an empty bool tensor, not float32.
        fixed_dtype = get_op_def(op_type).inputs[0].type
        if isinstance(getattr(input_tensor, "dtype", None), dtypes.DType):
            fixed_dtype = None  # a Tensor keeps its type; apply_op reports a mismatch (TypeError)
        x = convert_to_tensor(input_tensor, name="input_tensor", dtype=fixed_dtype)
        out = apply_op(
            op_type, [x, _reduction_dims(x, axis)], name=name, keep_dims=keepdims
        ).outputs[0]
        if not keepdims and axis is None:
            out.set_shape([])  # everything was reduced, even if x's rank is unknown
        return out

    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = (
        f"{doc}\n\n    Reduces along `axis` (an int, a list, or None for all axes; negative axes "
        f"count from the end),\n    keeping reduced axes with length 1 if `keepdims`.\n"
        f"    Example: tf.{py_name}(x, axis=1, keepdims=True)  # op type {op_type!r}"
    )
    return wrapper


reduce_sum = _reducer("Sum", "reduce_sum", "The sum of elements across dimensions.")
reduce_mean = _reducer(
    "Mean", "reduce_mean", "The mean across dimensions; integer means truncate toward zero."
)
reduce_prod = _reducer("Prod", "reduce_prod", "The product of elements across dimensions.")
reduce_max = _reducer("Max", "reduce_max", "The maximum across dimensions.")
reduce_min = _reducer("Min", "reduce_min", "The minimum across dimensions.")
reduce_any = _reducer("Any", "reduce_any", "Logical OR across dimensions of a bool tensor.")
reduce_all = _reducer("All", "reduce_all", "Logical AND across dimensions of a bool tensor.")


def reduce_logsumexp(
    input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None, keep_dims=None
):
    """log(sum(exp(x))) across dimensions, computed without overflow: the (finite) maximum is
    subtracted first and added back, and gets no gradient through the shift.

    Example: tf.reduce_logsumexp([[0., 0., 0.], [0., 0., 0.]], axis=1)  # [log(3), log(3)]
    """
    axis = _lookup("axis", axis, "reduction_indices", reduction_indices)
    keepdims = bool(_lookup("keepdims", keepdims, "keep_dims", keep_dims))
    with name_scope(name, "ReduceLogSumExp", [input_tensor]) as scope:
        x = convert_to_tensor(input_tensor, name="input_tensor")
        raw_max = reduce_max(x, axis=axis, keepdims=True)
        zero = constant(0, dtype=raw_max.dtype)
        finite_max = math_ops.where_v2(math_ops.is_finite(raw_max), raw_max, zero)
        my_max = apply_op("StopGradient", [finite_max]).outputs[0]
        sum_exp = reduce_sum(
            math_ops.exp(math_ops.subtract(x, my_max)), axis=axis, keepdims=keepdims
        )
        result = math_ops.log(sum_exp)
        if not keepdims:
            shape = apply_op("Shape", [result]).outputs[0]
            my_max = apply_op("Reshape", [my_max, shape]).outputs[0]
        return apply_op("AddV2", [result, my_max], name=scope).outputs[0]


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """The variance across dimensions: mean(|x - mean(x)|^2)."""
    with name_scope(name, "reduce_variance", [input_tensor]) as scope:
        x = convert_to_tensor(input_tensor, name="input_tensor")
        means = reduce_mean(x, axis=axis, keepdims=True)
        deviations = math_ops.squared_difference(x, means)
        if x.dtype.is_complex:
            deviations = math_ops.real(deviations)
        return reduce_mean(deviations, axis=axis, keepdims=keepdims, name=scope)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """The standard deviation across dimensions: sqrt(reduce_variance(x))."""
    with name_scope(name, "reduce_std", [input_tensor]) as scope:
        variance = reduce_variance(input_tensor, axis=axis, keepdims=keepdims)
        return apply_op("Sqrt", [variance], name=scope).outputs[0]


def count_nonzero(
    input_tensor=None,
    axis=None,
    keepdims=None,
    dtype=dtypes.int64,
    name=None,
    reduction_indices=None,
    keep_dims=None,
    input=None,
):
    """The number of non-zero (non-empty, for strings; True, for bools) elements across
    dimensions, as `dtype`.

    Example: tf.count_nonzero([[0, 1], [2, 0]], axis=1)  # [1, 1] (int64)
    """
    input_tensor = _lookup("input_tensor", input_tensor, "input", input)
    if input_tensor is None:
        raise ValueError("count_nonzero needs `input_tensor`")
    axis = _lookup("axis", axis, "reduction_indices", reduction_indices)
    keepdims = bool(_lookup("keepdims", keepdims, "keep_dims", keep_dims))
    with name_scope(name, "count_nonzero", [input_tensor]) as scope:
        x = convert_to_tensor(input_tensor, name="input")
        base = x.dtype.base_dtype
        zero = constant(
            b"" if base == dtypes.string else np.zeros((), base.as_numpy_dtype), dtype=base
        )
        nonzero = math_ops.cast(math_ops.not_equal(x, zero), dtypes.int64)
        return math_ops.cast(reduce_sum(nonzero, axis=axis, keepdims=keepdims), dtype, name=scope)


def _arg_reduce(op_type: str, py_name: str, doc: str):
    def wrapper(input, axis=None, name=None, dimension=None, output_type=dtypes.int64):
        axis = _lookup("axis", axis, "dimension", dimension)
        if axis is None:
            axis = 0
        return apply_op(
            op_type, [input, axis], name=name, output_type=dtypes.as_dtype(output_type)
        ).outputs[0]

    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = (
        f"{doc}\n\n    `axis` (alias `dimension`, default 0) is a scalar; ties give the first "
        "index;"
        f"\n    the result has `output_type` (int64 or int32).\n"
        f"    Example: tf.{py_name}([[1, 3], [3, 1]], axis=1)  # [1, 0]"
    )
    return wrapper


argmax = _arg_reduce("ArgMax", "argmax", "The index of the largest value along an axis.")
argmin = _arg_reduce("ArgMin", "argmin", "The index of the smallest value along an axis.")


def _scan(op_type: str, py_name: str, doc: str):
    def wrapper(x, axis=0, exclusive=False, reverse=False, name=None):
        with name_scope(name, op_type, [x]) as scope:
            x = convert_to_tensor(x, name="x")
            return apply_op(
                op_type, [x, axis], name=scope, exclusive=exclusive, reverse=reverse
            ).outputs[0]

    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = (
        f"{doc}\n\n    `exclusive` leaves out each element itself; `reverse` scans from the end.\n"
        f"    Example: tf.{py_name}([a, b, c], exclusive=True)"
    )
    return wrapper


cumsum = _scan("Cumsum", "cumsum", "The running sum along `axis`: [a, a + b, a + b + c].")
cumprod = _scan("Cumprod", "cumprod", "The running product along `axis`: [a, a * b, a * b * c].")

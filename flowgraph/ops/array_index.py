"""Array ops that select or place elements by index: slice, strided_slice and the
`Tensor.__getitem__` it implements, gather/gather_nd/scatter_nd, one_hot, boolean_mask, unique,
setdiff1d and sequence_mask. Re-exported by `flowgraph.ops.array`.
"""

from __future__ import annotations

import builtins
import sys

import numpy as np

from flowgraph.core import dtypes
from flowgraph.core.shapes import Dimension
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import constant, convert_to_tensor, infer_dtype
from flowgraph.framework.operation import Tensor
from flowgraph.ops.array import (
    expand_dims,
    index_tensor,
    name_scope,
    ones_like,
    range_,
    reshape,
    shape,
    stack,
)

__all__ = [
    "boolean_mask",
    "gather",
    "gather_nd",
    "listdiff",
    "one_hot",
    "scatter_nd",
    "sequence_mask",
    "setdiff1d",
    "slice",
    "strided_slice",
    "unique",
    "unique_with_counts",
]


def slice_(input_, begin, size, name=None):
    """The window of `input_` starting at `begin` with extent `size` (-1: to the end)."""
    return apply_op("Slice", [input_, index_tensor(begin), index_tensor(size)], name=name).outputs[
        0
    ]


def strided_slice(
    input_,
    begin,
    end,
    strides=None,
    begin_mask=0,
    end_mask=0,
    ellipsis_mask=0,
    new_axis_mask=0,
    shrink_axis_mask=0,
    var=None,
    name=None,
):
    """NumPy-style extended slicing, encoded as TensorFlow's begin/end/strides and bit masks.

    Example: strided_slice(x, [0, 2], [0, -1], [1, 2], begin_mask=1, end_mask=1) is x[:, ::2].
    """
    if var is not None:
        raise NotImplementedError(
            "strided_slice(var=...) (slice assignment through a variable) is not supported; "
            "use tf.scatter_nd_update or assign the whole variable"
        )
    begin, end = index_tensor(begin), index_tensor(end)
    strides = ones_like(begin) if strides is None else index_tensor(strides)
    return apply_op(
        "StridedSlice",
        [input_, begin, end, strides],
        name=name,
        begin_mask=begin_mask,
        end_mask=end_mask,
        ellipsis_mask=ellipsis_mask,
        new_axis_mask=new_axis_mask,
        shrink_axis_mask=shrink_axis_mask,
    ).outputs[0]


# -- Tensor.__getitem__ -----------------------------------------------------------------------
_SLICE_TYPE_ERROR = (
    "Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar tf.int32/"
    "tf.int64 tensors are valid indices"
)


def _check_index(idx):
    """TypeError unless `idx` is an int, a Dimension, or a scalar int32/int64 tensor or array."""
    if isinstance(idx, (int, np.integer, Dimension)) and not isinstance(idx, bool):
        return
    dtype = getattr(idx, "dtype", None)
    try:
        ok = dtype is not None and dtypes.as_dtype(dtype).base_dtype in (dtypes.int32, dtypes.int64)
    except TypeError:
        ok = False
    if not ok or len(getattr(idx, "shape", ()) or ()) == 1:
        raise TypeError(f"{_SLICE_TYPE_ERROR}, got {idx!r}")


def _is_open(bound) -> bool:
    """Python writes a[:] as slice(None, sys.maxsize) in some paths; both mean 'open'."""
    return bound is None or (not isinstance(bound, Tensor) and bound == sys.maxsize)


def getitem(tensor, slice_spec):
    """`tensor[slice_spec]` as one StridedSlice (TF1's _slice_helper). Boolean masks go through
    boolean_mask; lists of indices are a TypeError, as in TF1."""
    if isinstance(slice_spec, bool) or (
        isinstance(slice_spec, (Tensor, np.ndarray))
        and dtypes.as_dtype(slice_spec.dtype) == dtypes.bool_
    ):
        return boolean_mask(tensor, slice_spec)
    if not isinstance(slice_spec, (list, builtins.tuple)):
        slice_spec = [slice_spec]
    begin, end, strides = [], [], []
    masks = {
        "begin_mask": 0,
        "end_mask": 0,
        "ellipsis_mask": 0,
        "new_axis_mask": 0,
        "shrink_axis_mask": 0,
    }
    for i, s in enumerate(slice_spec):
        bit = 1 << i
        if isinstance(s, builtins.slice):
            for bound, out, mask in ((s.start, begin, "begin_mask"), (s.stop, end, "end_mask")):
                if _is_open(bound):
                    out.append(0)
                    masks[mask] |= bit
                else:
                    _check_index(bound)
                    out.append(bound)
            if s.step is not None:
                _check_index(s.step)
            strides.append(1 if s.step is None else s.step)
        elif s is Ellipsis or s is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks["ellipsis_mask" if s is Ellipsis else "new_axis_mask"] |= bit
        else:
            _check_index(s)
            begin.append(s)
            end.append(s + 1)
            strides.append(1)
            masks["shrink_axis_mask"] |= bit
    with name_scope(None, "strided_slice", [tensor]) as scope:
        if begin:
            dtype = _index_dtype(begin + end + strides)
            packed = [_pack_index(vals, dtype) for vals in (begin, end, strides)]
        else:
            packed = [constant([], dtype=dtypes.int32)] * 3
        return strided_slice(tensor, *packed, name=scope, **masks)


def _index_dtype(values) -> dtypes.DType:
    """int64 if any index is an int64 tensor, else int32 (TF1 casts the packed vectors to it)."""
    for v in values:
        if isinstance(v, Tensor) and v.dtype.base_dtype == dtypes.int64:
            return dtypes.int64
    return dtypes.int32


def _as_index(value, dtype):
    if isinstance(value, Tensor):
        if value.dtype.base_dtype != dtype:
            return apply_op("Cast", [value], SrcT=value.dtype.base_dtype, DstT=dtype).outputs[0]
        return value
    return int(value)


def _pack_index(values, dtype) -> Tensor:
    """One index vector: a Const when every entry is a Python int, else a Pack."""
    values = [_as_index(v, dtype) for v in values]
    if any(isinstance(v, Tensor) for v in values):
        return stack(values)
    return constant(values, dtype=dtype, name="stack")


Tensor.__getitem__ = getitem


# -- gathering and scattering -----------------------------------------------------------------
def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
    """Slices of `params` along `axis` at `indices` (GatherV2). Indices are always validated on
    CPU, so `validate_indices` (deprecated in TF1) changes nothing.

    Example: gather([[1, 2], [3, 4], [5, 6]], [2, 0]) is [[5, 6], [1, 2]].
    """
    del validate_indices  # TF1 documents it as deprecated and without effect
    batch_dims = 0 if batch_dims is None else batch_dims
    if axis is None:
        axis = batch_dims
    return apply_op(
        "GatherV2", [params, indices, index_tensor(axis)], name=name, batch_dims=int(batch_dims)
    ).outputs[0]


def gather_nd(params, indices, name=None, batch_dims=0):
    """Gathers slices of `params` addressed by the index vectors in the last axis of `indices`;
    the first `batch_dims` dimensions of both are batch dimensions, indexed in lockstep.

    Example: gather_nd([[1, 2], [3, 4]], [[1, 0], [0, 1]]) is [3, 2].
    """
    if batch_dims == 0:
        return apply_op("GatherNd", [params, indices], name=name).outputs[0]
    with name_scope(name, "batch_gather_nd", [params, indices]) as scope:
        params, indices = convert_to_tensor(params), convert_to_tensor(indices)
        r = indices.shape.ndims
        if r is None or not 0 < batch_dims < r:
            raise ValueError(
                f"gather_nd: batch_dims={batch_dims} must be in [0, rank(indices)) and "
                f"rank(indices) must be known; indices has shape {indices.shape}"
            )
        params.shape[:batch_dims].assert_is_compatible_with(indices.shape[:batch_dims])
        # Prepend each index vector with its batch coordinates, then gather once.
        dims = shape(indices, out_type=indices.dtype)
        outer = getitem(dims, builtins.slice(None, -1))
        coords = []
        for j in range(batch_dims):
            rj = range_(0, dims[j], dtype=indices.dtype)
            rj = reshape(rj, [1] * j + [-1] + [1] * (r - 2 - j))
            coords.append(expand_dims(apply_op("BroadcastTo", [rj, outer]).outputs[0], -1))
        full = apply_op("ConcatV2", [coords + [indices], -1]).outputs[0]
        return apply_op("GatherNd", [params, full], name=scope).outputs[0]


def scatter_nd(indices, updates, shape, name=None):
    """A zero tensor of `shape` with `updates` added at `indices` (duplicates accumulate)."""
    indices = convert_to_tensor(indices)
    return apply_op(
        "ScatterNd", [indices, updates, convert_to_tensor(shape, dtype=indices.dtype)], name=name
    ).outputs[0]


# -- encoding ---------------------------------------------------------------------------------
def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """One-hot vectors: `on_value` at each index, `off_value` elsewhere; out-of-range indices
    give an all-off row. The dtype comes from `dtype`, else from on/off values, else float32."""
    with name_scope(name, "one_hot", [indices, depth, on_value, off_value]) as scope:
        given = [v for v in (on_value, off_value) if v is not None]
        value_dtypes = [
            convert_to_tensor(v).dtype.base_dtype for v in given if isinstance(v, Tensor)
        ]
        if dtype is not None:
            dtype = dtypes.as_dtype(dtype)
            for v in value_dtypes:
                if v != dtype:
                    raise TypeError(
                        f"dtype {v.name} of on_value/off_value does not match dtype parameter "
                        f"{dtype.name}"
                    )
        elif value_dtypes:
            if len(set(value_dtypes)) > 1:
                raise TypeError(
                    f"dtype {value_dtypes[0].name} of on_value does not match dtype "
                    f"{value_dtypes[1].name} of off_value"
                )
            dtype = value_dtypes[0]
        elif given:
            dtype = infer_dtype(given[0])  # no stray Const just to learn the dtype
        else:
            dtype = dtypes.float32
        on = convert_to_tensor(1 if on_value is None else on_value, dtype=dtype, name="on_value")
        off = convert_to_tensor(
            0 if off_value is None else off_value, dtype=dtype, name="off_value"
        )
        depth = convert_to_tensor(depth, dtype=dtypes.int32, name="depth")
        return apply_op(
            "OneHot", [indices, depth, on, off], name=scope, axis=-1 if axis is None else axis
        ).outputs[0]


def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """The elements (or slices along `axis`) of `tensor` where `mask` is True.

    The dimensions axis..axis+rank(mask) of `tensor` are flattened into one and gathered at the
    positions of the true elements of the flattened mask (Where + GatherV2), as in TF1.
    """
    with name_scope(name, "boolean_mask", [tensor, mask]):
        tensor = convert_to_tensor(tensor, name="tensor")
        mask = convert_to_tensor(mask, name="mask")
        k = mask.shape.ndims
        if k == 0:
            raise ValueError("mask cannot be scalar.")
        if k is None:
            raise ValueError(
                "Number of mask dimensions must be specified, even if some dimensions are "
                "None.  E.g. shape=[None] is ok, but shape=None is not."
            )
        axis = 0 if axis is None else int(axis)
        static = tensor.shape
        static[axis : axis + k].assert_is_compatible_with(mask.shape)
        dims = shape(tensor)
        leading = apply_op("Prod", [_slice_vector(dims, axis, axis + k), [0]]).outputs[0]
        new_shape = apply_op(
            "ConcatV2",
            [
                [
                    _slice_vector(dims, 0, axis),
                    reshape(leading, [1]),
                    _slice_vector(dims, axis + k, None),
                ],
                0,
            ],
        ).outputs[0]
        flat = reshape(tensor, new_shape)
        if static.ndims is not None:
            flat.set_shape(
                static[:axis]
                .concatenate([static[axis : axis + k].num_elements()])
                .concatenate(static[axis + k :])
            )
        where = apply_op("Where", [reshape(mask, [-1])]).outputs[0]
        indices = apply_op("Squeeze", [where], squeeze_dims=[1]).outputs[0]
        return gather(flat, indices, axis=axis)


def _slice_vector(v: Tensor, start: int, stop):
    """v[start:stop] of a 1-D tensor (the mask code needs pieces of a shape vector)."""
    return getitem(v, builtins.slice(start, stop))


def sequence_mask(lengths, maxlen=None, dtype=dtypes.bool_, name=None):
    """mask[i..., j] = j < lengths[i...], for j in [0, maxlen) (maxlen defaults to max(lengths))."""
    with name_scope(name, "SequenceMask", [lengths, maxlen]):
        lengths = convert_to_tensor(lengths)
        if maxlen is None:
            all_axes = range_(0, apply_op("Rank", [lengths]).outputs[0], 1)
            maxlen = apply_op("Max", [lengths, all_axes]).outputs[0]
            maxlen = apply_op("Maximum", [constant(0, dtype=maxlen.dtype), maxlen]).outputs[0]
        else:
            maxlen = convert_to_tensor(maxlen)
        if maxlen.shape.ndims is not None and maxlen.shape.ndims != 0:
            raise ValueError("maxlen must be scalar for sequence_mask")
        row = range_(constant(0, dtype=maxlen.dtype), maxlen, constant(1, dtype=maxlen.dtype))
        matrix = expand_dims(lengths, -1)
        if matrix.dtype.base_dtype != maxlen.dtype.base_dtype:
            matrix = apply_op(
                "Cast", [matrix], SrcT=matrix.dtype.base_dtype, DstT=maxlen.dtype.base_dtype
            ).outputs[0]
        result = apply_op("Less", [row, matrix]).outputs[0]
        dtype = dtypes.as_dtype(dtype)
        if dtype.base_dtype == dtypes.bool_:
            return result
        return apply_op("Cast", [result], SrcT=dtypes.bool_, DstT=dtype.base_dtype).outputs[0]


# -- sets -------------------------------------------------------------------------------------
def unique(x, out_idx=dtypes.int32, name=None):
    """(y, idx): the distinct values of 1-D `x` in order of first occurrence, and x == y[idx]."""
    return apply_op("Unique", [x], name=name, out_idx=dtypes.as_dtype(out_idx)).outputs


def unique_with_counts(x, out_idx=dtypes.int32, name=None):
    """(y, idx, count): like `unique`, plus how often each value occurs."""
    return apply_op("UniqueWithCounts", [x], name=name, out_idx=dtypes.as_dtype(out_idx)).outputs


def setdiff1d(x, y, index_dtype=dtypes.int32, name=None):
    """(out, idx): the elements of `x` not in `y`, in order, and their positions in `x`."""
    return apply_op("ListDiff", [x, y], name=name, out_idx=dtypes.as_dtype(index_dtype)).outputs


def listdiff(x, y, out_idx=dtypes.int32, name=None):
    """The older name of `setdiff1d`."""
    return setdiff1d(x, y, out_idx, name)


slice = slice_

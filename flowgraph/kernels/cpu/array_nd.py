"""CPU kernels of LowerBound/UpperBound, UnravelIndex, TensorScatter* and ExtractImagePatches.

The batched sorted search merges each row's values into its sorted sequence with one stable
argsort over all rows (no loop over rows or values): the number of sequence elements ordered
before a value is its bound. ExtractImagePatches is the convolution kernels' im2col view.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.array import invalid, shape_str
from flowgraph.kernels.cpu.array_index import flat_positions
from flowgraph.kernels.cpu.windows import pad, patches, window
from flowgraph.opdefs.array_nd import check_patch_attrs, patch_geometry


def _bounds(ctx, sorted_inputs, values, right: bool):
    """For each row, the count of sorted_inputs[b] elements < values[b, j] (<= if `right`)."""
    if sorted_inputs.ndim != 2 or values.ndim != 2:
        raise invalid(
            f"sorted_inputs and values must be matrices, got {shape_str(sorted_inputs.shape)} "
            f"and {shape_str(values.shape)}"
        )
    if sorted_inputs.shape[0] != values.shape[0]:
        raise invalid("Leading dim_size of both tensors must match.")
    out_type = ctx.attrs["out_type"].as_numpy_dtype
    if out_type == np.int32 and sorted_inputs.shape[1] >= 2**31 - 1:
        raise invalid("trailing dim_size must less than INT_MAX for int32 output type")
    n = sorted_inputs.shape[1]
    # A value sorts after equal sequence elements (right) or before them (left); stability
    # keeps the concatenation order among equals.
    parts = (sorted_inputs, values) if right else (values, sorted_inputs)
    merged = np.concatenate(parts, axis=1)
    order = np.argsort(merged, axis=1, kind="stable")
    is_value = order >= n if right else order < values.shape[1]
    before = np.cumsum(~is_value, axis=1)  # sequence elements at or before each position
    out = np.empty(values.shape, out_type)
    rows, cols = np.nonzero(is_value)
    value_index = order[rows, cols] - (n if right else 0)
    out[rows, value_index] = before[rows, cols]
    return out


@register_kernel("LowerBound", dtypes_=dtypes.REAL_NUMBERS)
def lower_bound(ctx, sorted_inputs, values):
    return _bounds(ctx, sorted_inputs, values, right=False)


@register_kernel("UpperBound", dtypes_=dtypes.REAL_NUMBERS)
def upper_bound(ctx, sorted_inputs, values):
    return _bounds(ctx, sorted_inputs, values, right=True)


@register_kernel("UnravelIndex")
def unravel_index(ctx, indices, dims):
    if indices.ndim > 1:
        raise invalid(f'The indices can only be scalar or vector, got "{shape_str(indices.shape)}"')
    if dims.ndim != 1:
        raise invalid(f'The dims can only be a 1-D vector, got "{shape_str(dims.shape)}"')
    zero = np.flatnonzero(dims == 0)
    if zero.size:
        raise invalid(
            f"Input dims cannot contain a dim of zero, but dims contains zero at index {zero[0]}"
        )
    if (dims < 0).any():
        raise invalid(f"Input dims must be positive, got {dims.tolist()}")
    if ((indices < 0) | (indices >= np.prod(dims, dtype=np.int64))).any():
        raise invalid("index is out of bound as with dims")
    coords = np.unravel_index(indices.reshape(-1), tuple(int(d) for d in dims))
    out = np.stack(coords).astype(dims.dtype)
    return out.reshape(-1) if indices.ndim == 0 else out


NUMERIC = dtypes.NUMERIC
REAL = dtypes.REAL_NUMBERS
_COMBINE = {  # how TensorScatter<x> combines updates at an index; duplicates accumulate
    "TensorScatterAdd": np.add,
    "TensorScatterSub": np.subtract,
    "TensorScatterMax": np.maximum,
    "TensorScatterMin": np.minimum,
}


def _tensor_scatter(ctx, tensor, indices, updates):
    """A copy of `tensor` with `updates` written (or combined) at the index vectors of `indices`
    (its last axis indexes tensor's first indices.shape[-1] dims)."""
    if indices.ndim == 0:
        raise invalid("Indices shape must have rank at least one.")
    if tensor.ndim == 0:
        raise invalid("Output must be at least 1-D")
    k = indices.shape[-1]
    if k > tensor.ndim:
        raise invalid(f"Output must have rank at least {k}, got shape {shape_str(tensor.shape)}")
    want = indices.shape[:-1] + tensor.shape[k:]
    if updates.shape != want:
        raise invalid(
            f"Must have updates.shape = indices.shape[:-1] + params_shape[{k}:], got "
            f"updates.shape: {shape_str(updates.shape)}, indices.shape: "
            f"{shape_str(indices.shape)}, params_shape: {shape_str(tensor.shape)}"
        )
    flat = flat_positions(indices, tensor.shape, "shape").reshape(-1)
    rows = (int(np.prod(tensor.shape[:k], dtype=np.int64)),) + tensor.shape[k:]
    out = np.array(tensor, copy=True).reshape(rows)
    values = updates.reshape((flat.size,) + tensor.shape[k:])
    combine = _COMBINE.get(ctx.op_type)
    if combine is None:
        out[flat] = values  # duplicates: one of them wins, as in TF
    else:
        combine.at(out, flat, values)
    return out.reshape(tensor.shape)


register_kernel("TensorScatterUpdate")(_tensor_scatter)
for _op, _types in (("Add", NUMERIC), ("Sub", NUMERIC), ("Max", REAL), ("Min", REAL)):
    register_kernel(f"TensorScatter{_op}", dtypes_=_types)(_tensor_scatter)


@register_kernel("ExtractImagePatches")
def extract_image_patches(ctx, images):
    """out[b, r, c, (i * KW + j) * D + d] = images[b, r * sr + i * rr - top, c * sc + j * rc
    - left, d], zero where that falls in the padding."""
    if images.ndim != 4:
        raise invalid(f"input must be 4-dimensional, got {shape_str(images.shape)}")
    try:
        ksizes, strides, rates = check_patch_attrs(ctx.attrs)
    except ValueError as e:
        raise errors.UnimplementedError(None, None, str(e)) from None
    n, h, w, depth = images.shape
    padding = ctx.attrs["padding"]
    out_rows = patch_geometry(h, ksizes[1], strides[1], rates[1], padding)[0]
    out_cols = patch_geometry(w, ksizes[2], strides[2], rates[2], padding)[0]
    out_depth = ksizes[1] * ksizes[2] * depth
    if out_rows == 0 or out_cols == 0 or images.size == 0:
        return np.zeros((n, out_rows, out_cols, out_depth), images.dtype)
    attrs = {"data_format": "NHWC", "strides": strides, "dilations": rates, "padding": padding}
    win = window(attrs, images.shape, ksizes[1], ksizes[2])
    cols = patches(pad(images, win), win)  # (N, OH, OW, KH, KW, D), a strided view
    return np.ascontiguousarray(cols).reshape(n, win.oh, win.ow, out_depth)

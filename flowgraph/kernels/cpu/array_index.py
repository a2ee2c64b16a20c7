"""CPU kernels that select or place elements by index: Slice, StridedSlice, Gather/GatherV2/
GatherNd, ScatterNd, OneHot, Unique, UniqueWithCounts, ListDiff.

Indices are validated up front (TensorFlow's CPU kernels reject negative and out-of-range indices
with InvalidArgumentError rather than wrapping or clamping), then one NumPy indexing call does the
work.
"""

from __future__ import annotations

import numpy as np

from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.array import as_ints, checked, invalid, scalar_int, shape_str
from flowgraph.opdefs import strided_slice as ss
from flowgraph.opdefs.array import canonical_axis
from flowgraph.opdefs.array_index import check_batch_dims, slice_sizes


def _position(mask: np.ndarray) -> tuple:
    """The multi-index of the first True entry of `mask`."""
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


def check_indices(indices: np.ndarray, limit: int) -> None:
    """InvalidArgumentError naming the first index outside [0, limit)."""
    bad = (indices < 0) | (indices >= limit)
    if bad.any():
        pos = _position(bad)
        raise invalid(f"indices[{','.join(map(str, pos))}] = {indices[pos]} is not in [0, {limit})")


# -- slicing ----------------------------------------------------------------------------------
@register_kernel("Slice")
def slice_(ctx, x, begin, size):
    begin, size = as_ints(begin), as_ints(size)
    dims = list(np.shape(x))
    if not len(begin) == len(size) == len(dims):
        raise invalid(
            f"Expected begin and size arguments to be 1-D tensors of size {len(dims)}, but got "
            f"shapes [{len(begin)}] and [{len(size)}] instead."
        )
    sizes = checked(slice_sizes, begin, size, dims)
    return x[tuple(slice(b, b + s) for b, s in zip(begin, sizes))]


@register_kernel("StridedSlice")
def strided_slice(ctx, x, begin, end, strides):
    x = np.asarray(x)
    index = checked(ss.build_index, as_ints(begin), as_ints(end), as_ints(strides), ctx.attrs)
    entries = checked(ss.dense_entries, index, x.ndim)
    checked(ss.check_shrink, entries, list(x.shape))
    return np.asarray(x[ss.numpy_index(entries)])


# -- gathering and scattering -----------------------------------------------------------------
def gather(params: np.ndarray, indices: np.ndarray, axis: int, batch_dims: int) -> np.ndarray:
    """params[..., indices, ...] along `axis`, with the first `batch_dims` dims shared by both."""
    check_indices(indices, params.shape[axis])
    if batch_dims == 0:
        return np.take(params, indices, axis=axis)
    batch = params.shape[:batch_dims]
    if indices.shape[:batch_dims] != batch:
        raise invalid(
            f"params.shape[:{batch_dims}] {shape_str(batch)} should be equal to "
            f"indices.shape[:{batch_dims}] {shape_str(indices.shape[:batch_dims])}"
        )
    n = int(np.prod(batch, dtype=np.int64))
    p = params.reshape((n,) + params.shape[batch_dims:])
    i = indices.reshape((n,) + indices.shape[batch_dims:])
    mid = axis - batch_dims  # params dims between the batch dims and the gathered axis
    b = np.arange(n).reshape((n,) + (1,) * (i.ndim - 1))
    # Advanced indices split by slices put the broadcast dims first: (n, I..., mid..., inner...).
    out = p[(b,) + (slice(None),) * mid + (i,)]
    k = i.ndim - 1
    order = (
        [0]
        + list(range(1 + k, 1 + k + mid))
        + list(range(1, 1 + k))
        + list(range(1 + k + mid, out.ndim))
    )
    out = out.transpose(order)
    return out.reshape(batch + out.shape[1:])


@register_kernel("GatherV2")
def gather_v2(ctx, params, indices, axis):
    params, indices = np.asarray(params), np.asarray(indices)
    if params.ndim == 0:
        raise invalid("params must be at least 1 dimensional")
    axis = checked(canonical_axis, scalar_int(axis, "axis"), params.ndim)
    batch_dims = checked(check_batch_dims, ctx.attrs["batch_dims"], axis, params.ndim, indices.ndim)
    return gather(params, indices, axis, batch_dims)


@register_kernel("Gather")
def gather_v1(ctx, params, indices):
    params = np.asarray(params)
    if params.ndim == 0:
        raise invalid("params must be at least 1 dimensional")
    return gather(params, np.asarray(indices), 0, 0)


def flat_positions(indices: np.ndarray, shape: tuple, what: str) -> np.ndarray:
    """Row-major positions of the index vectors in `indices` (last axis) within `shape`."""
    k = indices.shape[-1]
    limits = np.asarray(shape[:k], dtype=np.int64)
    bad = ((indices < 0) | (indices >= limits)).any(axis=-1)
    if bad.any():
        pos = _position(bad)
        vec = ", ".join(str(int(v)) for v in indices[pos])
        where = ",".join(map(str, pos))
        raise invalid(f"indices[{where}] = [{vec}] does not index into {what} {shape_str(shape)}")
    if k == 0:
        return np.zeros(indices.shape[:-1], dtype=np.int64)
    return np.ravel_multi_index(tuple(np.moveaxis(indices, -1, 0)), shape[:k])


@register_kernel("GatherNd")
def gather_nd(ctx, params, indices):
    params, indices = np.asarray(params), np.asarray(indices)
    if indices.ndim == 0:
        raise invalid("indices must be at least a vector")
    k = indices.shape[-1]
    if k > params.ndim:
        raise invalid(
            f"index innermost dimension length must be <= params rank; saw: {k} vs. {params.ndim}"
        )
    flat = flat_positions(indices, params.shape, "param shape")
    rows = params.reshape((int(np.prod(params.shape[:k], dtype=np.int64)),) + params.shape[k:])
    return rows[flat]


@register_kernel("ScatterNd")
def scatter_nd(ctx, indices, updates, shape):
    indices, updates = np.asarray(indices), np.asarray(updates)
    shape = tuple(as_ints(shape))
    if indices.ndim == 0:
        raise invalid("indices must be at least a vector")
    k = indices.shape[-1]
    if k > len(shape):
        raise invalid(f"Output must have rank at least {k}, got shape {shape_str(shape)}")
    want = indices.shape[:-1] + shape[k:]
    if updates.shape != want:
        raise invalid(
            f"Must have updates.shape = indices.shape[:-1] + output_shape[{k}:], got "
            f"updates.shape: {shape_str(updates.shape)}, indices.shape: "
            f"{shape_str(indices.shape)}, output_shape: {shape_str(shape)}"
        )
    flat = flat_positions(indices, shape, "shape").reshape(-1)
    out = np.zeros((int(np.prod(shape[:k], dtype=np.int64)),) + shape[k:], dtype=updates.dtype)
    add = np.logical_or if updates.dtype == np.bool_ else np.add  # duplicates accumulate
    add.at(out, flat, updates.reshape((flat.size,) + shape[k:]))
    return out.reshape(shape)


# -- encoding and sets ------------------------------------------------------------------------
@register_kernel("OneHot")
def one_hot(ctx, indices, depth, on_value, off_value):
    depth = scalar_int(depth, "depth")
    if depth < 0:
        raise invalid(f"depth must be non-negative, got: {depth}")
    for name, v in (("on_value", on_value), ("off_value", off_value)):
        if np.ndim(v) != 0:
            raise invalid(f"{name} must be a scalar, but got: {shape_str(np.shape(v))}")
    indices = np.asarray(indices)
    axis = ctx.attrs["axis"]
    if not -1 <= axis <= indices.ndim:
        raise invalid(
            f"Expected axis to be -1 or between [0, {indices.ndim + 1}).  But received: {axis}"
        )
    # Negative or too-large indices match no position: their row is all off_value.
    hot = indices[..., None] == np.arange(depth, dtype=np.int64)
    out = np.where(hot, np.asarray(on_value), np.asarray(off_value))
    return out if axis == -1 else np.moveaxis(out, -1, axis)


def _unique(x: np.ndarray):
    """(values in order of first occurrence, index of each element's value, counts)."""
    if x.ndim != 1:
        raise invalid(f"unique expects a 1D vector, got shape {shape_str(x.shape)}")
    # NaN != NaN in TensorFlow's hash table, so every NaN is its own value.
    values, first, inverse, counts = np.unique(
        x, return_index=True, return_inverse=True, return_counts=True, equal_nan=False
    )
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return values[order], rank[inverse.reshape(-1)], counts[order]


@register_kernel("Unique")
def unique(ctx, x):
    y, idx, _ = _unique(np.asarray(x))
    return y, idx.astype(ctx.attrs["out_idx"].as_numpy_dtype)


@register_kernel("UniqueWithCounts")
def unique_with_counts(ctx, x):
    y, idx, counts = _unique(np.asarray(x))
    out_idx = ctx.attrs["out_idx"].as_numpy_dtype
    return y, idx.astype(out_idx), counts.astype(out_idx)


@register_kernel("ListDiff")
def list_diff(ctx, x, y):
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 1 or y.ndim != 1:
        raise invalid(
            f"x and y should be 1D vectors, got shapes {shape_str(x.shape)} and {shape_str(y.shape)}"
        )
    keep = ~np.isin(x, y)
    return x[keep], np.flatnonzero(keep).astype(ctx.attrs["out_idx"].as_numpy_dtype)

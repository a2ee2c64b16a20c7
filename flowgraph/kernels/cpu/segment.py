"""CPU kernels of the segment reductions, DynamicPartition, Bincount, HistogramFixedWidth and
Einsum (see flowgraph/opdefs/segment.py). Reductions are NumPy ufunc `.at` scatters over whole
row blocks; empty segments get TF's values (0 for sorted segments, the identity of the
reduction for unsorted ones)."""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.opdefs.segment import parse_equation


def _invalid(msg: str):
    return errors.InvalidArgumentError(None, None, msg)


def _lowest(dtype):
    return -np.inf if dtype.kind in "fc" else np.iinfo(dtype).min


def _highest(dtype):
    return np.inf if dtype.kind in "fc" else np.iinfo(dtype).max


# reduction -> (ufunc, identity of the unsorted op as a function of dtype)
_REDUCE = {
    "Sum": (np.add, lambda dt: 0),
    "Prod": (np.multiply, lambda dt: 1),
    "Max": (np.maximum, _lowest),
    "Min": (np.minimum, _highest),
}


def _scatter(kind, data, ids, n, identity):
    """out[s] = reduce(data[i] for ids[i] == s) over rows; rows of negative ids are dropped."""
    ufunc = _REDUCE["Sum" if kind in ("Mean", "SqrtN") else kind][0]
    inner = data.shape[ids.ndim :]
    flat = ids.reshape(-1)
    rows = data.reshape((flat.size,) + inner)
    keep = flat >= 0
    out = np.full((n,) + inner, identity, dtype=data.dtype)
    ufunc.at(out, flat[keep], rows[keep])
    counts = np.bincount(flat[keep], minlength=n)[:n]
    if kind in ("Mean", "SqrtN"):
        scale = counts if kind == "Mean" else np.sqrt(counts)
        scale = np.maximum(scale, 1).reshape((n,) + (1,) * len(inner))
        if data.dtype.kind in "fc":
            out = (out / scale).astype(data.dtype)
        else:  # integer division truncates toward zero, as in TF
            out = (np.sign(out) * (np.abs(out) // scale)).astype(data.dtype)
    return out, counts


def _sorted_segment(kind: str):
    def kernel(ctx, data, segment_ids):
        ids = np.asarray(segment_ids)
        if ids.ndim != 1 or data.ndim < 1 or len(ids) != data.shape[0]:
            raise _invalid(
                f"segment_ids should be a vector of the size of data's first dimension: "
                f"{list(ids.shape)} vs {list(data.shape)}"
            )
        if ids.size and ids[0] < 0:
            raise _invalid(f"segment ids must be >= 0, got {int(ids[0])}")
        if (np.diff(ids) < 0).any():
            i = int(np.argmax(np.diff(ids) < 0)) + 1
            raise _invalid(f"segment ids are not increasing: segment_ids[{i}] = {int(ids[i])}")
        n = int(ids[-1]) + 1 if ids.size else 0
        identity = _REDUCE["Sum" if kind == "Mean" else kind][1](data.dtype)
        out, counts = _scatter(kind, data, ids, n, identity)
        out[counts == 0] = 0 if kind != "Prod" else 1  # TF: empty segments are 0 (prod: 1)
        return out

    return kernel


for _kind in ("Sum", "Mean", "Prod", "Max", "Min"):
    register_kernel(f"Segment{_kind}")(_sorted_segment(_kind))


def _check_unsorted(data, ids, num_segments):
    if np.ndim(num_segments) != 0:
        raise _invalid(f"num_segments should be a scalar, not shape {list(np.shape(num_segments))}")
    n = int(num_segments)
    if data.shape[: ids.ndim] != ids.shape:
        raise _invalid(
            f"data.shape = {list(data.shape)} does not start with segment_ids.shape = "
            f"{list(ids.shape)}"
        )
    if ids.size and ids.max() >= n:
        raise _invalid(f"segment_ids value {int(ids.max())} is out of range [0, {n})")
    return n


def _unsorted_segment(kind: str):
    def kernel(ctx, data, segment_ids, num_segments):
        ids = np.asarray(segment_ids)
        n = _check_unsorted(data, ids, num_segments)
        return _scatter(kind, data, ids, n, _REDUCE[kind][1](data.dtype))[0]

    return kernel


for _kind in ("Prod", "Max", "Min"):
    register_kernel(f"UnsortedSegment{_kind}")(_unsorted_segment(_kind))


def _sparse_segment(kind: str, with_num: bool):
    def kernel(ctx, data, indices, segment_ids, num_segments=None):
        indices, ids = np.asarray(indices), np.asarray(segment_ids)
        if indices.shape != ids.shape or ids.ndim != 1:
            raise _invalid("segment_ids and indices should have the same size")
        if indices.size and (indices.min() < 0 or indices.max() >= data.shape[0]):
            bad = int(np.argmax((indices < 0) | (indices >= data.shape[0])))
            raise _invalid(
                f"Bad: indices[{bad}] == {int(indices[bad])} out of range [0, {data.shape[0]})"
            )
        if (np.diff(ids) < 0).any() or (ids.size and ids[0] < 0):
            raise _invalid("segment ids are not increasing")
        if with_num:
            n = int(num_segments)
            if ids.size and ids[-1] >= n:
                raise _invalid(f"segment ids must be < num_segments: {int(ids[-1])} >= {n}")
        else:
            n = int(ids[-1]) + 1 if ids.size else 0
        return _scatter(kind, data[indices], ids, n, 0)[0]

    return kernel


for _kind in ("Sum", "Mean", "SqrtN"):
    register_kernel(f"SparseSegment{_kind}")(_sparse_segment(_kind, False))
    register_kernel(f"SparseSegment{_kind}WithNumSegments")(_sparse_segment(_kind, True))


@register_kernel("DynamicPartition")
def dynamic_partition(ctx, data, partitions):
    n = ctx.attrs["num_partitions"]
    if data.shape[: partitions.ndim] != partitions.shape:
        raise _invalid(
            f"data.shape must start with partitions.shape, got data.shape = "
            f"{list(data.shape)}, partitions.shape = {list(partitions.shape)}"
        )
    flat = partitions.reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() >= n):
        bad = int(np.argmax((flat < 0) | (flat >= n)))
        raise _invalid(f"partitions[{bad}] = {int(flat[bad])} is not in [0, {n})")
    rows = data.reshape((flat.size,) + data.shape[partitions.ndim :])
    order = np.argsort(flat, kind="stable")
    bounds = np.searchsorted(flat[order], np.arange(n + 1))
    return tuple(rows[order[bounds[i] : bounds[i + 1]]] for i in range(n))


@register_kernel("Bincount")
def bincount(ctx, arr, size, weights):
    n = int(size)
    if n < 0:
        raise _invalid(f"size ({n}) must be non-negative")
    flat = arr.reshape(-1)
    if flat.size and flat.min() < 0:
        raise _invalid("Input arr must be non-negative!")
    keep = flat < n  # values >= size are ignored, as in TF
    dtype = weights.dtype
    if weights.size == 0:
        return np.bincount(flat[keep], minlength=n)[:n].astype(dtype)
    if weights.shape != arr.shape:
        raise _invalid(f"weights shape {list(weights.shape)} must match arr {list(arr.shape)}")
    out = np.zeros(n, dtype)
    np.add.at(out, flat[keep], weights.reshape(-1)[keep])
    return out


@register_kernel("HistogramFixedWidth")
def histogram_fixed_width(ctx, values, value_range, nbins):
    n = int(nbins)
    if n <= 0:
        raise _invalid(f"nbins should be a positive number, but got '{n}'")
    lo, hi = value_range[0], value_range[1]
    if not lo < hi:
        raise _invalid(
            f"value_range should satisfy value_range[0] < value_range[1], but got '[{lo}, {hi}]'"
        )
    # TF's arithmetic: offsets in T, the bin in double, clamped to the last bin.
    step = (float(hi) - float(lo)) / n
    offset = (np.maximum(values, lo) - lo).astype(np.float64)
    idx = np.minimum(offset / step, n - 1).astype(np.int64).reshape(-1)
    return np.bincount(idx, minlength=n).astype(ctx.attrs["dtype"].as_numpy_dtype)


@register_kernel("Einsum")
def einsum(ctx, *inputs):
    subs, out = parse_equation(ctx.attrs["equation"], [x.ndim for x in inputs])
    for s, x in zip(subs, inputs):
        if len(s) != x.ndim:
            raise _invalid(f"Input with subscripts {s!r} has rank {x.ndim}")
    try:
        result = np.einsum(f"{','.join(subs)}->{out}", *inputs, optimize=len(inputs) > 2)
    except ValueError as e:
        raise _invalid(f"Einsum {ctx.attrs['equation']!r}: {e}") from None
    return np.asarray(result, dtype=inputs[0].dtype)


@register_kernel("DenseBincount")
def dense_bincount(ctx, values, size, weights):
    """Bincount of a vector, or of each row of a matrix; binary_output counts presence."""
    n = int(size)
    if n < 0:
        raise _invalid(f"size ({n}) must be non-negative")
    if values.ndim not in (1, 2):
        raise _invalid(f"input must be a vector or a matrix, got rank {values.ndim}")
    if values.size and values.min() < 0:
        raise _invalid("Input arr must be non-negative!")
    rows = values.reshape(-1, values.shape[-1]) if values.ndim == 2 else values.reshape(1, -1)
    if weights.size and weights.shape != values.shape:
        raise _invalid(f"weights shape {list(weights.shape)} must match input {list(values.shape)}")
    w = weights.reshape(rows.shape) if weights.size else np.ones(rows.shape, weights.dtype)
    keep = rows < n
    row_ids = np.broadcast_to(np.arange(rows.shape[0])[:, None], rows.shape)
    out = np.zeros((rows.shape[0], n), weights.dtype)
    if ctx.attrs["binary_output"]:
        out[row_ids[keep], rows[keep]] = 1
    else:
        np.add.at(out, (row_ids[keep], rows[keep]), w[keep])
    return out if values.ndim == 2 else out[0]

"""CPU kernels of the gradient helper ops (see flowgraph/opdefs/grad_support.py)."""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.opdefs import strided_slice as ss


def broadcast_reduction_axes(s0, s1) -> tuple[list[int], list[int]]:
    """The axes of the broadcast output that x (shape s0) and y (shape s1) must sum over.

    Shapes align on the right; a side sums over the axes where its (1-padded) size is 1, and
    sizes that differ from each other and from 1 are an error. Shapes are short: plain Python
    lists beat NumPy's per-call cost by 10x."""
    a, b = [int(d) for d in s0], [int(d) for d in s1]
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    if any(p != q and p != 1 and q != 1 for p, q in zip(a, b)):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Incompatible shapes: [{','.join(map(str, s0))}] vs. [{','.join(map(str, s1))}]",
        )
    return [i for i, p in enumerate(a) if p == 1], [i for i, q in enumerate(b) if q == 1]


@register_kernel("BroadcastGradientArgs")
def broadcast_gradient_args(ctx, s0, s1):
    if s0.ndim != 1 or s1.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, "BroadcastGradientArgs inputs must be vectors"
        )
    r0, r1 = broadcast_reduction_axes(s0.tolist(), s1.tolist())
    return np.array(r0, s0.dtype), np.array(r1, s0.dtype)


@register_kernel("UnsortedSegmentSum")
def unsorted_segment_sum(ctx, data, segment_ids, num_segments):
    n = int(num_segments)
    if np.ndim(num_segments) != 0:
        raise errors.InvalidArgumentError(
            None, None, f"num_segments should be a scalar, not shape {np.shape(num_segments)}"
        )
    if data.shape[: segment_ids.ndim] != segment_ids.shape:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"data.shape = {list(data.shape)} does not start with segment_ids.shape = {list(segment_ids.shape)}",
        )
    ids = segment_ids.reshape(-1)
    if ids.size and (ids.max() >= n):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"segment_ids[{int(np.argmax(ids >= n))}] = {int(ids[ids >= n][0])} is out of range [0, {n})",
        )
    inner = data.shape[segment_ids.ndim :]
    out = np.zeros((n,) + inner, dtype=data.dtype)
    keep = ids >= 0  # TF drops negative ids
    np.add.at(out, ids[keep], data.reshape((ids.size,) + inner)[keep])
    return out


@register_kernel("DynamicStitch")
def dynamic_stitch(ctx, *args):
    n = len(args) // 2
    indices, data = args[:n], args[n:]
    inner = None
    for ind, dat in zip(indices, data):
        if dat.shape[: ind.ndim] != ind.shape:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"data.shape {list(dat.shape)} does not start with indices.shape {list(ind.shape)}",
            )
        inner = dat.shape[ind.ndim :] if inner is None else inner
    rows = max((int(i.max()) + 1 if i.size else 0) for i in indices)
    out = np.zeros((rows,) + inner, dtype=data[0].dtype)
    for ind, dat in zip(indices, data):  # later pieces win, as in TF
        out[ind.reshape(-1)] = dat.reshape((ind.size,) + inner)
    return out


@register_kernel("InvertPermutation")
def invert_permutation(ctx, x):
    if x.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, f"invert_permutation expects a 1D vector, got shape {list(x.shape)}"
        )
    if not np.array_equal(np.sort(x), np.arange(x.size)):
        raise errors.InvalidArgumentError(
            None, None, f"{x.tolist()} is not a permutation of 0..{x.size - 1}"
        )
    out = np.empty_like(x)
    out[x] = np.arange(x.size, dtype=x.dtype)
    return out


@register_kernel("StridedSliceGrad")
def strided_slice_grad(ctx, shape, begin, end, strides, dy):
    """Zeros of `shape` with dy written where StridedSlice(begin, end, strides) read."""

    def ints(v):
        return [int(i) for i in np.asarray(v).reshape(-1)]

    shape = tuple(ints(shape))
    try:
        index = ss.build_index(ints(begin), ints(end), ints(strides), ctx.attrs)
        entries = ss.dense_entries(index, len(shape))
        ss.check_shrink(entries, list(shape))
    except ValueError as e:
        raise errors.InvalidArgumentError(None, None, str(e)) from None
    out = np.zeros(shape, dtype=dy.dtype)
    region = out[ss.numpy_index(entries)]
    if region.shape != dy.shape:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"dy has shape {list(dy.shape)} but the slice has shape {list(region.shape)}",
        )
    out[ss.numpy_index(entries)] = dy
    return out


@register_kernel("MirrorPadGrad")
def mirror_pad_grad(ctx, grad, paddings):
    """Folds the mirrored borders of `grad` back onto the cells they copied, axis by axis."""
    skip = 1 if ctx.attrs["mode"] == "REFLECT" else 0  # REFLECT does not repeat the edge cell
    g = np.asarray(grad)
    for axis, (before, after) in enumerate(np.asarray(paddings, np.int64)):
        before, after = int(before), int(after)
        n = g.shape[axis] - before - after
        if n < 0 or before > n - skip or after > n - skip:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"paddings {before}, {after} too large for dimension {axis} of the {ctx.attrs['mode']} pad",
            )
        index = [slice(None)] * g.ndim

        def part(lo, hi, _axis=axis, _index=index):
            view = list(_index)
            view[_axis] = slice(lo, hi)
            return tuple(view)

        core = g[part(before, before + n)].copy()
        if before:
            core[part(skip, skip + before)] += np.flip(g[part(0, before)], axis)
        if after:
            core[part(n - skip - after, n - skip)] += np.flip(
                g[part(before + n, before + n + after)], axis
            )
        g = core
    return g

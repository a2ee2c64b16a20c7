"""CPU kernels for the array row of Table 1: constants, creation, shape queries, reshaping,
joining/splitting, tiling, padding and reversing. Indexing kernels live in `array_index.py`.

Kernels return views of their inputs where NumPy can (reshape, transpose, basic slicing): inputs
are never written, so sharing is safe. The validation helpers are the shape functions' own
(`flowgraph.opdefs.array`), so static and run-time errors agree.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.core.shapes import TensorShape
from flowgraph.kernels.base import register_kernel
from flowgraph.opdefs import array as defs
from flowgraph.opdefs import array_join as join_defs


def invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def as_ints(value) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def scalar_int(value, what: str) -> int:
    value = np.asarray(value)
    if value.size != 1:
        raise invalid(f"{what} must be a scalar, got shape {shape_str(value.shape)}")
    return int(value.reshape(-1)[0])


def checked(fn, *args):
    """Calls a shape-function helper, turning its ValueError into InvalidArgumentError."""
    try:
        return fn(*args)
    except ValueError as e:
        raise invalid(str(e)) from None


def empty_value(dtype: np.dtype):
    """The zero of a dtype; TF's string tensors use the empty string."""
    return b"" if dtype == object else dtype.type(0)


# -- constants, placeholders, identity --------------------------------------------------------
@register_kernel("Const")
def const(ctx):
    return ctx.attrs["value"]


@register_kernel("Placeholder")
def placeholder(ctx):
    shape = ctx.attrs.get("shape")
    shape = (
        "<unknown>"
        if shape is None or shape.ndims is None
        else shape_str("?" if d is None else d for d in shape.as_list())
    )
    raise invalid(
        f"You must feed a value for placeholder tensor '{ctx.name}' with dtype "
        f"{ctx.attrs['dtype'].name} and shape {shape}"
    )


@register_kernel("PlaceholderWithDefault")
@register_kernel("Identity")
@register_kernel("StopGradient")
@register_kernel("Snapshot")
@register_kernel("PreventGradient")
def identity(ctx, x):
    return x


@register_kernel("IdentityN")
def identity_n(ctx, *xs):
    return tuple(xs)


@register_kernel("NoOp")
def no_op(ctx):
    return None


@register_kernel("EnsureShape")
def ensure_shape(ctx, x):
    want = ctx.attrs["shape"]
    if not want.is_compatible_with(TensorShape(np.shape(x))):
        raise invalid(
            f"Shape of tensor {ctx.name} {shape_str(np.shape(x))} is not compatible with "
            f"expected shape {shape_str('?' if d is None else d for d in want.as_list())}."
        )
    return x


# -- creation ---------------------------------------------------------------------------------
@register_kernel("Fill")
def fill(ctx, dims, value):
    value = np.asarray(value)
    if value.ndim != 0:
        raise invalid(f"value must be a scalar, got shape {shape_str(value.shape)}")
    if np.ndim(dims) != 1:
        raise invalid(f"dims must be a vector, got shape {shape_str(np.shape(dims))}")
    dims = as_ints(dims)
    if any(d < 0 for d in dims):
        raise invalid(f"Fill dimensions must be >= 0, got {dims}")
    return np.full(dims, value, dtype=value.dtype)


@register_kernel("ZerosLike")
def zeros_like(ctx, x):
    x = np.asarray(x)
    return np.full(x.shape, empty_value(x.dtype), dtype=x.dtype)


@register_kernel("OnesLike")
def ones_like(ctx, x):
    return np.ones_like(x)


@register_kernel("Range")
def range_(ctx, start, limit, delta):
    dtype = ctx.attrs["Tidx"].as_numpy_dtype
    for name, v in (("start", start), ("limit", limit), ("delta", delta)):
        if np.ndim(v) != 0:
            raise invalid(f"{name} must be a scalar, not shape {shape_str(np.shape(v))}")
    n = checked(defs.range_size, start[()], limit[()], delta[()], ctx.attrs["Tidx"].is_integer)
    if ctx.attrs["Tidx"].is_integer:
        return (np.arange(n, dtype=dtype) * dtype(delta) + dtype(start)).astype(dtype)
    # TF accumulates `value += delta` in T; a sequential cumsum in T gives the same rounding.
    steps = np.full(n, delta, dtype=dtype)
    if n:
        steps[0] = start
    return np.cumsum(steps, dtype=dtype)


@register_kernel("LinSpace")
def linspace(ctx, start, stop, num):
    num = scalar_int(num, "num")
    if num <= 0:
        raise invalid(f"Requires num > 0: {num}")
    dtype = np.asarray(start).dtype
    if num == 1:
        return np.asarray([start], dtype=dtype)
    step = (dtype.type(stop) - dtype.type(start)) / dtype.type(num - 1)
    out = (dtype.type(start) + np.arange(num, dtype=dtype) * step).astype(dtype)
    out[-1] = stop
    return out


# -- shape queries ----------------------------------------------------------------------------
@register_kernel("Shape")
def shape(ctx, x):
    return np.asarray(np.shape(x), dtype=ctx.attrs["out_type"].as_numpy_dtype)


@register_kernel("ShapeN")
def shape_n(ctx, *xs):
    out_type = ctx.attrs["out_type"].as_numpy_dtype
    return tuple(np.asarray(np.shape(x), dtype=out_type) for x in xs)


@register_kernel("Size")
def size(ctx, x):
    return np.asarray(np.size(x), dtype=ctx.attrs["out_type"].as_numpy_dtype)


@register_kernel("Rank")
def rank(ctx, x):
    return np.asarray(np.ndim(x), dtype=np.int32)


@register_kernel("BroadcastArgs")
def broadcast_args(ctx, s0, s1):
    try:
        out = np.broadcast_shapes(tuple(as_ints(s0)), tuple(as_ints(s1)))
    except ValueError:
        raise invalid(
            f"Incompatible shapes: {shape_str(as_ints(s0))} vs. {shape_str(as_ints(s1))}"
        ) from None
    return np.asarray(out, dtype=np.asarray(s0).dtype)


@register_kernel("BroadcastTo")
def broadcast_to(ctx, x, shape):
    target = as_ints(shape)
    x = np.asarray(x)
    if x.ndim > len(target):
        raise invalid(
            f"Rank of input ({x.ndim}) must be no greater than rank of output shape ({len(target)})."
        )
    try:
        return np.broadcast_to(x, target)
    except ValueError:
        raise invalid(
            f"Incompatible shapes: {shape_str(x.shape)} vs. {shape_str(target)}"
        ) from None


# -- reshaping --------------------------------------------------------------------------------
@register_kernel("Reshape")
def reshape(ctx, x, shape):
    dims = shape.tolist() if np.ndim(shape) == 1 else None
    if dims is not None and min(dims, default=0) >= -1:
        # NumPy's reshape resolves one -1 as TF does (it would take any negative size for -1,
        # hence the test); it refuses what TF refuses, and a -1 beside a 0 on an empty tensor,
        # which the checks below resolve, with TF's messages for the rest.
        try:
            return np.reshape(x, dims)
        except (ValueError, TypeError):
            pass
    if np.ndim(shape) != 1:
        raise invalid(f"sizes input must be 1-D, not {shape_str(np.shape(shape))}")
    dims = checked(defs.reshape_dims, np.size(x), as_ints(shape))
    return np.reshape(x, dims)


@register_kernel("Transpose")
def transpose(ctx, x, perm):
    perm = as_ints(perm)
    checked(defs.check_perm, perm, np.ndim(x))
    return np.transpose(x, perm)


@register_kernel("ConjugateTranspose")
def conjugate_transpose(ctx, x, perm):
    return np.conj(transpose(ctx, x, perm))


@register_kernel("ExpandDims")
def expand_dims(ctx, x, dim):
    axis = scalar_int(dim, "'dim' input")
    r = np.ndim(x)
    if not -r - 1 <= axis <= r:
        raise invalid(f"Tried to expand dim index {axis} for tensor with {r} dimensions.")
    return np.expand_dims(x, axis % (r + 1))


@register_kernel("Squeeze")
def squeeze(ctx, x):
    dims = list(np.shape(x))
    axes = checked(defs.squeeze_axes, dims, list(ctx.attrs["squeeze_dims"]))
    return np.squeeze(x, axis=tuple(axes))


# -- joining and splitting --------------------------------------------------------------------
def _concat(values, axis):
    first = np.shape(values[0])
    rank = len(first)
    if rank == 0:
        raise invalid("ConcatOp : Can't concatenate scalars (use tf.stack instead)")
    if not -rank <= axis < rank:
        raise invalid(
            f"ConcatOp : Expected concatenating dimensions in the range [{-rank}, {rank}), but got {axis}"
        )
    axis %= rank
    for i, v in enumerate(values[1:], 1):
        s = np.shape(v)
        if len(s) != rank:
            raise invalid(
                f"ConcatOp : Ranks of all input tensors should match: shape[0] = "
                f"{shape_str(first)} vs. shape[{i}] = {shape_str(s)}"
            )
        if any(a != b for j, (a, b) in enumerate(zip(first, s)) if j != axis):
            raise invalid(
                f"ConcatOp : Dimensions of inputs should match: shape[0] = "
                f"{shape_str(first)} vs. shape[{i}] = {shape_str(s)}"
            )
    return np.concatenate(values, axis=axis)


@register_kernel("ConcatV2")
def concat_v2(ctx, *args):
    return _concat(args[:-1], scalar_int(args[-1], "axis"))


@register_kernel("Concat")
def concat(ctx, axis, *values):
    return _concat(values, scalar_int(axis, "concat_dim"))


@register_kernel("ConcatOffset")
def concat_offset(ctx, concat_dim, *shapes):
    """Each input's start in the output of concatenating tensors of these shapes: zeros but
    along the concat axis, where it is the sum of the sizes before it."""
    first = np.asarray(shapes[0])
    if first.ndim != 1:
        raise invalid(f"input 0 should be a vector, got shape {shape_str(first.shape)}")
    rank = first.size
    axis = scalar_int(concat_dim, "concat_dim")
    if not -rank <= axis < rank:
        raise invalid(f"Concat dim is out of range: {axis} vs. {rank}")
    axis %= rank
    offsets, start = [], 0
    for i, shape in enumerate(shapes):
        shape = np.asarray(shape)
        others = np.arange(rank) != axis
        if shape.shape != (rank,) or np.any(shape[others] != first[others]):
            raise invalid(
                f"All dimensions except {axis} must match. Input {i} has shape "
                f"[{' '.join(map(str, shape.ravel()))}] and doesn't match input 0 with shape "
                f"[{' '.join(map(str, first))}]."
            )
        offset = np.zeros(rank, shape.dtype)
        offset[axis] = start
        offsets.append(offset)
        start += int(shape[axis])
    return tuple(offsets)


@register_kernel("Pack")
def pack(ctx, *values):
    first = np.shape(values[0])
    for i, v in enumerate(values[1:], 1):
        if np.shape(v) != first:
            raise invalid(
                f"Shapes of all inputs must match: values[0].shape = {shape_str(first)} != "
                f"values[{i}].shape = {shape_str(np.shape(v))}"
            )
    axis = checked(defs.canonical_axis, ctx.attrs["axis"], len(first) + 1)
    return np.stack(values, axis=axis)


@register_kernel("Unpack")
def unpack(ctx, x):
    num = ctx.attrs["num"]
    axis = checked(defs.canonical_axis, ctx.attrs["axis"], np.ndim(x))
    if np.shape(x)[axis] != num:
        raise invalid(
            f"Input shape axis {axis} must equal {num}, got shape {shape_str(np.shape(x))}"
        )
    return tuple(np.moveaxis(x, axis, 0))


@register_kernel("Split")
def split(ctx, split_dim, x):
    n = ctx.attrs["num_split"]
    axis = checked(defs.canonical_axis, scalar_int(split_dim, "split_dim"), np.ndim(x), "split_dim")
    if np.shape(x)[axis] % n:
        raise invalid(
            f"Number of ways to split should evenly divide the split dimension, but got "
            f"split_dim {axis} (size = {np.shape(x)[axis]}) and num_split {n}"
        )
    return tuple(np.split(x, n, axis=axis))


@register_kernel("SplitV")
def split_v(ctx, x, size_splits, split_dim):
    axis = checked(defs.canonical_axis, scalar_int(split_dim, "split_dim"), np.ndim(x), "split_dim")
    sizes = as_ints(size_splits)
    if len(sizes) != ctx.attrs["num_split"]:
        raise invalid(
            f"size_splits has {len(sizes)} entries but num_split is {ctx.attrs['num_split']}"
        )
    sizes = checked(join_defs.split_sizes, sizes, np.shape(x)[axis])
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


# -- tiling, padding, reversing ---------------------------------------------------------------
@register_kernel("Tile")
def tile(ctx, x, multiples):
    mult = as_ints(multiples)
    if len(mult) != np.ndim(x):
        raise invalid(
            f"Expected multiples argument to be a vector of length {np.ndim(x)} but got length {len(mult)}"
        )
    if any(m < 0 for m in mult):
        raise invalid(f"Expected multiples[i] >= 0, but got {mult}")
    return np.tile(x, mult)


def _paddings(x, paddings, mode=None) -> np.ndarray:
    p = np.asarray(paddings).astype(np.int64)
    checked(join_defs.check_paddings, p, list(np.shape(x)), mode)
    return p


@register_kernel("Pad")
def pad(ctx, x, paddings):
    x = np.asarray(x)
    return np.pad(x, _paddings(x, paddings), constant_values=empty_value(x.dtype))


@register_kernel("PadV2")
def pad_v2(ctx, x, paddings, constant_values):
    if np.ndim(constant_values) != 0:
        raise invalid(
            f"constant_values must be a scalar. Got: {shape_str(np.shape(constant_values))}"
        )
    return np.pad(x, _paddings(x, paddings), constant_values=constant_values[()])


@register_kernel("MirrorPad")
def mirror_pad(ctx, x, paddings):
    mode = ctx.attrs["mode"]
    return np.pad(x, _paddings(x, paddings, mode), mode=mode.lower())


@register_kernel("ReverseV2")
def reverse_v2(ctx, x, axis):
    r = np.ndim(x)
    axes = [checked(defs.canonical_axis, a, r) for a in as_ints(axis)]
    if len(set(axes)) != len(axes):
        dup = next(a for a in axes if axes.count(a) > 1)
        raise invalid(f"axis {dup} specified more than once.")
    return np.flip(x, axis=tuple(axes)) if axes else x


@register_kernel("ReverseSequence")
def reverse_sequence(ctx, x, seq_lengths):
    seq, batch = ctx.attrs["seq_dim"], ctx.attrs["batch_dim"]
    x = np.asarray(x)
    lengths = np.asarray(seq_lengths).astype(np.int64)
    if not (0 <= seq < x.ndim and 0 <= batch < x.ndim) or seq == batch:
        raise invalid(f"Invalid seq_dim {seq} or batch_dim {batch} for input of rank {x.ndim}")
    if lengths.shape != (x.shape[batch],):
        raise invalid(
            f"Length of seq_lengths != input.dims({batch}), ({lengths.shape[0]} vs. {x.shape[batch]})"
        )
    if (lengths > x.shape[seq]).any() or (lengths < 0).any():
        i = int(np.argmax((lengths > x.shape[seq]) | (lengths < 0)))
        raise invalid(f"seq_lens({i}) > input.dims({seq}) or negative: {lengths[i]}")
    # Position s of batch row b reads from lengths[b]-1-s when s < lengths[b], else from s.
    pos = np.arange(x.shape[seq]).reshape([-1 if d == seq else 1 for d in range(x.ndim)])
    lens = lengths.reshape([-1 if d == batch else 1 for d in range(x.ndim)])
    source = np.where(pos < lens, lens - 1 - pos, pos)
    return np.take_along_axis(x, source, axis=seq)


@register_kernel("Bitcast")
def bitcast(ctx, x):
    """The same bytes read as `type`: a view, as TF's Bitcast shares the buffer."""
    target = ctx.attrs["type"].as_numpy_dtype
    source_size, target_size = x.dtype.itemsize, np.dtype(target).itemsize
    x = x if x.flags.c_contiguous else x.copy()  # (ascontiguousarray would make 0-d 1-d)
    if source_size == target_size:
        return x.view(target)
    if source_size > target_size:
        return x.reshape(x.shape + (1,)).view(target)
    if x.ndim == 0 or x.shape[-1] != target_size // source_size:
        raise invalid(
            f"Cannot bitcast from {ctx.attrs['T'].name} to {ctx.attrs['type'].name}: shape "
            f"{shape_str(x.shape)}"
        )
    return x.view(target).reshape(x.shape[:-1])


@register_kernel("GuaranteeConst")
def guarantee_const(ctx, x):
    return x

"""OpDefs of the array row of Table 1 (TensorFlow's array_ops.cc): constants, placeholders,
identity, creation (Fill, Range, LinSpace), shape queries and reshaping. Joining, splitting,
tiling and padding ops are declared in `array_join.py`, indexing ops (Slice, StridedSlice,
Gather*, OneHot, ...) in `array_index.py`.

Shape functions fold what is known at construction time (constant axes, sizes, paddings) the way
TensorFlow's C++ shape functions do, so that `x.shape` is as precise as TF1's.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, broadcast_shape, unknown_shape
from flowgraph.opdefs.shape_fns import no_outputs, scalar, unchanged

_INDEX = "{int32, int64}"


# -- helpers shared by the shape functions below ----------------------------------------------
def const_int(ctx, i: int):
    """Input i as a Python int if it is a known scalar, else None."""
    value = ctx.input_constant(i)
    return None if value is None else int(np.asarray(value).reshape(-1)[0])


def canonical_axis(axis: int, rank: int, what: str = "axis") -> int:
    """`axis` in [-rank, rank) mapped to [0, rank); ValueError naming the valid range otherwise."""
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range: must be in [{-rank}, {rank})")
    return axis % rank if rank else 0


def dims_of(shape: TensorShape):
    """The dims as a list of int|None, or None for an unknown rank."""
    t = shape.as_tuple()
    return None if t is None else list(t)


# -- constants, placeholders, identity --------------------------------------------------------
def _placeholder_with_default_shape(ctx):
    shape, default = ctx.attrs["shape"], ctx.input_shapes[0]
    if not shape.is_compatible_with(default):
        raise ValueError(
            f"The default value's shape {default} is not compatible with the shape {shape}"
        )
    # TF keeps the declared (possibly less specific) shape: the placeholder may be fed.
    return shape


register_op(
    OpDef(
        "Const",
        outputs=["output: dtype"],
        attrs=["value: tensor", "dtype: type"],
        shape_fn=lambda ctx: TensorShape(ctx.attrs["value"].shape),
    )
)
register_op(
    OpDef(
        "Placeholder",
        outputs=["output: dtype"],
        attrs=["dtype: type", "shape: shape = None"],
        shape_fn=lambda ctx: ctx.attrs["shape"],
    )
)
register_op(
    OpDef(
        "PlaceholderWithDefault",
        inputs=["input: dtype"],
        outputs=["output: dtype"],
        attrs=["dtype: type", "shape: shape"],
        shape_fn=_placeholder_with_default_shape,
    )
)
for _op in ("Identity", "StopGradient", "Snapshot", "PreventGradient"):
    register_op(
        OpDef(
            _op,
            inputs=["input: T"],
            outputs=["output: T"],
            attrs=["T: type"] + (["message: string = ''"] if _op == "PreventGradient" else []),
            shape_fn=unchanged,
        )
    )
register_op(
    OpDef(
        "IdentityN",
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=["T: list(type) >= 1"],
        shape_fn=lambda ctx: list(ctx.input_shapes),
    )
)
register_op(OpDef("NoOp", shape_fn=no_outputs))


def _ensure_shape(ctx):
    want, have = ctx.attrs["shape"], ctx.input_shapes[0]
    if not want.is_compatible_with(have):
        raise ValueError(f"Shape of tensor {have} is not compatible with expected shape {want}")
    return want.merge_with(have)


register_op(
    OpDef(
        "EnsureShape",
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=["shape: shape", "T: type"],
        shape_fn=_ensure_shape,
    )
)


# -- creation ---------------------------------------------------------------------------------
def _fill_shape(ctx):
    ctx.input_shapes[0].with_rank(1)
    ctx.input_shapes[1].with_rank(0)
    value = ctx.input_constant(0)
    if value is not None and (np.asarray(value) < 0).any():
        raise ValueError(f"Fill dimensions must be >= 0, got {np.asarray(value).tolist()}")
    return ctx.input_as_shape(0)


register_op(
    OpDef(
        "Fill",
        inputs=["dims: index_type", "value: T"],
        outputs=["output: T"],
        attrs=["T: type", f"index_type: {_INDEX} = DT_INT32"],
        shape_fn=_fill_shape,
    )
)
register_op(
    OpDef("ZerosLike", inputs=["x: T"], outputs=["y: T"], attrs=["T: type"], shape_fn=unchanged)
)
register_op(
    OpDef(
        "OnesLike",
        inputs=["x: T"],
        outputs=["y: T"],
        attrs=[
            (
                "T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, int64, "
                "complex64, complex128, bool}"
            )
        ],
        shape_fn=unchanged,
    )
)


def range_size(start, limit, delta, is_int: bool) -> int:
    """The number of elements of Range(start, limit, delta); ValueError for a bad delta."""
    if delta == 0:
        raise ValueError("Requires delta != 0")
    if delta > 0 and start > limit:
        raise ValueError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    if delta < 0 and start < limit:
        raise ValueError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    if is_int:
        return int((abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta)))
    # In T, as TF computes it: float32 (0.3 - 0) / 0.1 rounds to 3.0, so range(0., .3, .1) has 3
    # elements (in float64 the same float32 values give 3.0000000119 and a 4th element).
    dtype = np.result_type(np.asarray(start), np.asarray(limit), np.asarray(delta))
    start, limit, delta = (np.asarray(v, dtype=dtype) for v in (start, limit, delta))
    with np.errstate(over="ignore"):
        return int(np.ceil(np.abs((limit - start) / delta)))


def _range_shape(ctx):
    for s in ctx.input_shapes:
        s.with_rank(0)
    values = [ctx.input_constant(i) for i in range(3)]
    if any(v is None for v in values):
        return unknown_shape(1)
    return TensorShape([range_size(*values, is_int=ctx.attrs["Tidx"].is_integer)])


register_op(
    OpDef(
        "Range",
        inputs=["start: Tidx", "limit: Tidx", "delta: Tidx"],
        outputs=["output: Tidx"],
        attrs=["Tidx: {bfloat16, half, float, double, int32, int64} = DT_INT32"],
        shape_fn=_range_shape,
    )
)


def _linspace_shape(ctx):
    ctx.input_shapes[0].with_rank(0)
    ctx.input_shapes[1].with_rank(0)
    ctx.input_shapes[2].with_rank(0)
    num = const_int(ctx, 2)
    if num is not None and num <= 0:
        raise ValueError(f"Requires num > 0: {num}")
    return TensorShape([num])


register_op(
    OpDef(
        "LinSpace",
        inputs=["start: T", "stop: T", "num: Tidx"],
        outputs=["output: T"],
        attrs=["T: {bfloat16, half, float, double}", f"Tidx: {_INDEX} = DT_INT32"],
        shape_fn=_linspace_shape,
    )
)


# -- shape queries ----------------------------------------------------------------------------
def _shape_shape(ctx):
    return [TensorShape([s.ndims]) for s in ctx.input_shapes]


register_op(
    OpDef(
        "Shape",
        inputs=["input: T"],
        outputs=["output: out_type"],
        attrs=["T: type", f"out_type: {_INDEX} = DT_INT32"],
        shape_fn=lambda ctx: _shape_shape(ctx)[0],
    )
)
register_op(
    OpDef(
        "ShapeN",
        inputs=["input: N * T"],
        outputs=["output: N * out_type"],
        attrs=["N: int >= 1", "T: type", f"out_type: {_INDEX} = DT_INT32"],
        shape_fn=_shape_shape,
    )
)
register_op(
    OpDef(
        "Size",
        inputs=["input: T"],
        outputs=["output: out_type"],
        attrs=["T: type", f"out_type: {_INDEX} = DT_INT32"],
        shape_fn=scalar,
    )
)
register_op(
    OpDef(
        "Rank", inputs=["input: T"], outputs=["output: int32"], attrs=["T: type"], shape_fn=scalar
    )
)


def _broadcast_args_shape(ctx):
    a, b = (s.with_rank(1) for s in ctx.input_shapes)
    if a[0].value is None or b[0].value is None:
        return unknown_shape(1)
    return TensorShape([max(a[0].value, b[0].value)])


register_op(
    OpDef(
        "BroadcastArgs",
        inputs=["s0: T", "s1: T"],
        outputs=["r0: T"],
        attrs=[f"T: {_INDEX} = DT_INT32"],
        shape_fn=_broadcast_args_shape,
    )
)


def _broadcast_to_shape(ctx):
    target = ctx.input_as_shape(1)
    source = ctx.input_shapes[0]
    if target.ndims is not None and source.ndims is not None:
        if source.ndims > target.ndims:
            raise ValueError(
                f"Rank of input ({source.ndims}) must be no greater than rank of output shape ({target.ndims})"
            )
        merged = broadcast_shape(source, target)  # raises on a definite mismatch
        if not merged.is_compatible_with(target):
            raise ValueError(
                f"Unable to broadcast tensor of shape {source} to tensor of shape {target}"
            )
    return target


register_op(
    OpDef(
        "BroadcastTo",
        inputs=["input: T", "shape: Tidx"],
        outputs=["output: T"],
        attrs=["T: type", f"Tidx: {_INDEX} = DT_INT32"],
        shape_fn=_broadcast_to_shape,
    )
)


# -- reshaping --------------------------------------------------------------------------------
def reshape_dims(n_in, target: list) -> list:
    """Resolves one -1 in `target` given the input's element count `n_in` (int or None)."""
    if sum(1 for d in target if d == -1) > 1:
        raise ValueError(f"Cannot infer multiple unknown dimensions in shape {target}")
    if any(d < -1 for d in target):
        raise ValueError(
            f"Size {target.index(min(target))} must be non-negative, not {min(target)}"
        )
    known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
    if n_in is None:
        return [None if d == -1 else d for d in target]
    if -1 in target:
        if known == 0 or n_in % known:
            if known == 0 and n_in == 0:
                return [0 if d == -1 else d for d in target]
            raise ValueError(
                f"Cannot reshape a tensor with {n_in} elements to shape {target} "
                f"(a multiple of {known} elements)"
            )
        return [n_in // known if d == -1 else d for d in target]
    if known != n_in:
        raise ValueError(
            f"Cannot reshape a tensor with {n_in} elements to shape {target} ({known} elements)"
        )
    return list(target)


def _reshape_shape(ctx):
    source = ctx.input_shapes[0]
    value = ctx.input_constant(1)
    if value is not None:
        target = [int(d) for d in np.asarray(value).reshape(-1)]
        if np.ndim(value) != 1:
            raise ValueError(f"Shape must be rank 1 but is rank {np.ndim(value)}")
        return TensorShape(reshape_dims(source.num_elements(), target))
    return ctx.input_as_shape(1)


register_op(
    OpDef(
        "Reshape",
        inputs=["tensor: T", "shape: Tshape"],
        outputs=["output: T"],
        attrs=["T: type", f"Tshape: {_INDEX} = DT_INT32"],
        shape_fn=_reshape_shape,
    )
)


def check_perm(perm: list, rank: int) -> None:
    if len(perm) != rank:
        raise ValueError(
            f"transpose expects a vector of size {rank}. But input(1) is a vector of size {len(perm)}"
        )
    for axis in range(rank):
        if axis not in perm and axis - rank not in perm:
            raise ValueError(f"{axis} is missing from {{{','.join(str(p) for p in perm)}}}.")


def _transpose_shape(ctx):
    dims = dims_of(ctx.input_shapes[0])
    perm = ctx.input_constant(1)
    if perm is None:
        n = ctx.input_shapes[1].with_rank(1)[0].value
        return unknown_shape(len(dims) if dims is not None else n)
    perm = [int(p) for p in np.asarray(perm).reshape(-1)]
    if dims is None:
        return unknown_shape(len(perm))
    check_perm(perm, len(dims))
    return TensorShape([dims[p] for p in perm])


for _op in ("Transpose", "ConjugateTranspose"):
    register_op(
        OpDef(
            _op,
            inputs=["x: T", "perm: Tperm"],
            outputs=["y: T"],
            attrs=["T: type", f"Tperm: {_INDEX} = DT_INT32"],
            shape_fn=_transpose_shape,
        )
    )


def _expand_dims_shape(ctx):
    dims = dims_of(ctx.input_shapes[0])
    axis = const_int(ctx, 1)
    if dims is None or axis is None:
        return unknown_shape(None if dims is None else len(dims) + 1)
    if not -len(dims) - 1 <= axis <= len(dims):
        raise ValueError(
            f"Tried to expand dim index {axis} for tensor with {len(dims)} dimensions."
        )
    axis = axis % (len(dims) + 1)
    return TensorShape(dims[:axis] + [1] + dims[axis:])


register_op(
    OpDef(
        "ExpandDims",
        inputs=["input: T", "dim: Tdim"],
        outputs=["output: T"],
        attrs=["T: type", f"Tdim: {_INDEX} = DT_INT32"],
        shape_fn=_expand_dims_shape,
    )
)


def squeeze_axes(dims: list, axes: list) -> list:
    """The axes Squeeze removes; ValueError for an axis whose known size is not 1."""
    rank = len(dims)
    if not axes:
        return [i for i, d in enumerate(dims) if d == 1]
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise ValueError(f"Tried to squeeze dim index {a} for tensor with {rank} dimensions.")
        a %= rank
        if dims[a] is not None and dims[a] != 1:
            raise ValueError(f"Can not squeeze dim[{a}], expected a dimension of 1, got {dims[a]}")
        out.append(a)
    return out


def _squeeze_shape(ctx):
    dims = dims_of(ctx.input_shapes[0])
    axes = list(ctx.attrs["squeeze_dims"])
    if dims is None or (not axes and None in dims):
        return unknown_shape()
    drop = set(squeeze_axes(dims, axes))
    return TensorShape([d for i, d in enumerate(dims) if i not in drop])


register_op(
    OpDef(
        "Squeeze",
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=["T: type", "squeeze_dims: list(int) >= 0 = []"],
        shape_fn=_squeeze_shape,
    )
)


_BITCAST_TYPES = (
    "{bfloat16, half, float, double, int64, int32, uint8, uint16, uint32, uint64, int8, int16, "
    "complex64, complex128}"
)


def _bitcast_shape(ctx):
    """Same shape for equal sizes; a smaller output type adds a last dimension of the size
    ratio, a larger one consumes a last dimension that must equal it (TF's Bitcast)."""
    shape = ctx.input_shapes[0]
    source, target = ctx.attrs["T"].size, ctx.attrs["type"].size
    if source == target or shape.ndims is None:
        return shape if source == target else unknown_shape()
    if source > target:
        return shape.concatenate([source // target])
    dims = shape.with_rank_at_least(1).as_list()
    if dims[-1] is not None and dims[-1] != target // source:
        raise ValueError(
            f"Cannot bitcast due to shape. {dims[-1]} does not match {target // source}"
        )
    return TensorShape(dims[:-1])


register_op(
    OpDef(
        "Bitcast",
        inputs=["input: T"],
        outputs=["output: type"],
        attrs=[f"T: {_BITCAST_TYPES}", f"type: {_BITCAST_TYPES}"],
        shape_fn=_bitcast_shape,
    )
)
register_op(
    OpDef(
        "GuaranteeConst",  # a promise that the input never changes; the value passes through
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=["T: type"],
        shape_fn=unchanged,
        is_stateful=True,
    )
)

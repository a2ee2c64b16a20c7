"""Array ops (Table 1 "Array operations"): constants, placeholders, identity, creation, shapes,
reshaping, joining, splitting, tiling, padding, and the grouping helpers `tuple` and `group`.
Indexing wrappers (slicing, `Tensor.__getitem__`, gather, one_hot, ...) are in `array_index.py`
and re-exported here.

Wrappers follow TF1's signatures, defaults and naming (`zeros`, `concat`, `stack/...`). Where TF1
folds a statically known result into a constant (`tf.shape` of a fully defined shape, small
`tf.zeros`), so do we, so that imported and exported graphs look alike.
"""

from __future__ import annotations

import builtins

import numpy as np

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape, as_shape, broadcast_shape
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import apply_op, graph_of
from flowgraph.framework.convert import (
    constant,
    constant_value,
    convert_to_tensor,
)
from flowgraph.framework.operation import Operation, Tensor
from flowgraph.ops.autopacking import contains_tensor  # (importing registers the conversions)

__all__ = [
    "bitcast",
    "broadcast_dynamic_shape",
    "broadcast_static_shape",
    "broadcast_to",
    "concat",
    "constant",
    "convert_to_tensor",
    "ensure_shape",
    "expand_dims",
    "fill",
    "group",
    "guarantee_const",
    "identity",
    "identity_n",
    "lin_space",
    "linspace",
    "newaxis",
    "no_op",
    "ones",
    "ones_like",
    "pad",
    "placeholder",
    "placeholder_with_default",
    "range",
    "rank",
    "reshape",
    "reverse",
    "reverse_sequence",
    "reverse_v2",
    "shape",
    "shape_n",
    "size",
    "split",
    "squeeze",
    "stack",
    "stop_gradient",
    "tile",
    "transpose",
    "tuple",
    "unstack",
    "zeros",
    "zeros_like",
]

newaxis = None  # tf.newaxis: `x[:, tf.newaxis]` inserts a dimension of size 1


def name_scope(name, default_name, values=()):
    """TF1's `name_scope(name, default_name, values)`: a scope in the graph of `values`."""
    return graph_of(list(values)).name_scope(name or default_name)


def index_tensor(value, name=None) -> Tensor:
    """A shape/axis/size argument as a Tensor; Python values (even `[]`) become int32."""
    return convert_to_tensor(value, name=name, preferred_dtype=dtypes.int32)


# -- constants, placeholders, identity --------------------------------------------------------
def placeholder(dtype, shape=None, name=None):
    """A tensor that must be fed. Example: x = placeholder(tf.float32, [None, 784])."""
    shape = TensorShape(None) if shape is None else as_shape(shape)
    return apply_op(
        "Placeholder", [], name=name, dtype=dtypes.as_dtype(dtype), shape=shape
    ).outputs[0]


def placeholder_with_default(input, shape, name=None):
    """Returns `input` unless this tensor is fed."""
    x = convert_to_tensor(input)
    return apply_op(
        "PlaceholderWithDefault", [x], name=name, dtype=x.dtype, shape=as_shape(shape)
    ).outputs[0]


def identity(input, name=None):
    """Returns a tensor with the same value (a new node: a place for control deps and devices)."""
    if hasattr(input, "_as_graph_element") and not hasattr(input, "op"):
        input = input._as_graph_element()
    return apply_op("Identity", [input], name=name).outputs[0]


def identity_n(input, name=None):
    """Identity over a list of tensors of any dtypes, as one op."""
    return apply_op("IdentityN", [list(input)], name=name).outputs


def stop_gradient(input, name=None):
    """Passes `input` through; tf.gradients treats it as a constant."""
    return apply_op("StopGradient", [input], name=name).outputs[0]


def no_op(name=None):
    """An op that does nothing; useful as a control-dependency target."""
    return apply_op("NoOp", [], name=name)


def ensure_shape(x, shape, name=None):
    """Checks at run time that `x` has a shape compatible with `shape`, and sets it statically."""
    return apply_op("EnsureShape", [x], name=name, shape=as_shape(shape)).outputs[0]


# -- creation ---------------------------------------------------------------------------------
def _filled(value, shape, dtype, name, default_name):
    dtype = dtypes.as_dtype(dtype).base_dtype
    with name_scope(name, default_name, [shape] if isinstance(shape, Tensor) else []) as scope:
        if not isinstance(shape, Tensor) and not contains_tensor(shape):
            dims = as_shape(shape)
            if not dims.is_fully_defined():
                raise ValueError(f"Cannot create a tensor of partially known shape {dims}")
            if dims.num_elements() < 1000:  # small: a Const, like TF1's _constant_if_small
                return constant(value, dtype=dtype, shape=dims.as_list(), name=scope)
            shape = constant(
                dims.as_list(),
                dtype=dtypes.int32 if max(dims.as_list() + [0]) < 2**31 else dtypes.int64,
                name="shape_as_tensor",
            )
        shape = index_tensor(shape)
        if shape.shape.ndims == 0:
            shape = reshape(shape, [-1])
        return fill(shape, constant(value, dtype=dtype), name=scope)


def _zero(dtype):
    dtype = dtypes.as_dtype(dtype)
    return False if dtype.is_bool else ("" if dtype == dtypes.string else 0)


def zeros(shape, dtype=dtypes.float32, name=None):
    """A tensor of `shape` filled with zeros ('' for strings, False for bools)."""
    return _filled(_zero(dtype), shape, dtype, name, "zeros")


def ones(shape, dtype=dtypes.float32, name=None):
    """A tensor of `shape` filled with ones (True for bools)."""
    if dtypes.as_dtype(dtype) == dtypes.string:
        raise TypeError("ones does not support dtype string")
    return _filled(True if dtypes.as_dtype(dtype).is_bool else 1, shape, dtype, name, "ones")


def zeros_like(tensor, dtype=None, name=None, optimize=True):
    """Zeros with the shape of `tensor` (and its dtype unless `dtype` is given).

    With `optimize` and a fully known shape the result is a constant, as in TF1.
    """
    with name_scope(name, "zeros_like", [tensor]) as scope:
        x = convert_to_tensor(tensor, name="tensor")
        dtype = x.dtype.base_dtype if dtype is None else dtypes.as_dtype(dtype).base_dtype
        if optimize and x.shape.is_fully_defined() and x.dtype != dtypes.variant:
            return zeros(x.shape.as_list(), dtype=dtype, name=scope)
        if dtype != x.dtype.base_dtype:
            return zeros(shape(x), dtype=dtype, name=scope)
        return apply_op("ZerosLike", [x], name=scope).outputs[0]


def ones_like(tensor, dtype=None, name=None, optimize=True):
    """Ones with the shape of `tensor` (and its dtype unless `dtype` is given)."""
    with name_scope(name, "ones_like", [tensor]) as scope:
        x = convert_to_tensor(tensor, name="tensor")
        dtype = x.dtype.base_dtype if dtype is None else dtypes.as_dtype(dtype).base_dtype
        if optimize and x.shape.is_fully_defined():
            return ones(x.shape.as_list(), dtype=dtype, name=scope)
        if dtype != x.dtype.base_dtype:
            return ones(shape(x), dtype=dtype, name=scope)
        return apply_op("OnesLike", [x], name=scope).outputs[0]


def fill(dims, value, name=None):
    """A tensor of shape `dims` filled with the scalar `value`. Example: fill([2, 3], 9)."""
    return apply_op("Fill", [index_tensor(dims), value], name=name).outputs[0]


_RANGE_ORDER = [dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64]


def range_(start, limit=None, delta=1, dtype=None, name="range"):
    """[start, start + delta, ...) up to but excluding `limit`; `range(n)` is [0, n).

    The dtype is `dtype`, else the widest of the arguments' (int32 < int64 < float32 < float64).
    """
    if limit is None:
        start, limit = 0, start
    with name_scope(name, "Range", [start, limit, delta]) as scope:
        args = [
            convert_to_tensor(v, dtype=dtype, name=n)
            for v, n in zip((start, limit, delta), ("start", "limit", "delta"))
        ]
        if dtype is None:
            kinds = [a.dtype.base_dtype for a in args]
            widest = builtins.max(
                kinds, key=lambda d: _RANGE_ORDER.index(d) if d in _RANGE_ORDER else -1
            )
            args = [_cast(a, widest) for a in args]
        return apply_op("Range", args, name=scope).outputs[0]


def _cast(x: Tensor, dtype) -> Tensor:
    if x.dtype.base_dtype == dtype:
        return x
    value = constant_value(x)
    if value is not None and x.op.type == "Const":
        return constant(np.asarray(value).astype(dtype.as_numpy_dtype), dtype=dtype)
    return apply_op("Cast", [x], SrcT=x.dtype.base_dtype, DstT=dtype).outputs[0]


def linspace(start, stop, num, name=None):
    """`num` evenly spaced values from `start` to `stop` inclusive (TF's LinSpace)."""
    start = convert_to_tensor(start)
    return apply_op("LinSpace", [start, stop, index_tensor(num)], name=name).outputs[0]


lin_space = linspace


# -- shape queries ----------------------------------------------------------------------------
def shape(input, name=None, out_type=dtypes.int32):
    """The shape of `input` as a 1-D tensor; a constant when the static shape is fully known."""
    x = convert_to_tensor(input)
    out_type = dtypes.as_dtype(out_type)
    if x.shape.is_fully_defined():
        return constant(x.shape.as_list(), dtype=out_type, name=name or "Shape")
    return apply_op("Shape", [x], name=name, out_type=out_type).outputs[0]


def shape_n(input, out_type=dtypes.int32, name=None):
    """The shapes of several tensors, as one ShapeN op."""
    return apply_op("ShapeN", [list(input)], name=name, out_type=dtypes.as_dtype(out_type)).outputs


def size(input, name=None, out_type=dtypes.int32):
    """The number of elements of `input` (a constant when statically known)."""
    x = convert_to_tensor(input)
    out_type = dtypes.as_dtype(out_type)
    if x.shape.is_fully_defined():
        return constant(x.shape.num_elements(), dtype=out_type, name=name or "Size")
    return apply_op("Size", [x], name=name, out_type=out_type).outputs[0]


def rank(input, name=None):
    """The number of dimensions of `input` (a constant when statically known)."""
    x = convert_to_tensor(input)
    if x.shape.ndims is not None:
        return constant(x.shape.ndims, dtype=dtypes.int32, name=name or "Rank")
    return apply_op("Rank", [x], name=name).outputs[0]


def broadcast_static_shape(shape_x, shape_y):
    """The broadcast of two TensorShapes; ValueError if they are incompatible."""
    return broadcast_shape(as_shape(shape_x), as_shape(shape_y))


def broadcast_dynamic_shape(shape_x, shape_y):
    """The broadcast of two shape vectors, computed in the graph (BroadcastArgs)."""
    return apply_op("BroadcastArgs", [shape_x, shape_y]).outputs[0]


def broadcast_to(input, shape, name=None):
    """Broadcasts `input` to `shape` with NumPy rules."""
    return apply_op("BroadcastTo", [input, index_tensor(shape)], name=name).outputs[0]


# -- reshaping --------------------------------------------------------------------------------
def reshape(tensor, shape, name=None):
    """Same elements, new shape; one dimension may be -1 (inferred)."""
    return apply_op("Reshape", [tensor, index_tensor(shape)], name=name).outputs[0]


def transpose(a, perm=None, name="transpose", conjugate=False):
    """Permutes dimensions (reversed if `perm` is None); `conjugate` also conjugates complex."""
    with name_scope(name, "transpose", [a]) as scope:
        x = convert_to_tensor(a, name="a")
        op = "ConjugateTranspose" if conjugate and x.dtype.is_complex else "Transpose"
        if perm is None:
            if x.shape.ndims is not None:
                perm = builtins.list(builtins.range(x.shape.ndims - 1, -1, -1))
            else:
                r = rank(x)
                perm = apply_op(
                    "Sub", [apply_op("Sub", [r, 1], name="sub").outputs[0], range_(0, r, 1)]
                ).outputs[0]
        return apply_op(op, [x, index_tensor(perm)], name=scope).outputs[0]


def expand_dims(input, axis=None, name=None, dim=None):
    """Inserts a dimension of size 1 at `axis` (TF1 also accepts the old name `dim`)."""
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    if axis is None:
        raise ValueError("Must specify an axis argument to tf.expand_dims()")
    return apply_op("ExpandDims", [input, index_tensor(axis)], name=name).outputs[0]


def squeeze(input, axis=None, name=None, squeeze_dims=None):
    """Removes dimensions of size 1 (all of them, or those in `axis`/`squeeze_dims`)."""
    if squeeze_dims is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'squeeze_dims' and 'axis'")
        axis = squeeze_dims
    if isinstance(axis, int):
        axis = [axis]
    return apply_op("Squeeze", [input], name=name, squeeze_dims=builtins.list(axis or [])).outputs[
        0
    ]


# -- joining and splitting --------------------------------------------------------------------
def concat(values, axis, name="concat"):
    """Concatenates tensors along `axis` (negative counts from the end)."""
    if not isinstance(values, (list, builtins.tuple)):
        values = [values]
    if len(values) == 1:  # TF1 checks the axis and returns an Identity
        with name_scope(name, "concat", values) as scope:
            convert_to_tensor(axis, dtypes.int32, name="concat_dim").shape.assert_has_rank(0)
            return identity(values[0], name=scope)
    return apply_op("ConcatV2", [builtins.list(values), index_tensor(axis)], name=name).outputs[0]


def stack(values, axis=0, name="stack"):
    """Packs rank-R tensors into one rank-(R+1) tensor along `axis`."""
    if axis == 0 and not contains_tensor(values):
        try:
            return convert_to_tensor(
                values, name=name
            )  # a constant list becomes a Const, as in TF1
        except (TypeError, ValueError):
            pass
    first = convert_to_tensor(values[0])
    if first.shape.ndims is not None:
        n = first.shape.ndims + 1
        if not -n <= axis < n:
            raise ValueError(f"axis = {axis} not in [{-n}, {n})")
    return apply_op("Pack", [builtins.list(values)], name=name, axis=axis).outputs[0]


def unstack(value, num=None, axis=0, name="unstack"):
    """Splits a tensor into its slices along `axis`; `num` is inferred from the static shape."""
    x = convert_to_tensor(value)
    if num is None:
        if x.shape.ndims is None:
            raise ValueError(f"Cannot infer num from shape {x.shape}")
        if not -x.shape.ndims <= axis < x.shape.ndims:
            raise ValueError(f"axis = {axis} not in [{-x.shape.ndims}, {x.shape.ndims})")
        num = x.shape[axis].value
        if num is None:
            raise ValueError(f"Cannot infer num from shape {x.shape}")
    return apply_op("Unpack", [x], name=name, num=num, axis=axis).outputs


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """Splits into `num_or_size_splits` equal parts (Split) or parts of the given sizes (SplitV,
    one size may be -1)."""
    if isinstance(num_or_size_splits, (int, np.integer)) and not isinstance(
        num_or_size_splits, bool
    ):
        return apply_op(
            "Split", [index_tensor(axis), value], name=name, num_split=int(num_or_size_splits)
        ).outputs
    sizes = index_tensor(num_or_size_splits, name="size_splits")
    if num is None:
        sizes.shape.with_rank(1)
        num = sizes.shape[0].value
        if num is None:
            raise ValueError(f"Cannot infer num from shape {sizes.shape}")
    return apply_op("SplitV", [value, sizes, index_tensor(axis)], name=name, num_split=num).outputs


# -- tiling, padding, reversing ---------------------------------------------------------------
def tile(input, multiples, name=None):
    """Repeats `input` multiples[i] times along dimension i."""
    return apply_op("Tile", [input, index_tensor(multiples)], name=name).outputs[0]


def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    """Pads with `constant_values` (CONSTANT) or a mirror of the edges (REFLECT, SYMMETRIC)."""
    mode = str(mode).upper()
    paddings = index_tensor(paddings)
    if mode == "CONSTANT":
        if not isinstance(constant_values, Tensor) and np.all(np.asarray(constant_values) == 0):
            return apply_op("Pad", [tensor, paddings], name=name).outputs[0]
        x = convert_to_tensor(tensor)
        return apply_op("PadV2", [x, paddings, constant_values], name=name).outputs[0]
    if mode in ("REFLECT", "SYMMETRIC"):
        return apply_op("MirrorPad", [tensor, paddings], name=name, mode=mode).outputs[0]
    raise ValueError(f"Unknown padding mode: {mode}")


def reverse(tensor, axis, name=None):
    """Reverses the dimensions listed in `axis`."""
    return apply_op("ReverseV2", [tensor, index_tensor(axis)], name=name).outputs[0]


reverse_v2 = reverse


def reverse_sequence(
    input, seq_lengths, seq_axis=None, batch_axis=None, name=None, seq_dim=None, batch_dim=None
):
    """Reverses the first seq_lengths[b] elements along `seq_axis` of each batch entry b."""
    seq_axis = _alias(seq_axis, seq_dim, "seq_axis", "seq_dim")
    batch_axis = _alias(batch_axis, batch_dim, "batch_axis", "batch_dim")
    if seq_axis is None:
        raise ValueError("reverse_sequence requires seq_axis (or seq_dim)")
    lengths = convert_to_tensor(seq_lengths, preferred_dtype=dtypes.int64)
    return apply_op(
        "ReverseSequence",
        [input, lengths],
        name=name,
        seq_dim=seq_axis,
        batch_dim=0 if batch_axis is None else batch_axis,
    ).outputs[0]


def _alias(new, old, new_name, old_name):
    if old is not None and new is not None:
        raise ValueError(f"Cannot specify both '{new_name}' and '{old_name}'")
    return old if new is None else new


# -- grouping ---------------------------------------------------------------------------------
def _flatten(values) -> list:
    out = []
    for v in values:
        if isinstance(v, (list, builtins.tuple, set)):
            out.extend(_flatten(v))
        elif isinstance(v, dict):
            out.extend(_flatten(v.values()))
        elif v is not None:
            out.append(v)
    return out


def _as_op(v) -> Operation:
    if hasattr(v, "_as_graph_element") and not isinstance(v, (Tensor, Operation)):
        v = v._as_graph_element()
    if isinstance(v, Tensor):
        return v.op
    if isinstance(v, Operation):
        return v
    raise TypeError(f"Expected an Operation or a Tensor, got {v!r}")


def group(*inputs, **kwargs):
    """An op that runs after all `inputs`; with inputs on several devices, one NoOp per device
    gathers that device's inputs (TF1's grouping), and the result depends on those."""
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"Unknown keyword arguments: {', '.join(kwargs)}")
    ops = [_as_op(v) for v in _flatten(inputs)]
    graph = ops[0].graph if ops else default_graph.get()
    with graph.name_scope(name or "group_deps") as scope:
        if not ops:
            return no_op(name=scope)
        by_device: dict[str, list] = {}
        for op in ops:
            by_device.setdefault(op.device, []).append(op)
        if len(by_device) == 1:
            with graph.control_dependencies(ops):
                return no_op(name=scope)
        deps = []
        for device in sorted(by_device):
            with graph.device(device), graph.control_dependencies(by_device[device]):
                deps.append(no_op())
        with graph.control_dependencies(deps):
            return no_op(name=scope)


def tuple_(tensors, name=None, control_inputs=None):
    """Returns identities of `tensors` that are available only after all of them (and all
    `control_inputs`) have been computed."""
    tensors = builtins.list(tensors)
    gating = [t.op for t in tensors if t is not None]
    if control_inputs:
        for c in control_inputs:
            if isinstance(c, Tensor):
                c = c.op
            if not isinstance(c, Operation):
                raise TypeError(f"Control input must be Operation or Tensor: {c}")
            gating.append(c)
    with name_scope(name, "tuple", [t for t in tensors if t is not None]):
        gate = group(*gating)
        out = []
        for t in tensors:
            if t is None:
                out.append(None)
                continue
            graph = t.graph
            scopes = graph.name_scope("control_dependency"), graph.colocate_with(t.op)
            with scopes[0] as scope, scopes[1], graph.control_dependencies([gate]):
                out.append(identity(t, name=scope))
        return out


def bitcast(input, type, name=None):
    """The bytes of `input` read as `type` without copying: an equal-size type keeps the shape,
    a smaller one adds a last dimension, a larger one consumes a last dimension of the ratio.

    Example: tf.bitcast(tf.constant(1.0), tf.int32) is 1065353216
    """
    return apply_op("Bitcast", [input], name=name, type=dtypes.as_dtype(type)).outputs[0]


def guarantee_const(input, name=None):
    """`input`, with the promise that its value never changes during the session."""
    return apply_op("GuaranteeConst", [input], name=name).outputs[0]


range = range_
tuple = tuple_

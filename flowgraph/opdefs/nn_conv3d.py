"""OpDefs of 3-D convolution and pooling (TensorFlow's nn_ops.cc: Conv3D, its V2 backprops,
MaxPool3D, AvgPool3D and their gradients) over NDHWC or NCDHW tensors. The output geometry of
each spatial dim is convolution's `window_geometry`."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
from flowgraph.opdefs.nn_conv import window_geometry

_FLOATS = "{half, bfloat16, float, double}"
_PADDING = "padding: {'SAME', 'VALID'}"
_FORMAT = "data_format: {'NDHWC', 'NCDHW'} = 'NDHWC'"


def spatial_axes_3d(data_format: str) -> tuple[int, int, int, int]:
    """(depth, height, width, channel) axes of a 5-D tensor in `data_format`."""
    if data_format == "NDHWC":
        return 1, 2, 3, 4
    if data_format == "NCDHW":
        return 2, 3, 4, 1
    raise ValueError(f"Unknown data_format {data_format!r}: expected 'NDHWC' or 'NCDHW'")


def five(values, name: str, data_format: str) -> tuple[int, int, int]:
    """A 5-element attr (ksize/strides/dilations) as its 3 spatial values; ValueError unless the
    batch and channel entries are 1."""
    values = list(values)
    if len(values) != 5:
        raise ValueError(f"{name} attr must have 5 elements, got {len(values)}")
    *spatial, c = spatial_axes_3d(data_format)
    if values[0] != 1 or values[c] != 1:
        raise ValueError(f"{name} must be 1 in the batch and depth dimensions, got {values}")
    if min(values) < 1:
        raise ValueError(f"{name} must be positive, got {values}")
    return tuple(values[a] for a in spatial)


def to_ndhwc(dims: list, data_format: str) -> list:
    d, h, w, c = spatial_axes_3d(data_format)
    return [dims[0], dims[d], dims[h], dims[w], dims[c]]


def from_ndhwc(dims: list, data_format: str) -> TensorShape:
    n, d, h, w, c = dims
    return TensorShape([n, d, h, w, c] if data_format == "NDHWC" else [n, c, d, h, w])


def _windowed(ctx, in_shape: TensorShape, kernel, out_channels, dilated: bool):
    fmt = ctx.attrs["data_format"]
    dims = to_ndhwc(
        (in_shape if in_shape.ndims is not None else unknown_shape(5)).with_rank(5).as_list(), fmt
    )
    strides = five(ctx.attrs["strides"], "strides", fmt)
    dilations = five(ctx.attrs["dilations"], "dilations", fmt) if dilated else (1, 1, 1)
    out = [
        None if k is None else window_geometry(size, k, s, r, ctx.attrs["padding"])[0]
        for size, k, s, r in zip(dims[1:4], kernel, strides, dilations)
    ]
    return from_ndhwc([dims[0], *out, out_channels], fmt)


def _conv3d_shape(ctx) -> TensorShape:
    x, f = ctx.input_shapes
    filt = f.with_rank(5).as_list() if f.ndims is not None else [None] * 5
    if x.ndims is not None:
        in_c = to_ndhwc(x.with_rank(5).as_list(), ctx.attrs["data_format"])[4]
        if in_c is not None and filt[3] is not None and in_c != filt[3]:
            raise ValueError(
                f"Depth of input ({in_c}) must equal the filter's input depth ({filt[3]})"
            )
    return _windowed(ctx, x, filt[:3], filt[4], dilated=True)


def _pool3d_shape(ctx) -> TensorShape:
    fmt = ctx.attrs["data_format"]
    x = ctx.input_shapes[0]
    channels = None if x.ndims is None else to_ndhwc(x.with_rank(5).as_list(), fmt)[4]
    return _windowed(ctx, x, five(ctx.attrs["ksize"], "ksize", fmt), channels, dilated=False)


def _shape_from_input(i: int):
    """The output shape is the value of input i (a shape vector), when known."""

    def shape_fn(ctx) -> TensorShape:
        shape = ctx.input_as_shape(i)
        return shape if shape.ndims is not None else unknown_shape(5)

    return shape_fn


def _shape_of_input(i: int):
    return lambda ctx: ctx.input_shapes[i]


_CONV_ATTRS = [
    f"T: {_FLOATS}",
    "strides: list(int) >= 5",
    _PADDING,
    _FORMAT,
    "dilations: list(int) = [1, 1, 1, 1, 1]",
]
register_op(
    OpDef(
        "Conv3D",
        inputs=["input: T", "filter: T"],
        outputs=["output: T"],
        attrs=_CONV_ATTRS,
        shape_fn=_conv3d_shape,
    )
)
register_op(
    OpDef(
        "Conv3DBackpropInputV2",
        inputs=["input_sizes: Tshape", "filter: T", "out_backprop: T"],
        outputs=["output: T"],
        attrs=_CONV_ATTRS + ["Tshape: {int32, int64} = DT_INT32"],
        shape_fn=_shape_from_input(0),
    )
)
register_op(
    OpDef(
        "Conv3DBackpropFilterV2",
        inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
        outputs=["output: T"],
        attrs=_CONV_ATTRS,
        shape_fn=_shape_from_input(1),
    )
)

_POOL_ATTRS = ["ksize: list(int) >= 5", "strides: list(int) >= 5", _PADDING, _FORMAT]
register_op(
    OpDef(
        "MaxPool3D",
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=_POOL_ATTRS + ["T: {half, bfloat16, float}"],
        shape_fn=_pool3d_shape,
    )
)
register_op(
    OpDef(
        "MaxPool3DGrad",
        inputs=["orig_input: TInput", "orig_output: TInput", "grad: T"],
        outputs=["output: T"],
        attrs=_POOL_ATTRS
        + ["T: {half, bfloat16, float} = DT_FLOAT", "TInput: {half, bfloat16, float} = DT_FLOAT"],
        shape_fn=_shape_of_input(0),
    )
)
register_op(
    OpDef(
        "AvgPool3D",
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=_POOL_ATTRS + [f"T: {_FLOATS}"],
        shape_fn=_pool3d_shape,
    )
)
register_op(
    OpDef(
        "AvgPool3DGrad",
        inputs=["orig_input_shape: int32", "grad: T"],
        outputs=["output: T"],
        attrs=_POOL_ATTRS + [f"T: {_FLOATS}"],
        shape_fn=_shape_from_input(0),
    )
)

"""OpDefs of convolution and pooling (Table 1 "Neural-net building blocks"; TF's nn_ops.cc).

`window_geometry` is the one definition of TensorFlow's output size and padding for a sliding
window: the shape functions here and the CPU kernels both call it, so graph-time shapes and
run-time results cannot disagree.
"""

from __future__ import annotations

from flowgraph.core import registry
from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape

# register_conv registers for its callers' lines (here and in nn_conv3d.py): `flowgraph describe`
# names those.
registry.machinery(__file__)

_FLOATS = "{half, bfloat16, float, double}"
_POOL_TYPES = "{half, bfloat16, float, double, int32, int64, uint8, int16, int8, uint16}"
_PADDING = "padding: {'SAME', 'VALID'}"
_PADDING_EXPLICIT = "padding: {'SAME', 'VALID', 'EXPLICIT'}"
_FORMAT = "data_format: {'NHWC', 'NCHW'} = 'NHWC'"


def window_geometry(size, ksize, stride, dilation, padding, explicit=(0, 0)):
    """(output size, pad before, pad after) of one spatial dim, as TensorFlow computes them.

    SAME gives ceil(size / stride) outputs and pads the total shortfall with the smaller half
    *before* (TF's pad_before = total // 2; the extra cell goes after). VALID uses only windows
    that fit. EXPLICIT takes the pads given. `size` None (unknown) gives an unknown output.
    """
    effective = (ksize - 1) * dilation + 1
    if padding == "EXPLICIT":
        before, after = explicit
    elif padding == "VALID":
        before = after = 0
    elif padding == "SAME":
        if size is None:
            return None, None, None
        out = -(-size // stride)
        total = max((out - 1) * stride + effective - size, 0)
        return out, total // 2, total - total // 2
    else:
        raise ValueError(f"Unknown padding {padding!r}: expected 'SAME', 'VALID' or 'EXPLICIT'")
    if size is None:
        return None, before, after
    span = size + before + after - effective
    if span < 0:
        raise ValueError(
            f"Computed output size would be negative: input {size} (padded "
            f"{size + before + after}) "
            f"is smaller than the effective window {effective}"
        )
    return span // stride + 1, before, after


_LAYOUTS = {"NHWC": 1, "NCHW": 2, "NDHWC": 1, "NCDHW": 2}  # the first spatial axis of each


def spatial_axes(data_format: str) -> tuple[int, ...]:
    """The spatial axes of a tensor in `data_format`, then its channel axis: (h, w, c) of a 4-D
    format, (d, h, w, c) of a 5-D one. One definition for 2-D and 3-D windows, so each rank
    checks its attrs and shapes with the same code."""
    if data_format not in _LAYOUTS:
        raise ValueError(
            f"Unknown data_format {data_format!r}: expected one of {', '.join(_LAYOUTS)}"
        )
    first, rank = _LAYOUTS[data_format], len(data_format)
    return (*range(first, first + rank - 2), rank - 1 if first == 1 else 1)


def spatial_attr(values, name: str, data_format: str) -> tuple[int, ...]:
    """A per-axis attr (strides/ksize/dilations) as its spatial values, checking it has one entry
    per axis of `data_format` and 1 in the batch and channel entries."""
    values = list(values)
    if len(values) != len(data_format):
        raise ValueError(f"{name} attr must have {len(data_format)} elements, got {len(values)}")
    *spatial, c = spatial_axes(data_format)
    if values[0] != 1 or values[c] != 1:
        raise ValueError(
            f"Current implementation does not yet support {name} in the batch and depth dimensions."
        )
    if min(values) < 1:
        raise ValueError(f"{name} must be positive, got {values}")
    return tuple(values[a] for a in spatial)


def _explicit_pads(ctx, data_format):
    """The (before, after) pads of each spatial axis: the EXPLICIT padding's attr, else zeros."""
    pads = list(ctx.attrs.get("explicit_paddings", []) or [])
    *spatial, c = spatial_axes(data_format)
    if ctx.attrs["padding"] != "EXPLICIT":
        if pads:
            raise ValueError("explicit_paddings must be empty unless padding is 'EXPLICIT'")
        return [(0, 0)] * len(spatial)
    if len(pads) != 2 * len(data_format):
        raise ValueError(
            f"explicit_paddings must have {2 * len(data_format)} entries, got {len(pads)}"
        )
    if pads[0] or pads[1] or pads[2 * c] or pads[2 * c + 1]:
        raise ValueError("explicit_paddings in the batch and depth dimensions must be 0")
    if min(pads) < 0:
        raise ValueError(f"explicit_paddings must be non-negative, got {pads}")
    return [(pads[2 * a], pads[2 * a + 1]) for a in spatial]


def to_channels_last(shape: TensorShape, data_format: str) -> list:
    """The dims of `shape` (unknown: all None) as [batch, *spatial, channels]."""
    rank = len(data_format)
    dims = shape.with_rank(rank).as_list()
    return [dims[0]] + [dims[a] for a in spatial_axes(data_format)]


def from_channels_last(dims: list, data_format: str) -> TensorShape:
    """[batch, *spatial, channels] as the shape of a tensor in `data_format`."""
    if spatial_axes(data_format)[-1] == 1:
        return TensorShape([dims[0], dims[-1], *dims[1:-1]])
    return TensorShape(dims)


def _windowed(ctx, in_shape, kernel, out_channels, strides_attr="strides", dilated=True):
    """Output shape of a conv/pool with window `kernel` (one size per spatial axis; None where
    unknown) over `in_shape`, for a 2-D or 3-D `data_format`."""
    fmt = ctx.attrs["data_format"]
    n, *sizes, _ = to_channels_last(in_shape, fmt)
    strides = spatial_attr(ctx.attrs[strides_attr], strides_attr, fmt)
    ones = (1,) * len(sizes)
    dilations = spatial_attr(ctx.attrs["dilations"], "dilations", fmt) if dilated else ones
    pads = _explicit_pads(ctx, fmt)
    out = [
        None if k is None else window_geometry(size, k, s, r, ctx.attrs["padding"], pad)[0]
        for size, k, s, r, pad in zip(sizes, kernel, strides, dilations, pads)
    ]
    return from_channels_last([n, *out, out_channels], fmt)


def _filter_dims(ctx, x):
    """The filter's dims (unknown: all None), checking its input depth against `x`'s channels."""
    f = ctx.input_shapes[1]
    rank = len(ctx.attrs["data_format"])
    filt = f.with_rank(rank).as_list() if f.ndims is not None else [None] * rank
    in_c = to_channels_last(x, ctx.attrs["data_format"])[-1]
    if in_c is not None and filt[-2] is not None and in_c != filt[-2]:
        raise ValueError(
            f"Depth of input ({in_c}) must equal the filter's input depth ({filt[-2]})"
        )
    return filt


def conv_shape(ctx):
    """Conv2D's and Conv3D's output: filter [*window, in_channels, out_channels]."""
    x = ctx.input_shapes[0]
    filt = _filter_dims(ctx, x)
    return _windowed(ctx, x, filt[:-2], filt[-1])


def _depthwise_shape(ctx):
    x = ctx.input_shapes[0]
    filt = _filter_dims(ctx, x)
    out_c = None if filt[2] is None or filt[3] is None else filt[2] * filt[3]
    return _windowed(ctx, x, filt[:2], out_c)


def pool_shape(ctx):
    """MaxPool's and AvgPool's (2-D and 3-D) output: the input's channels, windows of `ksize`."""
    x = ctx.input_shapes[0]
    fmt = ctx.attrs["data_format"]
    kernel = spatial_attr(ctx.attrs["ksize"], "ksize", fmt)
    return _windowed(ctx, x, kernel, to_channels_last(x, fmt)[-1], dilated=False)


def shape_from_input(i: int, rank: int):
    """The output shape is the value of input i (a shape vector) of `rank` elements."""

    def fn(ctx):
        return ctx.input_as_shape(i).with_rank(rank)

    return fn


def shape_of_input(i: int):
    """The output has input i's shape (a gradient of that input)."""

    def fn(ctx):
        return ctx.input_shapes[i]

    return fn


def register_conv(name, attrs, shape_fn, rank, suffix="", input_sizes=("int32", [])):
    """Registers the convolution `name` and its gradients `name`BackpropInput`suffix` (whose
    output shape is its `input_sizes` vector; `input_sizes` is that input's type and the attrs it
    adds) and `name`BackpropFilter`suffix` (shaped by `filter_sizes`): one family per op, so
    2-D, depthwise and 3-D convolutions declare their gradients alike."""
    sizes_type, sizes_attrs = input_sizes
    register_op(
        OpDef(
            name,
            inputs=["input: T", "filter: T"],
            outputs=["output: T"],
            attrs=attrs,
            shape_fn=shape_fn,
        )
    )
    register_op(
        OpDef(
            f"{name}BackpropInput{suffix}",
            inputs=[f"input_sizes: {sizes_type}", "filter: T", "out_backprop: T"],
            outputs=["output: T"],
            attrs=attrs + sizes_attrs,
            shape_fn=shape_from_input(0, rank),
        )
    )
    register_op(
        OpDef(
            f"{name}BackpropFilter{suffix}",
            inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
            outputs=["output: T"],
            attrs=attrs,
            shape_fn=shape_from_input(1, rank),
        )
    )


# DepthwiseConv2dNative's attrs; Conv2D's add use_cudnn_on_gpu after strides (TF's order).
_DEPTHWISE_ATTRS = [
    f"T: {_FLOATS}",
    "strides: list(int)",
    _PADDING_EXPLICIT,
    "explicit_paddings: list(int) = []",
    _FORMAT,
    "dilations: list(int) = [1, 1, 1, 1]",
]
_CONV_ATTRS = [*_DEPTHWISE_ATTRS[:2], "use_cudnn_on_gpu: bool = true", *_DEPTHWISE_ATTRS[2:]]
register_conv("Conv2D", _CONV_ATTRS, conv_shape, 4)
register_conv("DepthwiseConv2dNative", _DEPTHWISE_ATTRS, _depthwise_shape, 4)
# Conv2D and the element-wise ops after it, as TensorFlow's remapper fuses them (made by
# runtime/passes/remapper.py, users never do): `args` are the fused ops' other inputs (BiasAdd's
# bias), `fused_ops` their types in order.
register_op(
    OpDef(
        "_FusedConv2D",
        inputs=["input: T", "filter: T", "args: num_args * T"],
        outputs=["output: T"],
        attrs=[
            *_CONV_ATTRS,
            "num_args: int >= 0",
            "fused_ops: list(string) = []",
            "epsilon: float = 0.0001",
        ],
        shape_fn=conv_shape,
    )
)

_POOL_ATTRS = ["ksize: list(int) >= 4", "strides: list(int) >= 4", _PADDING, _FORMAT]
register_op(
    OpDef(
        "MaxPool",
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=[f"T: {_POOL_TYPES} = DT_FLOAT"] + _POOL_ATTRS,
        shape_fn=pool_shape,
    )
)
register_op(
    OpDef(
        "MaxPoolGrad",
        inputs=["orig_input: T", "orig_output: T", "grad: T"],
        outputs=["output: T"],
        attrs=["T: realnumbertypes = DT_FLOAT"] + _POOL_ATTRS,
        shape_fn=shape_of_input(0),
    )
)
# ReluGrad(MaxPoolGrad(x, y, grad), x) in one kernel (made by runtime/passes/remapper.py).
register_op(
    OpDef(
        "_FusedMaxPoolGrad",
        inputs=["orig_input: T", "orig_output: T", "grad: T"],
        outputs=["output: T"],
        attrs=["T: {half, float, double}"] + _POOL_ATTRS + ["fused_ops: list(string) = []"],
        shape_fn=shape_of_input(0),
    )
)
# MaxPool keeping a byte per output for its gradient, and that gradient (made by
# runtime/passes/pool_masks.py): the mask has the output's shape, or is empty (other windows).
register_op(
    OpDef(
        "_MaxPoolWithMask",
        inputs=["input: T"],
        outputs=["output: T", "mask: uint8"],
        attrs=["T: {float, double}"] + _POOL_ATTRS,
        shape_fn=lambda ctx: [pool_shape(ctx), unknown_shape()],
    )
)
register_op(
    OpDef(
        "_MaxPoolGradWithMask",
        inputs=["orig_input: T", "mask: uint8", "grad: T"],
        outputs=["output: T"],
        attrs=["T: {float, double}"] + _POOL_ATTRS + ["fused_ops: list(string) = []"],
        shape_fn=shape_of_input(0),
    )
)
register_op(
    OpDef(
        "MaxPoolGradGrad",
        inputs=["orig_input: T", "orig_output: T", "grad: T"],
        outputs=["output: T"],
        attrs=["T: realnumbertypes"] + _POOL_ATTRS,
        shape_fn=shape_of_input(1),
    )
)
register_op(
    OpDef(
        "AvgPool",
        inputs=["value: T"],
        outputs=["output: T"],
        attrs=[f"T: {_FLOATS}"] + _POOL_ATTRS,
        shape_fn=pool_shape,
    )
)
register_op(
    OpDef(
        "AvgPoolGrad",
        inputs=["orig_input_shape: int32", "grad: T"],
        outputs=["output: T"],
        attrs=[f"T: {_FLOATS}"] + _POOL_ATTRS,
        shape_fn=shape_from_input(0, 4),
    )
)

"""OpDefs of convolution and pooling (Table 1 "Neural-net building blocks"; TF's nn_ops.cc).

`window_geometry` is the one definition of TensorFlow's output size and padding for a sliding
window: the shape functions here and the CPU kernels both call it, so graph-time shapes and
run-time results cannot disagree.
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape

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


def spatial_axes(data_format: str) -> tuple[int, int, int]:
    """(height axis, width axis, channel axis) of a 4-D tensor in `data_format`."""
    if data_format == "NHWC":
        return 1, 2, 3
    if data_format == "NCHW":
        return 2, 3, 1
    raise ValueError(f"Unknown data_format {data_format!r}: expected 'NHWC' or 'NCHW'")


def _four(ctx, name, data_format):
    """A 4-element attr (strides/ksize/dilations) as (h, w), checking the batch/channel entries."""
    values = list(ctx.attrs[name])
    if len(values) != 4:
        raise ValueError(f"{name} attr must have 4 elements, got {len(values)}")
    h, w, c = spatial_axes(data_format)
    if values[0] != 1 or values[c] != 1:
        raise ValueError(
            f"Current implementation does not yet support {name} in the batch and depth dimensions."
        )
    if min(values) < 1:
        raise ValueError(f"{name} must be positive, got {values}")
    return values[h], values[w]


def _explicit_pads(ctx, data_format):
    pads = list(ctx.attrs.get("explicit_paddings", []) or [])
    if ctx.attrs["padding"] != "EXPLICIT":
        if pads:
            raise ValueError("explicit_paddings must be empty unless padding is 'EXPLICIT'")
        return (0, 0), (0, 0)
    if len(pads) != 8:
        raise ValueError(f"explicit_paddings must have 8 entries, got {len(pads)}")
    h, w, c = spatial_axes(data_format)
    if pads[0] or pads[1] or pads[2 * c] or pads[2 * c + 1]:
        raise ValueError("explicit_paddings in the batch and depth dimensions must be 0")
    if min(pads) < 0:
        raise ValueError(f"explicit_paddings must be non-negative, got {pads}")
    return (pads[2 * h], pads[2 * h + 1]), (pads[2 * w], pads[2 * w + 1])


def _nhwc(shape: TensorShape, data_format: str) -> list:
    dims = shape.with_rank(4).as_list()
    h, w, c = spatial_axes(data_format)
    return [dims[0], dims[h], dims[w], dims[c]]


def _from_nhwc(dims: list, data_format: str) -> TensorShape:
    n, h, w, c = dims
    return TensorShape([n, h, w, c] if data_format == "NHWC" else [n, c, h, w])


def _windowed(ctx, in_shape, kh, kw, out_channels, strides_attr="strides", dilated=True):
    """Output shape of a conv/pool with window (kh, kw) over `in_shape`."""
    fmt = ctx.attrs["data_format"]
    n, h, w, _ = _nhwc(in_shape, fmt)
    sh, sw = _four(ctx, strides_attr, fmt)
    dh, dw = _four(ctx, "dilations", fmt) if dilated else (1, 1)
    pad_h, pad_w = (
        _explicit_pads(ctx, fmt) if "explicit_paddings" in ctx.attrs else ((0, 0), (0, 0))
    )
    pad = ctx.attrs["padding"]
    oh = None if kh is None else window_geometry(h, kh, sh, dh, pad, pad_h)[0]
    ow = None if kw is None else window_geometry(w, kw, sw, dw, pad, pad_w)[0]
    return _from_nhwc([n, oh, ow, out_channels], fmt)


def _conv2d_shape(ctx):
    x, f = ctx.input_shapes
    fmt = ctx.attrs["data_format"]
    filt = f.with_rank(4).as_list() if f.ndims is not None else [None] * 4
    if x.ndims is None:
        x = unknown_shape(4)
    in_c = _nhwc(x, fmt)[3]
    if in_c is not None and filt[2] is not None and in_c != filt[2]:
        raise ValueError(f"Depth of input ({in_c}) must equal the filter's input depth ({filt[2]})")
    return _windowed(ctx, x, filt[0], filt[1], filt[3])


def _depthwise_shape(ctx):
    x, f = ctx.input_shapes
    fmt = ctx.attrs["data_format"]
    filt = f.with_rank(4).as_list() if f.ndims is not None else [None] * 4
    if x.ndims is None:
        x = unknown_shape(4)
    in_c = _nhwc(x, fmt)[3]
    if in_c is not None and filt[2] is not None and in_c != filt[2]:
        raise ValueError(f"Depth of input ({in_c}) must equal the filter's input depth ({filt[2]})")
    out_c = None if filt[2] is None or filt[3] is None else filt[2] * filt[3]
    return _windowed(ctx, x, filt[0], filt[1], out_c)


def _pool_shape(ctx):
    x = ctx.input_shapes[0]
    fmt = ctx.attrs["data_format"]
    if x.ndims is None:
        x = unknown_shape(4)
    kh, kw = _four(ctx, "ksize", fmt)
    return _windowed(ctx, x, kh, kw, _nhwc(x, fmt)[3], dilated=False)


def _shape_from_input(i):
    def fn(ctx):
        return ctx.input_as_shape(i).with_rank(4)

    return fn


def _shape_of_input(i):
    def fn(ctx):
        return ctx.input_shapes[i]

    return fn


_CONV_ATTRS = [
    f"T: {_FLOATS}",
    "strides: list(int)",
    "use_cudnn_on_gpu: bool = true",
    _PADDING_EXPLICIT,
    "explicit_paddings: list(int) = []",
    _FORMAT,
    "dilations: list(int) = [1, 1, 1, 1]",
]
register_op(
    OpDef(
        "Conv2D",
        inputs=["input: T", "filter: T"],
        outputs=["output: T"],
        attrs=_CONV_ATTRS,
        shape_fn=_conv2d_shape,
    )
)
register_op(
    OpDef(
        "Conv2DBackpropInput",
        inputs=["input_sizes: int32", "filter: T", "out_backprop: T"],
        outputs=["output: T"],
        attrs=_CONV_ATTRS,
        shape_fn=_shape_from_input(0),
    )
)
register_op(
    OpDef(
        "Conv2DBackpropFilter",
        inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
        outputs=["output: T"],
        attrs=_CONV_ATTRS,
        shape_fn=_shape_from_input(1),
    )
)

_DEPTHWISE_ATTRS = [
    f"T: {_FLOATS}",
    "strides: list(int)",
    _PADDING_EXPLICIT,
    "explicit_paddings: list(int) = []",
    _FORMAT,
    "dilations: list(int) = [1, 1, 1, 1]",
]
register_op(
    OpDef(
        "DepthwiseConv2dNative",
        inputs=["input: T", "filter: T"],
        outputs=["output: T"],
        attrs=_DEPTHWISE_ATTRS,
        shape_fn=_depthwise_shape,
    )
)
register_op(
    OpDef(
        "DepthwiseConv2dNativeBackpropInput",
        inputs=["input_sizes: int32", "filter: T", "out_backprop: T"],
        outputs=["output: T"],
        attrs=_DEPTHWISE_ATTRS,
        shape_fn=_shape_from_input(0),
    )
)
register_op(
    OpDef(
        "DepthwiseConv2dNativeBackpropFilter",
        inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
        outputs=["output: T"],
        attrs=_DEPTHWISE_ATTRS,
        shape_fn=_shape_from_input(1),
    )
)

_POOL_ATTRS = ["ksize: list(int) >= 4", "strides: list(int) >= 4", _PADDING, _FORMAT]
register_op(
    OpDef(
        "MaxPool",
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=[f"T: {_POOL_TYPES} = DT_FLOAT"] + _POOL_ATTRS,
        shape_fn=_pool_shape,
    )
)
register_op(
    OpDef(
        "MaxPoolGrad",
        inputs=["orig_input: T", "orig_output: T", "grad: T"],
        outputs=["output: T"],
        attrs=["T: realnumbertypes = DT_FLOAT"] + _POOL_ATTRS,
        shape_fn=_shape_of_input(0),
    )
)
register_op(
    OpDef(
        "MaxPoolGradGrad",
        inputs=["orig_input: T", "orig_output: T", "grad: T"],
        outputs=["output: T"],
        attrs=["T: realnumbertypes"] + _POOL_ATTRS,
        shape_fn=_shape_of_input(1),
    )
)
register_op(
    OpDef(
        "AvgPool",
        inputs=["value: T"],
        outputs=["output: T"],
        attrs=[f"T: {_FLOATS}"] + _POOL_ATTRS,
        shape_fn=_pool_shape,
    )
)
register_op(
    OpDef(
        "AvgPoolGrad",
        inputs=["orig_input_shape: int32", "grad: T"],
        outputs=["output: T"],
        attrs=[f"T: {_FLOATS}"] + _POOL_ATTRS,
        shape_fn=_shape_from_input(0),
    )
)

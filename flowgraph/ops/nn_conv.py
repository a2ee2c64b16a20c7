"""tf.nn convolution and pooling wrappers (Table 1 "Neural-net building blocks": Convolution,
MaxPool, AvgPool), with TF 1.15's signatures. Re-exported by `flowgraph.ops.nn`."""

from __future__ import annotations

import numpy as np

from flowgraph.framework.apply_op import apply_op, graph_of
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.ops import array as array_ops

__all__ = [
    "atrous_conv2d",
    "avg_pool",
    "avg_pool2d",
    "conv1d",
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "conv2d_transpose",
    "depthwise_conv2d",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_filter",
    "depthwise_conv2d_native_backprop_input",
    "max_pool",
    "max_pool2d",
    "separable_conv2d",
]

_FORMATS = {2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}  # by the number of spatial dims


def _check_format(data_format, rank=2):
    """`data_format`, checked to be one of the two layouts of `rank` spatial dims."""
    formats = _FORMATS[rank]
    if data_format not in formats:
        raise ValueError(
            f"data_format must be {formats[0]!r} or {formats[1]!r}, got {data_format!r}"
        )
    return data_format


def _sequence(value, n: int, data_format: str, name: str) -> list:
    """TF's _get_sequence: an int or a list of 1, n or n + 2 ints becomes the (n + 2)-element
    attr of a tensor with `n` spatial dims (1 for the batch and channel entries)."""
    if value is None:
        value = 1
    items = [value] if isinstance(value, (int, np.integer)) else list(value)
    if len(items) == n + 2:
        return [int(v) for v in items]
    if len(items) == 1:
        items = items * n
    if len(items) != n:
        raise ValueError(f"{name} should be of length 1, {n} or {n + 2} but was {len(items)}")
    items = [int(v) for v in items]
    return [1, *items, 1] if data_format.endswith("C") else [1, 1, *items]


def _padding(padding) -> str:
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return padding.upper()


def _padding_attrs(padding, data_format) -> dict:
    """'SAME'/'VALID', or TF's explicit list of (before, after) pairs, one pair per dimension."""
    if isinstance(padding, (list, tuple)):
        pairs = [list(p) for p in padding]
        if len(pairs) != 4 or any(len(p) != 2 for p in pairs):
            raise ValueError(f"explicit padding must be 4 (before, after) pairs, got {padding!r}")
        c = 3 if data_format == "NHWC" else 1
        if pairs[0] != [0, 0] or pairs[c] != [0, 0]:
            raise ValueError(
                f"explicit padding of the batch and channel dimensions must be 0, got {padding!r}"
            )
        return {"padding": "EXPLICIT", "explicit_paddings": [int(v) for p in pairs for v in p]}
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME', 'VALID' or a list of pairs, got {padding!r}")
    return {"padding": padding.upper()}


def _conv2d_op(op_type, inputs, strides, padding, data_format, dilations, name, **attrs):
    """A 2-D convolution op (forward or a backprop) with its strides, dilations, padding and
    data format checked and written as the OpDef's attrs."""
    data_format = _check_format(data_format)
    return apply_op(
        op_type,
        inputs,
        name=name,
        strides=_sequence(strides, 2, data_format, "strides"),
        data_format=data_format,
        dilations=_sequence(dilations, 2, data_format, "dilations"),
        **_padding_attrs(padding, data_format),
        **attrs,
    ).outputs[0]


def conv2d(
    input,
    filter=None,
    strides=None,
    padding=None,
    use_cudnn_on_gpu=True,
    data_format="NHWC",
    dilations=(1, 1, 1, 1),
    name=None,
    filters=None,
):
    """2-D convolution (cross-correlation) of a 4-D `input` with a [kh, kw, in, out] `filter`.

    Example: y = tf.nn.conv2d(images, w, strides=[1, 1, 1, 1], padding="SAME")
    """
    filter = _one_of(filter, filters, "filter", "filters")
    return _conv2d_op(
        "Conv2D",
        [input, filter],
        strides,
        padding,
        data_format,
        dilations,
        name,
        use_cudnn_on_gpu=bool(use_cudnn_on_gpu),
    )


def _one_of(a, b, name_a, name_b):
    if a is not None and b is not None:
        raise ValueError(f"Only one of '{name_a}' and '{name_b}' may be given")
    if a is None and b is None:
        raise ValueError(f"'{name_a}' is required")
    return a if a is not None else b


def conv2d_backprop_input(
    input_sizes,
    filter=None,
    out_backprop=None,
    strides=None,
    padding=None,
    use_cudnn_on_gpu=True,
    data_format="NHWC",
    dilations=(1, 1, 1, 1),
    name=None,
    filters=None,
):
    """The gradient of conv2d with respect to its input, whose shape is `input_sizes`."""
    filter = _one_of(filter, filters, "filter", "filters")
    return _conv2d_op(
        "Conv2DBackpropInput",
        [input_sizes, filter, out_backprop],
        strides,
        padding,
        data_format,
        dilations,
        name,
        use_cudnn_on_gpu=bool(use_cudnn_on_gpu),
    )


def conv2d_backprop_filter(
    input,
    filter_sizes,
    out_backprop,
    strides,
    padding,
    use_cudnn_on_gpu=True,
    data_format="NHWC",
    dilations=(1, 1, 1, 1),
    name=None,
):
    """The gradient of conv2d with respect to its filter, whose shape is `filter_sizes`."""
    return _conv2d_op(
        "Conv2DBackpropFilter",
        [input, filter_sizes, out_backprop],
        strides,
        padding,
        data_format,
        dilations,
        name,
        use_cudnn_on_gpu=bool(use_cudnn_on_gpu),
    )


def conv2d_transpose(
    value=None,
    filter=None,
    output_shape=None,
    strides=None,
    padding="SAME",
    data_format="NHWC",
    name=None,
    input=None,
    filters=None,
    dilations=None,
):
    """The transpose ("deconvolution") of conv2d: Conv2DBackpropInput with `value` as the gradient.

    `filter` is [kh, kw, output_channels, in_channels]; `output_shape` is the 4-D result shape.
    """
    value = _one_of(value, input, "value", "input")
    filter = _one_of(filter, filters, "filter", "filters")
    data_format = _check_format(data_format)
    graph = graph_of([value, filter])
    with graph.as_default(), graph.name_scope(name or "conv2d_transpose") as scope:
        if not hasattr(output_shape, "dtype"):
            output_shape = convert_to_tensor(
                np.asarray(output_shape, np.int32), name="output_shape"
            )
        channels = output_shape.shape.as_list()[0] if output_shape.shape.ndims == 1 else None
        if channels is not None and channels != 4:
            raise ValueError(f"output_shape must have shape (4,), got {output_shape.shape}")
        return conv2d_backprop_input(
            output_shape,
            filter,
            value,
            strides,
            padding,
            data_format=data_format,
            dilations=dilations if dilations is not None else 1,
            name=scope,
        )


def depthwise_conv2d_native(
    input, filter, strides, padding, data_format="NHWC", dilations=(1, 1, 1, 1), name=None
):
    """Per-channel convolution: filter [kh, kw, in, multiplier] gives in*multiplier channels."""
    return _conv2d_op(
        "DepthwiseConv2dNative", [input, filter], strides, padding, data_format, dilations, name
    )


def depthwise_conv2d_native_backprop_input(
    input_sizes,
    filter,
    out_backprop,
    strides,
    padding,
    data_format="NHWC",
    dilations=(1, 1, 1, 1),
    name=None,
):
    return _conv2d_op(
        "DepthwiseConv2dNativeBackpropInput",
        [input_sizes, filter, out_backprop],
        strides,
        padding,
        data_format,
        dilations,
        name,
    )


def depthwise_conv2d_native_backprop_filter(
    input,
    filter_sizes,
    out_backprop,
    strides,
    padding,
    data_format="NHWC",
    dilations=(1, 1, 1, 1),
    name=None,
):
    return _conv2d_op(
        "DepthwiseConv2dNativeBackpropFilter",
        [input, filter_sizes, out_backprop],
        strides,
        padding,
        data_format,
        dilations,
        name,
    )


def _rate(rate, dilations):
    if rate is not None and dilations is not None:
        raise ValueError("Only one of 'rate' and 'dilations' may be given")
    return rate if rate is not None else (dilations if dilations is not None else 1)


def depthwise_conv2d(
    input, filter, strides, padding, rate=None, name=None, data_format=None, dilations=None
):
    """Depthwise convolution; `rate` (or `dilations`) dilates the filter (atrous)."""
    data_format = data_format or "NHWC"
    graph = graph_of([input, filter])
    with graph.as_default(), graph.name_scope(name or "depthwise") as scope:
        return depthwise_conv2d_native(
            input,
            filter,
            strides,
            padding,
            data_format=data_format,
            dilations=_rate(rate, dilations),
            name=scope,
        )


def separable_conv2d(
    input,
    depthwise_filter,
    pointwise_filter,
    strides,
    padding,
    rate=None,
    name=None,
    data_format=None,
    dilations=None,
):
    """A depthwise convolution followed by a 1x1 (pointwise) convolution mixing channels."""
    data_format = data_format or "NHWC"
    graph = graph_of([input, depthwise_filter, pointwise_filter])
    with graph.as_default(), graph.name_scope(name or "separable_conv2d") as scope:
        depthwise = depthwise_conv2d_native(
            input,
            depthwise_filter,
            strides,
            padding,
            data_format=data_format,
            dilations=_rate(rate, dilations),
            name="depthwise",
        )
        return conv2d(
            depthwise, pointwise_filter, [1, 1, 1, 1], "VALID", data_format=data_format, name=scope
        )


def atrous_conv2d(value, filters, rate, padding, name=None):
    """Dilated convolution with stride 1 (TF implements it the same way, via dilations)."""
    if int(rate) < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    graph = graph_of([value, filters])
    with graph.as_default(), graph.name_scope(name or "atrous_conv2d") as scope:
        return conv2d(value, filters, [1, 1, 1, 1], padding, dilations=int(rate), name=scope)


def conv1d(
    value=None,
    filters=None,
    stride=None,
    padding=None,
    use_cudnn_on_gpu=None,
    data_format=None,
    name=None,
    input=None,
    dilations=None,
):
    """1-D convolution over [batch, width, channels] ('NWC') or 'NCW', as conv2d with height 1."""
    value = _one_of(value, input, "value", "input")
    data_format = data_format or "NWC"
    if data_format not in ("NWC", "NHWC", "NCW", "NCHW"):
        raise ValueError(f"data_format must be 'NWC' or 'NCW', got {data_format!r}")
    channels_last = data_format in ("NWC", "NHWC")
    spatial = 1 if channels_last else 2
    fmt = "NHWC" if channels_last else "NCHW"
    graph = graph_of([value, filters])
    with graph.as_default(), graph.name_scope(name or "conv1d") as scope:
        value = array_ops.expand_dims(value, spatial)
        filters = array_ops.expand_dims(filters, 0)
        result = conv2d(
            value,
            filters,
            [1, _width_entry(stride, "stride", spatial)],
            padding,
            use_cudnn_on_gpu=use_cudnn_on_gpu is not False,
            data_format=fmt,
            dilations=[1, _width_entry(dilations, "dilations", spatial)],
        )
        return array_ops.squeeze(result, [spatial], name=scope)


def _width_entry(value, name, spatial):
    """conv1d's stride/dilation: an int, or a list of 1 or 3 (batch, width, channels) ints."""
    if value is None:
        return 1
    items = [value] if isinstance(value, int) else list(value)
    if len(items) == 1:
        return int(items[0])
    if len(items) == 3:
        return int(items[spatial])
    raise ValueError(f"{name} should be an int or a list of 1 or 3 ints, got {value!r}")


def _pool(op_type, value, ksize, strides, padding, data_format, name, rank=2):
    """A max or average pooling op over `rank` spatial dims, its attrs checked as TF's wrappers
    check them (tf.nn.max_pool, max_pool3d, ...)."""
    data_format = _check_format(data_format, rank)
    padding = _padding(padding)
    return apply_op(
        op_type,
        [value],
        name=name,
        ksize=_sequence(ksize, rank, data_format, "ksize"),
        strides=_sequence(strides, rank, data_format, "strides"),
        padding=padding,
        data_format=data_format,
    ).outputs[0]


def max_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):
    """The maximum over each ksize window. Example: tf.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1],
    "SAME")"""
    value = _one_of(value, input, "value", "input")
    return _pool("MaxPool", value, ksize, strides, padding, data_format, name)


def avg_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):
    """The mean over each window; SAME padding's padded cells are not counted in the mean."""
    value = _one_of(value, input, "value", "input")
    return _pool("AvgPool", value, ksize, strides, padding, data_format, name)


def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
    return _pool("MaxPool", input, ksize, strides, padding, data_format, name)


def avg_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
    return _pool("AvgPool", input, ksize, strides, padding, data_format, name)

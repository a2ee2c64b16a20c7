"""3-D convolution and pooling with TF1's signatures: tf.nn.conv3d, conv3d_transpose,
conv3d_backprop_filter(_v2), max_pool3d, avg_pool3d, over [batch, depth, height, width,
channels] (NDHWC) or NCDHW volumes (video clips, medical scans).

Example:
    y = tf.nn.conv3d(clips, kernel, strides=[1, 1, 2, 2, 1], padding="SAME")
    y = tf.nn.max_pool3d(y, ksize=[1, 2, 2, 2, 1], strides=[1, 2, 2, 2, 1], padding="VALID")
"""

from __future__ import annotations

import numpy as np

from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.ops.nn_conv import _check_format, _one_of, _padding, _pool, _sequence

__all__ = [
    "avg_pool3d",
    "conv3d",
    "conv3d_backprop_filter",
    "conv3d_backprop_filter_v2",
    "conv3d_transpose",
    "max_pool3d",
]


def _conv_attrs(strides, padding, data_format, dilations) -> dict:
    data_format = _check_format(data_format, 3)
    return {
        "strides": _sequence(strides, 3, data_format, "strides"),
        "padding": _padding(padding),
        "data_format": data_format,
        "dilations": _sequence(dilations, 3, data_format, "dilations"),
    }


def conv3d(
    input,
    filter=None,
    strides=None,
    padding=None,
    data_format="NDHWC",
    dilations=(1, 1, 1, 1, 1),
    name=None,
    filters=None,
):
    """3-D convolution of `input` with `filter` [kd, kh, kw, in_channels, out_channels]."""
    filter = _one_of(filter, filters, "filter", "filters")
    attrs = _conv_attrs(strides, padding, data_format, dilations)
    return apply_op("Conv3D", [input, filter], name=name, **attrs).outputs[0]


def conv3d_backprop_filter_v2(
    input,
    filter_sizes,
    out_backprop,
    strides,
    padding,
    data_format="NDHWC",
    dilations=(1, 1, 1, 1, 1),
    name=None,
):
    """The gradient of conv3d with respect to a filter of shape `filter_sizes`."""
    attrs = _conv_attrs(strides, padding, data_format, dilations)
    return apply_op(
        "Conv3DBackpropFilterV2", [input, filter_sizes, out_backprop], name=name, **attrs
    ).outputs[0]


conv3d_backprop_filter = conv3d_backprop_filter_v2


def conv3d_transpose(
    value=None,
    filter=None,
    output_shape=None,
    strides=None,
    padding="SAME",
    data_format="NDHWC",
    name=None,
    input=None,
    filters=None,
    dilations=None,
):
    """The transpose of conv3d: Conv3DBackpropInputV2 with `value` as the gradient; `filter`
    is [kd, kh, kw, output_channels, in_channels] and `output_shape` the 5-D result shape."""
    value = _one_of(value, input, "value", "input")
    filter = _one_of(filter, filters, "filter", "filters")
    if not hasattr(output_shape, "dtype"):
        output_shape = convert_to_tensor(np.asarray(output_shape, np.int32), name="output_shape")
    if output_shape.shape.ndims == 1 and output_shape.shape[0].value not in (None, 5):
        raise ValueError(f"output_shape must have shape (5,), got {output_shape.shape}")
    attrs = _conv_attrs(strides, padding, data_format, dilations)
    return apply_op(
        "Conv3DBackpropInputV2",
        [output_shape, filter, value],
        name=name or "conv3d_transpose",
        **attrs,
    ).outputs[0]


def max_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):
    """The maximum over each ksize window of a 5-D volume."""
    return _pool("MaxPool3D", input, ksize, strides, padding, data_format, name, rank=3)


def avg_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):
    """The mean over each window; SAME padding's padded cells are not counted."""
    return _pool("AvgPool3D", input, ksize, strides, padding, data_format, name, rank=3)

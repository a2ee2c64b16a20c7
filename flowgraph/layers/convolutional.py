"""2-D convolution and pooling layers (TF1's tf.layers.Conv2D, MaxPooling2D, AveragePooling2D).

Arguments follow TF1: `kernel_size`, `strides`, `pool_size` and `dilation_rate` are an int or a
pair; `padding` is 'valid' or 'same' (any case); `data_format` is 'channels_last' (NHWC) or
'channels_first' (NCHW). The kernel variable is [kh, kw, in_channels, filters].
"""

from __future__ import annotations

from flowgraph.core.shapes import TensorShape
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.layers.base import Layer
from flowgraph.layers.core import _normalize_data_format
from flowgraph.ops import init_ops, nn_conv
from flowgraph.ops import nn as nn_ops

__all__ = [
    "AveragePooling2D",
    "Conv2D",
    "MaxPooling2D",
    "average_pooling2d",
    "conv2d",
    "max_pooling2d",
]


def _pair(value, name):
    """An int or a 2-sequence of ints as a tuple of 2 positive ints."""
    if isinstance(value, int):
        value = (value, value)
    try:
        value = tuple(int(v) for v in value)
    except TypeError:
        raise ValueError(
            f"The `{name}` argument must be a tuple of 2 integers. Received: {value!r}"
        ) from None
    if len(value) != 2 or any(v <= 0 for v in value):
        raise ValueError(
            f"The `{name}` argument must be a tuple of 2 positive integers. Received: {value!r}"
        )
    return value


def _padding(value):
    v = str(value).lower()
    if v not in ("valid", "same"):
        raise ValueError(
            f"The `padding` argument must be one of 'valid', 'same'. Received: {value!r}"
        )
    return v


def _output_length(length, window, padding, stride, dilation=1):
    if length is None:
        return None
    window = (window - 1) * dilation + 1
    if padding == "same":
        return (length + stride - 1) // stride
    return max(length - window + stride, 0) // stride


def _nn_format(data_format):
    return "NHWC" if data_format == "channels_last" else "NCHW"


def _spatial_shape(shape: TensorShape, data_format, out_hw, channels):
    dims = shape.with_rank(4).as_list()
    if data_format == "channels_last":
        return TensorShape([dims[0], out_hw[0], out_hw[1], channels])
    return TensorShape([dims[0], channels, out_hw[0], out_hw[1]])


class Conv2D(Layer):
    """2-D convolution: outputs = activation(conv2d(inputs, kernel) + bias)."""

    def __init__(
        self,
        filters,
        kernel_size,
        strides=(1, 1),
        padding="valid",
        data_format="channels_last",
        dilation_rate=(1, 1),
        activation=None,
        use_bias=True,
        kernel_initializer=None,
        bias_initializer=init_ops.zeros_initializer(),
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        trainable=True,
        name=None,
        **kwargs,
    ):
        super().__init__(
            trainable=trainable, name=name, activity_regularizer=activity_regularizer, **kwargs
        )
        self.filters = int(filters)
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.strides = _pair(strides, "strides")
        self.padding = _padding(padding)
        self.data_format = _normalize_data_format(data_format)
        self.dilation_rate = _pair(dilation_rate, "dilation_rate")
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise ValueError("strides > 1 not supported in conjunction with dilation_rate > 1")
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint

    def _channel_axis(self):
        return -1 if self.data_format == "channels_last" else 1

    def build(self, input_shape):
        input_shape = TensorShape(input_shape).with_rank(4)
        channels = input_shape[self._channel_axis()].value
        if channels is None:
            raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
        shape = [*self.kernel_size, channels, self.filters]
        self.kernel = self.add_weight(
            "kernel",
            shape,
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias",
                [self.filters],
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        self.built = True

    def call(self, inputs):
        fmt = _nn_format(self.data_format)
        strides = [1, 1, *self.strides] if fmt == "NCHW" else [1, *self.strides, 1]
        dilations = [1, 1, *self.dilation_rate] if fmt == "NCHW" else [1, *self.dilation_rate, 1]
        outputs = nn_conv.conv2d(
            inputs,
            self.kernel,
            strides=strides,
            padding=self.padding.upper(),
            data_format=fmt,
            dilations=dilations,
        )
        if self.use_bias:
            outputs = nn_ops.bias_add(outputs, self.bias, data_format=fmt)
        if self.activation is not None:
            return self.activation(outputs)
        return outputs

    def compute_output_shape(self, input_shape):
        shape = TensorShape(input_shape).with_rank(4)
        hw = shape.as_list()[1:3] if self.data_format == "channels_last" else shape.as_list()[2:]
        out = [
            _output_length(n, k, self.padding, s, d)
            for n, k, s, d in zip(hw, self.kernel_size, self.strides, self.dilation_rate)
        ]
        return _spatial_shape(shape, self.data_format, out, self.filters)


def conv2d(
    inputs,
    filters,
    kernel_size,
    strides=(1, 1),
    padding="valid",
    data_format="channels_last",
    dilation_rate=(1, 1),
    activation=None,
    use_bias=True,
    kernel_initializer=None,
    bias_initializer=init_ops.zeros_initializer(),
    kernel_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
    kernel_constraint=None,
    bias_constraint=None,
    trainable=True,
    name=None,
    reuse=None,
):
    """Functional Conv2D.

    Example: h = tf.layers.conv2d(x, 32, 5, padding="same", activation=tf.nn.relu)
    """
    layer = Conv2D(
        filters,
        kernel_size,
        strides=strides,
        padding=padding,
        data_format=data_format,
        dilation_rate=dilation_rate,
        activation=activation,
        use_bias=use_bias,
        kernel_initializer=kernel_initializer,
        bias_initializer=bias_initializer,
        kernel_regularizer=kernel_regularizer,
        bias_regularizer=bias_regularizer,
        activity_regularizer=activity_regularizer,
        kernel_constraint=kernel_constraint,
        bias_constraint=bias_constraint,
        trainable=trainable,
        name=name,
        _reuse=reuse,
        _scope=name,
    )
    return layer.apply(inputs)


class _Pooling2D(Layer):
    """Shared by the 2-D pooling layers: `pool_fn` is nn.max_pool or nn.avg_pool."""

    pool_fn_name = ""

    def __init__(
        self, pool_size, strides, padding="valid", data_format="channels_last", name=None, **kwargs
    ):
        super().__init__(name=name, **kwargs)
        self.pool_size = _pair(pool_size, "pool_size")
        self.strides = _pair(strides, "strides")
        self.padding = _padding(padding)
        self.data_format = _normalize_data_format(data_format)

    def call(self, inputs):
        inputs = convert_to_tensor(inputs)
        fmt = _nn_format(self.data_format)
        if fmt == "NHWC":
            ksize, strides = [1, *self.pool_size, 1], [1, *self.strides, 1]
        else:
            ksize, strides = [1, 1, *self.pool_size], [1, 1, *self.strides]
        pool = getattr(nn_conv, self.pool_fn_name)
        return pool(
            inputs, ksize=ksize, strides=strides, padding=self.padding.upper(), data_format=fmt
        )

    def compute_output_shape(self, input_shape):
        shape = TensorShape(input_shape).with_rank(4)
        dims = shape.as_list()
        hw, channels = (
            (dims[1:3], dims[3]) if self.data_format == "channels_last" else (dims[2:], dims[1])
        )
        out = [
            _output_length(n, k, self.padding, s)
            for n, k, s in zip(hw, self.pool_size, self.strides)
        ]
        return _spatial_shape(shape, self.data_format, out, channels)


class MaxPooling2D(_Pooling2D):
    """Max over `pool_size` windows every `strides` pixels."""

    pool_fn_name = "max_pool"


class AveragePooling2D(_Pooling2D):
    """Mean over `pool_size` windows ('same' padding averages only the in-bounds pixels)."""

    pool_fn_name = "avg_pool"


def max_pooling2d(
    inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
):
    """Functional MaxPooling2D. Example: h = tf.layers.max_pooling2d(h, 2, 2)"""
    layer = MaxPooling2D(pool_size, strides, padding=padding, data_format=data_format, name=name)
    return layer.apply(inputs)


def average_pooling2d(
    inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
):
    """Functional AveragePooling2D."""
    layer = AveragePooling2D(
        pool_size, strides, padding=padding, data_format=data_format, name=name
    )
    return layer.apply(inputs)

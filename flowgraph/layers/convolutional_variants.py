"""The other convolution and pooling layers of tf.layers (TF 1.15): 1-D convolution and pooling,
transposed 2-D convolution (the generator of a GAN), and depthwise-separable convolutions.

They share Conv2D's arguments and variable names (`kernel`, `bias`; separable layers own
`depthwise_kernel` and `pointwise_kernel`), so checkpoints name them as TensorFlow does.
"""

from __future__ import annotations

from flowgraph.core.shapes import TensorShape
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.layers.base import Layer
from flowgraph.layers.convolutional import (
    Conv2D,
    _nn_format,
    _output_length,
    _padding,
    _spatial_shape,
)
from flowgraph.layers.core import _normalize_data_format
from flowgraph.ops import array as array_ops
from flowgraph.ops import nn as nn_ops
from flowgraph.ops import nn_conv

__all__ = [
    "AveragePooling1D",
    "Conv1D",
    "Conv2DTranspose",
    "MaxPooling1D",
    "SeparableConv1D",
    "SeparableConv2D",
    "average_pooling1d",
    "conv1d",
    "conv2d_transpose",
    "max_pooling1d",
    "separable_conv1d",
    "separable_conv2d",
]


def _single(value, name):
    """An int or a 1-sequence as a positive int."""
    values = value if isinstance(value, (list, tuple)) else (value,)
    if len(values) != 1 or int(values[0]) <= 0:
        raise ValueError(f"The `{name}` argument must be a positive integer. Received: {value!r}")
    return int(values[0])


def _finish(layer, outputs, fmt):
    if layer.use_bias:
        outputs = nn_ops.bias_add(outputs, layer.bias, data_format=fmt)
    return layer.activation(outputs) if layer.activation is not None else outputs


class Conv1D(Conv2D):
    """1-D convolution over [batch, length, channels]: kernel [kernel_size, in, filters]."""

    def __init__(self, filters, kernel_size, strides=1, dilation_rate=1, **kwargs):
        super().__init__(filters, (_single(kernel_size, "kernel_size"), 1), **kwargs)
        self.kernel_size = (_single(kernel_size, "kernel_size"),)
        self.strides = (_single(strides, "strides"),)
        self.dilation_rate = (_single(dilation_rate, "dilation_rate"),)

    def build(self, input_shape):
        input_shape = TensorShape(input_shape).with_rank(3)
        channels = input_shape[self._channel_axis()].value
        if channels is None:
            raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
        self._build_weights([self.kernel_size[0], channels, self.filters])

    def _build_weights(self, kernel_shape):
        self.kernel = self.add_weight(
            "kernel",
            kernel_shape,
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
        fmt = "NWC" if self.data_format == "channels_last" else "NCW"
        outputs = nn_conv.conv1d(
            inputs,
            self.kernel,
            stride=self.strides[0],
            padding=self.padding.upper(),
            data_format=fmt,
            dilations=self.dilation_rate[0],
        )
        return _finish(self, outputs, _nn_format(self.data_format))

    def compute_output_shape(self, input_shape):
        dims = TensorShape(input_shape).with_rank(3).as_list()
        length = dims[1] if self.data_format == "channels_last" else dims[2]
        out = _output_length(
            length, self.kernel_size[0], self.padding, self.strides[0], self.dilation_rate[0]
        )
        if self.data_format == "channels_last":
            return TensorShape([dims[0], out, self.filters])
        return TensorShape([dims[0], self.filters, out])


def _deconv_length(length, kernel, padding, stride):
    if length is None:
        return None
    if padding == "valid":
        return length * stride + max(kernel - stride, 0)
    return length * stride


class Conv2DTranspose(Conv2D):
    """Transposed 2-D convolution ("deconvolution"): kernel [kh, kw, filters, in_channels];
    the output grows by `strides` (plus the kernel overhang with 'valid' padding)."""

    def __init__(self, filters, kernel_size, strides=(1, 1), **kwargs):
        if "dilation_rate" in kwargs:
            raise TypeError("Conv2DTranspose of tf.layers takes no dilation_rate argument")
        super().__init__(filters, kernel_size, strides=strides, **kwargs)

    def build(self, input_shape):
        input_shape = TensorShape(input_shape).with_rank(4)
        channels = input_shape[self._channel_axis()].value
        if channels is None:
            raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
        Conv1D._build_weights(self, [*self.kernel_size, self.filters, channels])

    def call(self, inputs):
        inputs = convert_to_tensor(inputs)
        fmt = _nn_format(self.data_format)
        shape = array_ops.shape(inputs)
        h_axis, w_axis = (1, 2) if fmt == "NHWC" else (2, 3)
        out_h, out_w = (
            _deconv_length(shape[axis], k, self.padding, s)
            for axis, k, s in zip((h_axis, w_axis), self.kernel_size, self.strides)
        )
        dims = [shape[0], out_h, out_w, self.filters]
        if fmt == "NCHW":
            dims = [shape[0], self.filters, out_h, out_w]
        strides = [1, *self.strides, 1] if fmt == "NHWC" else [1, 1, *self.strides]
        outputs = nn_conv.conv2d_transpose(
            inputs,
            self.kernel,
            array_ops.stack(dims),
            strides,
            padding=self.padding.upper(),
            data_format=fmt,
        )
        outputs.set_shape(self.compute_output_shape(inputs.shape))
        return _finish(self, outputs, fmt)

    def compute_output_shape(self, input_shape):
        shape = TensorShape(input_shape).with_rank(4)
        hw = shape.as_list()[1:3] if self.data_format == "channels_last" else shape.as_list()[2:]
        out = [
            _deconv_length(n, k, self.padding, s)
            for n, k, s in zip(hw, self.kernel_size, self.strides)
        ]
        return _spatial_shape(shape, self.data_format, out, self.filters)


class SeparableConv2D(Conv2D):
    """A depthwise convolution (`depth_multiplier` filters per channel) followed by a 1x1
    convolution to `filters` channels."""

    def __init__(
        self,
        filters,
        kernel_size,
        depth_multiplier=1,
        depthwise_initializer=None,
        pointwise_initializer=None,
        depthwise_regularizer=None,
        pointwise_regularizer=None,
        depthwise_constraint=None,
        pointwise_constraint=None,
        **kwargs,
    ):
        super().__init__(filters, kernel_size, **kwargs)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = depthwise_initializer
        self.pointwise_initializer = pointwise_initializer
        self.depthwise_regularizer = depthwise_regularizer
        self.pointwise_regularizer = pointwise_regularizer
        self.depthwise_constraint = depthwise_constraint
        self.pointwise_constraint = pointwise_constraint

    def _rank(self):
        return 4

    def build(self, input_shape):
        input_shape = TensorShape(input_shape).with_rank(self._rank())
        channels = input_shape[self._channel_axis()].value
        if channels is None:
            raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
        window = list(self.kernel_size[4 - self._rank() :])  # 1-D kernels have no height
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel",
            [*window, channels, self.depth_multiplier],
            initializer=self.depthwise_initializer,
            regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint,
        )
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel",
            [*[1] * len(window), channels * self.depth_multiplier, self.filters],
            initializer=self.pointwise_initializer,
            regularizer=self.pointwise_regularizer,
            constraint=self.pointwise_constraint,
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
        strides = [1, *self.strides, 1] if fmt == "NHWC" else [1, 1, *self.strides]
        depthwise, pointwise = self.depthwise_kernel, self.pointwise_kernel
        if self._rank() == 3:
            depthwise = array_ops.expand_dims(depthwise, 0)
            pointwise = array_ops.expand_dims(pointwise, 0)
        outputs = nn_conv.separable_conv2d(
            inputs,
            depthwise,
            pointwise,
            strides,
            self.padding.upper(),
            rate=self.dilation_rate,
            data_format=fmt,
        )
        return _finish(self, outputs, fmt)


class SeparableConv1D(SeparableConv2D):
    """SeparableConv2D over [batch, length, channels] (a height-1 image)."""

    def __init__(self, filters, kernel_size, strides=1, dilation_rate=1, **kwargs):
        super().__init__(filters, (1, _single(kernel_size, "kernel_size")), **kwargs)
        self.strides = (1, _single(strides, "strides"))
        self.dilation_rate = (1, _single(dilation_rate, "dilation_rate"))

    def _rank(self):
        return 3

    def call(self, inputs):
        axis = 1 if self.data_format == "channels_last" else 2
        outputs = super().call(array_ops.expand_dims(inputs, axis))
        return array_ops.squeeze(outputs, [axis])

    def compute_output_shape(self, input_shape):
        dims = TensorShape(input_shape).with_rank(3).as_list()
        length = dims[1] if self.data_format == "channels_last" else dims[2]
        out = _output_length(
            length, self.kernel_size[1], self.padding, self.strides[1], self.dilation_rate[1]
        )
        if self.data_format == "channels_last":
            return TensorShape([dims[0], out, self.filters])
        return TensorShape([dims[0], self.filters, out])


class _Pooling1D(Layer):
    pool_fn_name = ""

    def __init__(
        self, pool_size, strides, padding="valid", data_format="channels_last", name=None, **kwargs
    ):
        super().__init__(name=name, **kwargs)
        self.pool_size = _single(pool_size, "pool_size")
        self.strides = _single(strides, "strides")
        self.padding = _padding(padding)
        self.data_format = _normalize_data_format(data_format)

    def call(self, inputs):
        channels_last = self.data_format == "channels_last"
        axis = 2 if channels_last else 3  # a width-1 image [N, L, 1, C] or [N, C, L, 1]
        image = array_ops.expand_dims(convert_to_tensor(inputs), axis)
        window = [1, self.pool_size, 1, 1] if channels_last else [1, 1, self.pool_size, 1]
        steps = [1, self.strides, 1, 1] if channels_last else [1, 1, self.strides, 1]
        pool = getattr(nn_conv, self.pool_fn_name)
        fmt = "NHWC" if channels_last else "NCHW"
        pooled = pool(image, window, steps, self.padding.upper(), data_format=fmt)
        return array_ops.squeeze(pooled, [axis])

    def compute_output_shape(self, input_shape):
        dims = TensorShape(input_shape).with_rank(3).as_list()
        length = dims[1] if self.data_format == "channels_last" else dims[2]
        out = _output_length(length, self.pool_size, self.padding, self.strides)
        if self.data_format == "channels_last":
            return TensorShape([dims[0], out, dims[2]])
        return TensorShape([dims[0], dims[1], out])


class MaxPooling1D(_Pooling1D):
    """Max over `pool_size` steps every `strides` steps of [batch, length, channels]."""

    pool_fn_name = "max_pool"


class AveragePooling1D(_Pooling1D):
    """Mean over `pool_size` steps every `strides` steps."""

    pool_fn_name = "avg_pool"


def _functional(layer_class, doc):
    def build_and_apply(inputs, *args, name=None, reuse=None, **kwargs):
        layer = layer_class(*args, name=name, _reuse=reuse, _scope=name, **kwargs)
        return layer.apply(inputs)

    build_and_apply.__doc__ = doc
    return build_and_apply


def _functional_pool(layer_class, doc):
    def build_and_apply(
        inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
    ):
        layer = layer_class(pool_size, strides, padding=padding, data_format=data_format, name=name)
        return layer.apply(inputs)

    build_and_apply.__doc__ = doc
    return build_and_apply


conv1d = _functional(Conv1D, "Functional Conv1D. Example: h = tf.layers.conv1d(x, 16, 3)")
conv2d_transpose = _functional(
    Conv2DTranspose,
    "Functional Conv2DTranspose. Example: up = tf.layers.conv2d_transpose(h, 64, 5, 2, 'same')",
)
separable_conv1d = _functional(SeparableConv1D, "Functional SeparableConv1D.")
separable_conv2d = _functional(SeparableConv2D, "Functional SeparableConv2D.")
max_pooling1d = _functional_pool(MaxPooling1D, "Functional MaxPooling1D.")
average_pooling1d = _functional_pool(AveragePooling1D, "Functional AveragePooling1D.")

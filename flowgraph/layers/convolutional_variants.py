"""The other convolution and pooling layers of tf.layers (TF 1.15): 1-D convolution and pooling,
transposed convolution (the generator of a GAN), and depthwise-separable convolutions.

They share Conv2D's arguments and variable names (`kernel`, `bias`; separable layers own
`depthwise_kernel` and `pointwise_kernel`), so checkpoints name them as TensorFlow does.
"""

from __future__ import annotations

from flowgraph.framework.convert import convert_to_tensor
from flowgraph.layers.base import functional
from flowgraph.layers.convolutional import (
    Conv2D,
    _arrange,
    _Conv,
    _finish,
    _nn_format,
    _output_length,
    _output_shape,
    _per_axis,
    _Pooling,
    _spatial,
    _tuple,
    functional_pool,
)
from flowgraph.layers.core import add_bias
from flowgraph.ops import array as array_ops
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


class Conv1D(_Conv):
    """1-D convolution over [batch, length, channels]: kernel [kernel_size, in, filters]."""

    rank = 1

    def _convolve(self, inputs, fmt):
        return nn_conv.conv1d(
            inputs,
            self.kernel,
            stride=self.strides[0],
            padding=self.padding.upper(),
            data_format=fmt,
            dilations=self.dilation_rate[0],
        )


def _deconv_length(length, kernel, padding, stride):
    if length is None:
        return None
    if padding == "valid":
        return length * stride + max(kernel - stride, 0)
    return length * stride


class _ConvTranspose(_Conv):
    """A transposed convolution ("deconvolution") over `rank` spatial dims: kernel
    [*window, filters, in_channels]; each spatial dim grows by its stride (plus the kernel
    overhang with 'valid' padding). Subclasses set `rank` and `transpose_fn` (tf.nn's)."""

    transpose_fn = None

    def __init__(
        self,
        filters,
        kernel_size,
        strides=1,
        padding="valid",
        data_format="channels_last",
        activation=None,
        **kwargs,
    ):
        if "dilation_rate" in kwargs:
            raise TypeError(f"{type(self).__name__} of tf.layers takes no dilation_rate argument")
        super().__init__(
            filters,
            kernel_size,
            strides=strides,
            padding=padding,
            data_format=data_format,
            activation=activation,
            **kwargs,
        )

    def _kernel_shape(self, channels):
        return [*self.kernel_size, self.filters, channels]

    def _convolve(self, inputs, fmt):
        inputs = convert_to_tensor(inputs)
        shape = array_ops.shape(inputs)
        axes = range(1, self.rank + 1) if fmt.endswith("C") else range(2, self.rank + 2)
        out = [
            _deconv_length(shape[axis], k, self.padding, s)
            for axis, k, s in zip(axes, self.kernel_size, self.strides)
        ]
        outputs = self.transpose_fn(
            inputs,
            self.kernel,
            array_ops.stack(_arrange(shape[0], self.data_format, out, self.filters)),
            _per_axis(self.strides, fmt),
            padding=self.padding.upper(),
            data_format=fmt,
        )
        outputs.set_shape(self.compute_output_shape(inputs.shape))
        return outputs

    def compute_output_shape(self, input_shape):
        spatial, _ = _spatial(input_shape, self.data_format, self.rank)
        out = [
            _deconv_length(n, k, self.padding, s)
            for n, k, s in zip(spatial, self.kernel_size, self.strides)
        ]
        return _output_shape(input_shape, self.data_format, out, self.filters)


class Conv2DTranspose(_ConvTranspose):
    """Transposed 2-D convolution: kernel [kh, kw, filters, in_channels]."""

    rank = 2
    transpose_fn = staticmethod(nn_conv.conv2d_transpose)


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

    def build(self, input_shape):
        channels = self._in_channels(input_shape)
        window = list(self.kernel_size[4 - self._input_rank() :])  # 1-D kernels have no height
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
        add_bias(self, self.filters)

    def call(self, inputs):
        fmt = _nn_format(self.data_format)
        depthwise, pointwise = self.depthwise_kernel, self.pointwise_kernel
        if self._input_rank() == 3:
            depthwise = array_ops.expand_dims(depthwise, 0)
            pointwise = array_ops.expand_dims(pointwise, 0)
        outputs = nn_conv.separable_conv2d(
            inputs,
            depthwise,
            pointwise,
            _per_axis(self.strides, fmt),
            self.padding.upper(),
            rate=self.dilation_rate,
            data_format=fmt,
        )
        return _finish(self, outputs, fmt)


class SeparableConv1D(SeparableConv2D):
    """SeparableConv2D over [batch, length, channels] (a height-1 image)."""

    def __init__(self, filters, kernel_size, strides=1, dilation_rate=1, **kwargs):
        super().__init__(filters, (1, _tuple(kernel_size, 1, "kernel_size")[0]), **kwargs)
        self.strides = (1, *_tuple(strides, 1, "strides"))
        self.dilation_rate = (1, *_tuple(dilation_rate, 1, "dilation_rate"))

    def _input_rank(self):
        return 3

    def call(self, inputs):
        axis = 1 if self.data_format == "channels_last" else 2
        outputs = super().call(array_ops.expand_dims(inputs, axis))
        return array_ops.squeeze(outputs, [axis])

    def compute_output_shape(self, input_shape):
        (length,), _ = _spatial(input_shape, self.data_format, 1)
        out = _output_length(
            length, self.kernel_size[1], self.padding, self.strides[1], self.dilation_rate[1]
        )
        return _output_shape(input_shape, self.data_format, [out], self.filters)


class _Pooling1D(_Pooling):
    """Pooling of [batch, length, channels] as the 2-D pooling of a width-1 image."""

    rank = 1

    def call(self, inputs):
        channels_last = self.data_format == "channels_last"
        axis = 2 if channels_last else 3  # a width-1 image [N, L, 1, C] or [N, C, L, 1]
        image = array_ops.expand_dims(convert_to_tensor(inputs), axis)
        fmt = _nn_format(self.data_format)
        window = _per_axis([*self.pool_size, 1], fmt)
        steps = _per_axis([*self.strides, 1], fmt)
        pool = getattr(nn_conv, self.pool_fn_name)
        pooled = pool(image, window, steps, self.padding.upper(), data_format=fmt)
        return array_ops.squeeze(pooled, [axis])


class MaxPooling1D(_Pooling1D):
    """Max over `pool_size` steps every `strides` steps of [batch, length, channels]."""

    pool_fn_name = "max_pool"


class AveragePooling1D(_Pooling1D):
    """Mean over `pool_size` steps every `strides` steps."""

    pool_fn_name = "avg_pool"


conv1d = functional(Conv1D, "Functional Conv1D. Example: h = tf.layers.conv1d(x, 16, 3)")
conv2d_transpose = functional(
    Conv2DTranspose,
    "Functional Conv2DTranspose. Example: up = tf.layers.conv2d_transpose(h, 64, 5, 2, 'same')",
)
separable_conv1d = functional(SeparableConv1D, "Functional SeparableConv1D.")
separable_conv2d = functional(SeparableConv2D, "Functional SeparableConv2D.")
max_pooling1d = functional_pool(MaxPooling1D, "Functional MaxPooling1D.")
average_pooling1d = functional_pool(AveragePooling1D, "Functional AveragePooling1D.")

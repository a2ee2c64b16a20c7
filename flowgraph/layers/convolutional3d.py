"""3-D convolution and pooling layers of tf.layers (TF 1.15): Conv3D, Conv3DTranspose,
MaxPooling3D, AveragePooling3D and their functional forms, over [batch, depth, height, width,
channels] ('channels_last') or [batch, channels, depth, height, width] ('channels_first').

They take Conv2D's arguments with triples for `kernel_size`, `strides`, `dilation_rate` and
`pool_size`, and own the same variables (`kernel` [kd, kh, kw, in, filters], `bias`).
"""

from __future__ import annotations

from flowgraph.core.shapes import TensorShape
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.layers.base import Layer
from flowgraph.layers.convolutional import Conv2D, _output_length, _padding
from flowgraph.layers.convolutional_variants import Conv1D, _deconv_length, _finish
from flowgraph.layers.core import _normalize_data_format
from flowgraph.ops import array as array_ops
from flowgraph.ops import nn_conv3d

__all__ = [
    "AveragePooling3D",
    "Conv3D",
    "Conv3DTranspose",
    "MaxPooling3D",
    "average_pooling3d",
    "conv3d",
    "conv3d_transpose",
    "max_pooling3d",
]


def _triple(value, name):
    """An int or a 3-sequence of ints as a tuple of 3 positive ints."""
    if isinstance(value, int):
        value = (value,) * 3
    try:
        value = tuple(int(v) for v in value)
    except TypeError:
        raise ValueError(
            f"The `{name}` argument must be a tuple of 3 integers. Received: {value!r}"
        ) from None
    if len(value) != 3 or any(v <= 0 for v in value):
        raise ValueError(
            f"The `{name}` argument must be a tuple of 3 positive integers. Received: {value!r}"
        )
    return value


def _format(data_format) -> str:
    return "NDHWC" if data_format == "channels_last" else "NCDHW"


def _five(values, fmt):
    return [1, *values, 1] if fmt == "NDHWC" else [1, 1, *values]


def _spatial(shape: TensorShape, data_format):
    dims = shape.with_rank(5).as_list()
    return (dims[1:4], dims[4]) if data_format == "channels_last" else (dims[2:], dims[1])


def _volume_shape(shape: TensorShape, data_format, out, channels) -> TensorShape:
    batch = shape.with_rank(5).as_list()[0]
    if data_format == "channels_last":
        return TensorShape([batch, *out, channels])
    return TensorShape([batch, channels, *out])


class Conv3D(Conv2D):
    """3-D convolution: outputs = activation(conv3d(inputs, kernel) + bias)."""

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), dilation_rate=(1, 1, 1), **kw):
        super().__init__(filters, 1, **kw)
        self.kernel_size = _triple(kernel_size, "kernel_size")
        self.strides = _triple(strides, "strides")
        self.dilation_rate = _triple(dilation_rate, "dilation_rate")
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise ValueError("strides > 1 not supported in conjunction with dilation_rate > 1")

    def _kernel_shape(self, channels):
        return [*self.kernel_size, channels, self.filters]

    def build(self, input_shape):
        channels = TensorShape(input_shape).with_rank(5)[self._channel_axis()].value
        if channels is None:
            raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
        Conv1D._build_weights(self, self._kernel_shape(channels))

    def call(self, inputs):
        fmt = _format(self.data_format)
        outputs = nn_conv3d.conv3d(
            inputs,
            self.kernel,
            strides=_five(self.strides, fmt),
            padding=self.padding.upper(),
            data_format=fmt,
            dilations=_five(self.dilation_rate, fmt),
        )
        return _finish(self, outputs, "NHWC" if fmt == "NDHWC" else "NCHW")

    def compute_output_shape(self, input_shape):
        shape = TensorShape(input_shape)
        spatial, _ = _spatial(shape, self.data_format)
        out = [
            _output_length(n, k, self.padding, s, d)
            for n, k, s, d in zip(spatial, self.kernel_size, self.strides, self.dilation_rate)
        ]
        return _volume_shape(shape, self.data_format, out, self.filters)


class Conv3DTranspose(Conv3D):
    """Transposed 3-D convolution: kernel [kd, kh, kw, filters, in_channels]; each spatial dim
    grows by its stride (plus the kernel overhang with 'valid' padding)."""

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), **kwargs):
        if "dilation_rate" in kwargs:
            raise TypeError("Conv3DTranspose of tf.layers takes no dilation_rate argument")
        super().__init__(filters, kernel_size, strides=strides, **kwargs)

    def _kernel_shape(self, channels):
        return [*self.kernel_size, self.filters, channels]

    def call(self, inputs):
        inputs = convert_to_tensor(inputs)
        fmt = _format(self.data_format)
        shape = array_ops.shape(inputs)
        axes = (1, 2, 3) if fmt == "NDHWC" else (2, 3, 4)
        out = [
            _deconv_length(shape[axis], k, self.padding, s)
            for axis, k, s in zip(axes, self.kernel_size, self.strides)
        ]
        dims = [shape[0], *out, self.filters] if fmt == "NDHWC" else [shape[0], self.filters, *out]
        outputs = nn_conv3d.conv3d_transpose(
            inputs,
            self.kernel,
            array_ops.stack(dims),
            _five(self.strides, fmt),
            padding=self.padding.upper(),
            data_format=fmt,
        )
        outputs.set_shape(self.compute_output_shape(inputs.shape))
        return _finish(self, outputs, "NHWC" if fmt == "NDHWC" else "NCHW")

    def compute_output_shape(self, input_shape):
        shape = TensorShape(input_shape)
        spatial, _ = _spatial(shape, self.data_format)
        out = [
            _deconv_length(n, k, self.padding, s)
            for n, k, s in zip(spatial, self.kernel_size, self.strides)
        ]
        return _volume_shape(shape, self.data_format, out, self.filters)


class _Pooling3D(Layer):
    """Shared by the 3-D pooling layers: `pool_fn_name` names the tf.nn function."""

    pool_fn_name = ""

    def __init__(
        self, pool_size, strides, padding="valid", data_format="channels_last", name=None, **kw
    ):
        super().__init__(name=name, **kw)
        self.pool_size = _triple(pool_size, "pool_size")
        self.strides = _triple(strides, "strides")
        self.padding = _padding(padding)
        self.data_format = _normalize_data_format(data_format)

    def call(self, inputs):
        fmt = _format(self.data_format)
        pool = getattr(nn_conv3d, self.pool_fn_name)
        return pool(
            convert_to_tensor(inputs),
            ksize=_five(self.pool_size, fmt),
            strides=_five(self.strides, fmt),
            padding=self.padding.upper(),
            data_format=fmt,
        )

    def compute_output_shape(self, input_shape):
        shape = TensorShape(input_shape)
        spatial, channels = _spatial(shape, self.data_format)
        out = [
            _output_length(n, k, self.padding, s)
            for n, k, s in zip(spatial, self.pool_size, self.strides)
        ]
        return _volume_shape(shape, self.data_format, out, channels)


class MaxPooling3D(_Pooling3D):
    """Max over `pool_size` windows every `strides` cells."""

    pool_fn_name = "max_pool3d"


class AveragePooling3D(_Pooling3D):
    """Mean over `pool_size` windows ('same' padding averages only the in-bounds cells)."""

    pool_fn_name = "avg_pool3d"


def conv3d(
    inputs, filters, kernel_size, strides=(1, 1, 1), padding="valid", name=None, reuse=None, **kw
):
    """Functional Conv3D (the other arguments as Conv3D's).

    Example: h = tf.layers.conv3d(clips, 16, 3, padding="same", activation=tf.nn.relu)
    """
    layer = Conv3D(
        filters, kernel_size, strides=strides, padding=padding, name=name, _reuse=reuse,
        _scope=name, **kw
    )  # fmt: skip
    return layer.apply(inputs)


def conv3d_transpose(
    inputs, filters, kernel_size, strides=(1, 1, 1), padding="valid", name=None, reuse=None, **kw
):
    """Functional Conv3DTranspose."""
    layer = Conv3DTranspose(
        filters, kernel_size, strides=strides, padding=padding, name=name, _reuse=reuse,
        _scope=name, **kw
    )  # fmt: skip
    return layer.apply(inputs)


def max_pooling3d(
    inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
):
    """Functional MaxPooling3D. Example: h = tf.layers.max_pooling3d(h, 2, 2)"""
    layer = MaxPooling3D(pool_size, strides, padding=padding, data_format=data_format, name=name)
    return layer.apply(inputs)


def average_pooling3d(
    inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
):
    """Functional AveragePooling3D."""
    layer = AveragePooling3D(
        pool_size, strides, padding=padding, data_format=data_format, name=name
    )
    return layer.apply(inputs)

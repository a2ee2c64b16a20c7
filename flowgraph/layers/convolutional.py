"""Convolution and pooling layers of tf.layers (TF1's Conv2D, MaxPooling2D, AveragePooling2D)
and the rank-generic bases that the 1-D and 3-D layers share.

Arguments follow TF1: `kernel_size`, `strides`, `pool_size` and `dilation_rate` are an int or one
int per spatial dim; `padding` is 'valid' or 'same' (any case); `data_format` is 'channels_last'
(NHWC) or 'channels_first' (NCHW). The kernel variable is [*window, in_channels, filters].
One class per concept with `rank` (the number of spatial dims) as a class attribute, as Keras's
`Conv` base does, so Conv1D/Conv2D/Conv3D differ only in the nn function they call.
"""

from __future__ import annotations

from flowgraph.core.shapes import TensorShape
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.layers.base import Layer, functional
from flowgraph.layers.core import _normalize_data_format, add_kernel_and_bias
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

_FORMATS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}


def _tuple(value, rank, name):
    """An int or a `rank`-sequence of ints as a tuple of `rank` positive ints."""
    if isinstance(value, int):
        value = (value,) * rank
    try:
        value = tuple(int(v) for v in value)
    except TypeError:
        raise ValueError(
            f"The `{name}` argument must be a tuple of {rank} integers. Received: {value!r}"
        ) from None
    if len(value) != rank or any(v <= 0 for v in value):
        raise ValueError(
            f"The `{name}` argument must be a tuple of {rank} positive integers. "
            f"Received: {value!r}"
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


def _nn_format(data_format, rank=2):
    """The tf.nn data_format ('NHWC', 'NCDHW', ...) of a layer's `data_format` and rank."""
    return _FORMATS[rank][data_format != "channels_last"]


def _per_axis(values, fmt):
    """Spatial `values` as a tf.nn per-axis list (ksize/strides/dilations) in `fmt`."""
    return [1, *values, 1] if fmt.endswith("C") else [1, 1, *values]


def _spatial(shape, data_format, rank):
    """(spatial dims, channels) of `shape`, a layer input of `rank` spatial dims."""
    dims = TensorShape(shape).with_rank(rank + 2).as_list()
    return (dims[1:-1], dims[-1]) if data_format == "channels_last" else (dims[2:], dims[1])


def _arrange(batch, data_format, spatial, channels) -> list:
    """[batch, *spatial, channels] in `data_format`'s order (dims or scalar tensors)."""
    if data_format == "channels_last":
        return [batch, *spatial, channels]
    return [batch, channels, *spatial]


def _output_shape(shape, data_format, spatial, channels) -> TensorShape:
    """`shape` (a layer input's) with new spatial dims and channels."""
    return TensorShape(_arrange(TensorShape(shape)[0].value, data_format, spatial, channels))


def _finish(layer, outputs, fmt):
    """Adds the layer's bias and applies its activation."""
    if layer.use_bias:
        outputs = nn_ops.bias_add(outputs, layer.bias, data_format=fmt)
    return layer.activation(outputs) if layer.activation is not None else outputs


class _Conv(Layer):
    """A convolution over `rank` spatial dims: outputs = activation(conv(inputs, kernel) + bias).
    Subclasses set `rank` and `conv_fn`, the tf.nn convolution of that rank."""

    rank = 2
    conv_fn = None

    def __init__(
        self,
        filters,
        kernel_size,
        strides=1,
        padding="valid",
        data_format="channels_last",
        dilation_rate=1,
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
        self.kernel_size = _tuple(kernel_size, self.rank, "kernel_size")
        self.strides = _tuple(strides, self.rank, "strides")
        self.padding = _padding(padding)
        self.data_format = _normalize_data_format(data_format)
        self.dilation_rate = _tuple(dilation_rate, self.rank, "dilation_rate")
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

    def _input_rank(self):
        return self.rank + 2

    def _in_channels(self, input_shape):
        channels = (
            TensorShape(input_shape).with_rank(self._input_rank())[self._channel_axis()].value
        )
        if channels is None:
            raise ValueError("The channel dimension of the inputs should be defined. Found `None`.")
        return channels

    def _kernel_shape(self, channels):
        return [*self.kernel_size, channels, self.filters]

    def build(self, input_shape):
        kernel_shape = self._kernel_shape(self._in_channels(input_shape))
        add_kernel_and_bias(self, kernel_shape, self.filters)

    def _convolve(self, inputs, fmt):
        return self.conv_fn(
            inputs,
            self.kernel,
            strides=_per_axis(self.strides, fmt),
            padding=self.padding.upper(),
            data_format=fmt,
            dilations=_per_axis(self.dilation_rate, fmt),
        )

    def call(self, inputs):
        fmt = _nn_format(self.data_format, self.rank)
        return _finish(self, self._convolve(inputs, fmt), _nn_format(self.data_format))

    def compute_output_shape(self, input_shape):
        spatial, _ = _spatial(input_shape, self.data_format, self.rank)
        out = [
            _output_length(n, k, self.padding, s, d)
            for n, k, s, d in zip(spatial, self.kernel_size, self.strides, self.dilation_rate)
        ]
        return _output_shape(input_shape, self.data_format, out, self.filters)


class Conv2D(_Conv):
    """2-D convolution: outputs = activation(conv2d(inputs, kernel) + bias)."""

    rank = 2
    conv_fn = staticmethod(nn_conv.conv2d)


class _Pooling(Layer):
    """Pooling over `rank` spatial dims: `pool_fn_name` names the function of `pool_module`."""

    rank = 2
    pool_module = nn_conv
    pool_fn_name = ""

    def __init__(
        self, pool_size, strides, padding="valid", data_format="channels_last", name=None, **kwargs
    ):
        super().__init__(name=name, **kwargs)
        self.pool_size = _tuple(pool_size, self.rank, "pool_size")
        self.strides = _tuple(strides, self.rank, "strides")
        self.padding = _padding(padding)
        self.data_format = _normalize_data_format(data_format)

    def call(self, inputs):
        fmt = _nn_format(self.data_format, self.rank)
        pool = getattr(self.pool_module, self.pool_fn_name)
        return pool(
            convert_to_tensor(inputs),
            ksize=_per_axis(self.pool_size, fmt),
            strides=_per_axis(self.strides, fmt),
            padding=self.padding.upper(),
            data_format=fmt,
        )

    def compute_output_shape(self, input_shape):
        spatial, channels = _spatial(input_shape, self.data_format, self.rank)
        out = [
            _output_length(n, k, self.padding, s)
            for n, k, s in zip(spatial, self.pool_size, self.strides)
        ]
        return _output_shape(input_shape, self.data_format, out, channels)


class MaxPooling2D(_Pooling):
    """Max over `pool_size` windows every `strides` pixels."""

    pool_fn_name = "max_pool"


class AveragePooling2D(_Pooling):
    """Mean over `pool_size` windows ('same' padding averages only the in-bounds pixels)."""

    pool_fn_name = "avg_pool"


def functional_pool(layer_class, doc):
    """The functional form of a pooling layer (it owns no variables, so no `reuse`)."""

    def build_and_apply(
        inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
    ):
        layer = layer_class(pool_size, strides, padding=padding, data_format=data_format, name=name)
        return layer.apply(inputs)

    build_and_apply.__doc__ = doc
    return build_and_apply


conv2d = functional(
    Conv2D,
    "Functional Conv2D. Example: h = tf.layers.conv2d(x, 32, 5, padding='same', "
    "activation=tf.nn.relu)",
)
max_pooling2d = functional_pool(
    MaxPooling2D, "Functional MaxPooling2D. Example: h = tf.layers.max_pooling2d(h, 2, 2)"
)
average_pooling2d = functional_pool(AveragePooling2D, "Functional AveragePooling2D.")

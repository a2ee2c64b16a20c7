"""Dense, Dropout and Flatten layers and their functional forms (TF1's tf.layers.core)."""

from __future__ import annotations

import numpy as np

from flowgraph.core.shapes import TensorShape
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.layers.base import Layer, functional, smart_cond
from flowgraph.ops import array as array_ops
from flowgraph.ops import init_ops
from flowgraph.ops import linalg as linalg_ops
from flowgraph.ops import nn as nn_ops

__all__ = ["Dense", "Dropout", "Flatten", "dense", "dropout", "flatten"]


def add_kernel_and_bias(layer, kernel_shape, units):
    """Builds `layer.kernel` and `layer.bias` from the layer's initializer, regularizer and
    constraint attributes: Dense and every convolution own these two variables."""
    layer.kernel = layer.add_weight(
        "kernel",
        kernel_shape,
        initializer=layer.kernel_initializer,
        regularizer=layer.kernel_regularizer,
        constraint=layer.kernel_constraint,
    )
    add_bias(layer, units)


def add_bias(layer, units):
    """Builds `layer.bias` [units] when `layer.use_bias` (else None) and marks it built."""
    layer.bias = None
    if layer.use_bias:
        layer.bias = layer.add_weight(
            "bias",
            [units],
            initializer=layer.bias_initializer,
            regularizer=layer.bias_regularizer,
            constraint=layer.bias_constraint,
        )
    layer.built = True


class Dense(Layer):
    """outputs = activation(inputs · kernel + bias); kernel is [input_dim, units].

    Inputs of rank > 2 are multiplied along their last axis.
    """

    def __init__(
        self,
        units,
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
        self.units = int(units)
        if self.units <= 0:
            raise ValueError(f"Dense units must be positive, got {units!r}")
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint

    def build(self, input_shape):
        input_shape = TensorShape(input_shape)
        if input_shape.ndims is None or input_shape[-1].value is None:
            raise ValueError(
                "The last dimension of the inputs to `Dense` should be defined. Found `None`."
            )
        add_kernel_and_bias(self, [input_shape[-1].value, self.units], self.units)

    def call(self, inputs):
        inputs = convert_to_tensor(inputs, dtype=self.dtype)
        shape = inputs.get_shape()
        if shape.ndims is not None and shape.ndims > 2:
            flat = array_ops.reshape(inputs, [-1, shape[-1].value])
            outputs = linalg_ops.matmul(flat, self.kernel)
            dims = shape.as_list()
            if all(d is not None for d in dims[:-1]):
                out_shape = dims[:-1] + [self.units]
            else:
                out_shape = array_ops.concat([array_ops.shape(inputs)[:-1], [self.units]], 0)
            outputs = array_ops.reshape(outputs, out_shape)
            outputs.set_shape(dims[:-1] + [self.units])
        else:
            outputs = linalg_ops.matmul(inputs, self.kernel)
        if self.use_bias:
            outputs = nn_ops.bias_add(outputs, self.bias)
        if self.activation is not None:
            return self.activation(outputs)
        return outputs

    def compute_output_shape(self, input_shape):
        input_shape = TensorShape(input_shape).with_rank_at_least(2)
        return TensorShape(input_shape.as_list()[:-1] + [self.units])


dense = functional(
    Dense, "Functional Dense. Example: h = tf.layers.dense(x, 128, activation=tf.nn.relu)"
)


class Dropout(Layer):
    """Zeroes a fraction `rate` of the inputs and scales the rest by 1/(1 - rate) when training."""

    def __init__(self, rate=0.5, noise_shape=None, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if not 0 <= rate < 1:
            raise ValueError(f"rate must be a scalar in [0, 1), got {rate!r}")
        self.rate = rate
        self.noise_shape = noise_shape
        self.seed = seed

    def call(self, inputs, training=False):
        if self.rate == 0:
            return array_ops.identity(inputs)

        def dropped():
            return nn_ops.dropout(
                inputs, noise_shape=self.noise_shape, seed=self.seed, rate=self.rate
            )

        return smart_cond(training, dropped, lambda: array_ops.identity(inputs))

    def compute_output_shape(self, input_shape):
        return TensorShape(input_shape)


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """Functional Dropout: identity unless `training`.

    Example: h = tf.layers.dropout(h, rate=0.3, training=True)
    """
    return Dropout(rate, noise_shape=noise_shape, seed=seed, name=name).apply(
        inputs, training=training
    )


class Flatten(Layer):
    """[batch, d1, d2, ...] -> [batch, d1·d2·...] (channels moved last first for channels_first)."""

    def __init__(self, data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.data_format = _normalize_data_format(data_format)

    def call(self, inputs):
        inputs = convert_to_tensor(inputs)
        shape = inputs.get_shape()
        if self.data_format == "channels_first" and shape.ndims is not None and shape.ndims > 2:
            inputs = array_ops.transpose(inputs, [0] + list(range(2, shape.ndims)) + [1])
            shape = inputs.get_shape()
        rest = shape.as_list()[1:] if shape.ndims is not None else None
        if rest is not None and all(d is not None for d in rest):
            outputs = array_ops.reshape(inputs, [-1, int(np.prod(rest, dtype=np.int64))])
        else:
            batch = array_ops.shape(inputs)[:1]
            outputs = array_ops.reshape(inputs, array_ops.concat([batch, [-1]], 0))
        if shape.ndims is not None:
            outputs.set_shape(self.compute_output_shape(shape))
        return outputs

    def compute_output_shape(self, input_shape):
        dims = TensorShape(input_shape).as_list()
        rest = dims[1:]
        flat = int(np.prod(rest, dtype=np.int64)) if all(d is not None for d in rest) else None
        return TensorShape([dims[0], flat])


def flatten(inputs, name=None, data_format="channels_last"):
    """Functional Flatten. Example: v = tf.layers.flatten(conv_out)"""
    return Flatten(name=name, data_format=data_format).apply(inputs)


def _normalize_data_format(value):
    if value is None:
        return "channels_last"
    v = str(value).lower()
    if v not in ("channels_last", "channels_first"):
        raise ValueError(
            "The `data_format` argument must be one of 'channels_first', 'channels_last'. "
            f"Received: {value!r}"
        )
    return v

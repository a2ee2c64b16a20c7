"""Batch normalization (TF1's tf.layers.BatchNormalization).

Training normalizes with the batch's mean and (biased) variance and creates the ops that move
`moving_mean` and `moving_variance` towards them (moving -= (moving - batch)·(1 - momentum));
they go to tf.GraphKeys.UPDATE_OPS, which the program runs with its train op. Inference uses the
moving statistics. Where TF1 would take its fused kernel (4-D inputs, channel axis 1 or 3; the
default `fused=None`), the moving variance is updated with the unbiased (n/(n-1)) batch variance,
as TF1's fused kernel does, so trained statistics match TF1.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape
from flowgraph.framework import default_graph
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.layers.base import Layer, as_bool_or_tensor, smart_cond
from flowgraph.ops import array as array_ops
from flowgraph.ops import init_ops, variable_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import nn as nn_ops

__all__ = ["BatchNormalization", "batch_normalization"]


class BatchNormalization(Layer):
    """Normalizes over every axis but `axis` (the channels); learns `gamma` and `beta`."""

    def __init__(
        self,
        axis=-1,
        momentum=0.99,
        epsilon=1e-3,
        center=True,
        scale=True,
        beta_initializer=init_ops.zeros_initializer(),
        gamma_initializer=init_ops.ones_initializer(),
        moving_mean_initializer=init_ops.zeros_initializer(),
        moving_variance_initializer=init_ops.ones_initializer(),
        beta_regularizer=None,
        gamma_regularizer=None,
        beta_constraint=None,
        gamma_constraint=None,
        renorm=False,
        renorm_clipping=None,
        renorm_momentum=0.99,
        fused=None,
        trainable=True,
        virtual_batch_size=None,
        adjustment=None,
        name=None,
        **kwargs,
    ):
        super().__init__(trainable=trainable, name=name, **kwargs)
        for arg, value, default in (
            ("renorm", renorm, False),
            ("renorm_clipping", renorm_clipping, None),
            ("virtual_batch_size", virtual_batch_size, None),
            ("adjustment", adjustment, None),
        ):
            if value != default:
                raise NotImplementedError(
                    f"BatchNormalization({arg}={value!r}) is not supported by flowgraph."
                )
        del renorm_momentum  # only meaningful with renorm, which is refused above
        if isinstance(axis, (list, tuple)):
            if len(axis) != 1:
                raise NotImplementedError(
                    f"BatchNormalization over several axes {axis} is not supported."
                )
            axis = axis[0]
        if not isinstance(axis, int):
            raise TypeError(f"axis must be int or list, type given: {type(axis).__name__}")
        self.axis = axis
        self.momentum = momentum
        self.epsilon = epsilon
        self.center = center
        self.scale = scale
        self.beta_initializer = beta_initializer
        self.gamma_initializer = gamma_initializer
        self.moving_mean_initializer = moving_mean_initializer
        self.moving_variance_initializer = moving_variance_initializer
        self.beta_regularizer = beta_regularizer
        self.gamma_regularizer = gamma_regularizer
        self.beta_constraint = beta_constraint
        self.gamma_constraint = gamma_constraint
        self.fused = fused

    def build(self, input_shape):
        input_shape = TensorShape(input_shape)
        ndims = input_shape.ndims
        if ndims is None:
            raise ValueError(f"Input has undefined rank: {input_shape}")
        axis = self.axis + ndims if self.axis < 0 else self.axis
        if not 0 <= axis < ndims:
            raise ValueError(f"Invalid axis: {self.axis} for input of rank {ndims}")
        self._axis = axis
        fusable = ndims == 4 and axis in (1, 3)
        if self.fused is None:
            self.fused = fusable
        elif self.fused and not fusable:
            raise ValueError(
                f"Unsupported axis/rank for fused batch norm: axis={self.axis}, rank={ndims}"
            )
        channels = input_shape[axis].value
        if channels is None:
            raise ValueError(f"Input has undefined `axis` dimension. Input shape: {input_shape}")
        dtype = self.dtype if self.dtype in (dtypes.float32, dtypes.float64) else dtypes.float32
        shape = [channels]
        self.gamma = self.beta = None
        if self.scale:
            self.gamma = self.add_weight(
                "gamma",
                shape,
                dtype=dtype,
                initializer=self.gamma_initializer,
                regularizer=self.gamma_regularizer,
                constraint=self.gamma_constraint,
            )
        if self.center:
            self.beta = self.add_weight(
                "beta",
                shape,
                dtype=dtype,
                initializer=self.beta_initializer,
                regularizer=self.beta_regularizer,
                constraint=self.beta_constraint,
            )
        self.moving_mean = self.add_weight(
            "moving_mean",
            shape,
            dtype=dtype,
            initializer=self.moving_mean_initializer,
            trainable=False,
        )
        self.moving_variance = self.add_weight(
            "moving_variance",
            shape,
            dtype=dtype,
            initializer=self.moving_variance_initializer,
            trainable=False,
        )
        self.built = True

    def _broadcast(self, v, ndims):
        """A [C] parameter reshaped to broadcast against the inputs along the channel axis."""
        if v is None or self._axis == ndims - 1:
            return v
        shape = [1] * ndims
        shape[self._axis] = -1
        return array_ops.reshape(v, shape)

    def _normalize(self, inputs, mean, variance):
        ndims = inputs.get_shape().ndims
        pdtype = self.moving_mean.dtype.base_dtype
        x = math_ops.cast(inputs, pdtype) if inputs.dtype.base_dtype != pdtype else inputs
        out = nn_ops.batch_normalization(
            x,
            self._broadcast(mean, ndims),
            self._broadcast(variance, ndims),
            self._broadcast(self.beta, ndims),
            self._broadcast(self.gamma, ndims),
            self.epsilon,
        )
        return (
            math_ops.cast(out, inputs.dtype.base_dtype)
            if out.dtype.base_dtype != inputs.dtype.base_dtype
            else out
        )

    def call(self, inputs, training=False):
        inputs = convert_to_tensor(inputs)
        training = as_bool_or_tensor(training)
        if training is False:
            return self._normalize(inputs, self.moving_mean, self.moving_variance)
        return self._train(inputs, training)

    def _train(self, inputs, training=True):
        """Batch statistics when training; with a `training` tensor, TF1's way: the statistics
        and the momentum are picked by tf.cond, and the moving averages are always updated (with
        momentum 1, i.e. unchanged, when not training), so the update ops are never dead."""
        ndims = inputs.get_shape().ndims
        reduce_axes = [i for i in range(ndims) if i != self._axis]
        pdtype = self.moving_mean.dtype.base_dtype
        x = math_ops.cast(inputs, pdtype) if inputs.dtype.base_dtype != pdtype else inputs
        mean, variance = nn_ops.moments(x, reduce_axes, keep_dims=False)
        momentum = self.momentum
        if isinstance(training, bool):
            outputs = self._normalize(inputs, mean, variance)
        else:
            outputs = self._normalize(
                inputs,
                smart_cond(training, lambda: mean, lambda: self.moving_mean),
                smart_cond(training, lambda: variance, lambda: self.moving_variance),
            )
            momentum = smart_cond(
                training,
                lambda: convert_to_tensor(self.momentum, pdtype),
                lambda: convert_to_tensor(1.0, pdtype),
            )
        moving_variance_target = variance
        if self.fused:
            n = math_ops.cast(array_ops.size(x), pdtype) / math_ops.cast(
                array_ops.size(mean), pdtype
            )
            moving_variance_target = variance * n / math_ops.maximum(n - 1.0, 1.0)
        self.add_update(_assign_moving_average(self.moving_mean, mean, momentum))
        self.add_update(
            _assign_moving_average(self.moving_variance, moving_variance_target, momentum)
        )
        return outputs

    def compute_output_shape(self, input_shape):
        return TensorShape(input_shape)


def _assign_moving_average(variable, value, momentum):
    """variable -= (variable - value) · (1 - momentum), named `AssignMovingAvg` (TF1)."""
    graph = default_graph.get()
    with graph.name_scope("AssignMovingAvg") as scope, graph.colocate_with(variable.op):
        decay = convert_to_tensor(1.0 - momentum, dtype=variable.dtype.base_dtype, name="decay")
        delta = (variable - math_ops.cast(value, variable.dtype.base_dtype)) * decay
        return variable_ops.assign_sub(variable, delta, name=scope)


def batch_normalization(
    inputs,
    axis=-1,
    momentum=0.99,
    epsilon=1e-3,
    center=True,
    scale=True,
    beta_initializer=init_ops.zeros_initializer(),
    gamma_initializer=init_ops.ones_initializer(),
    moving_mean_initializer=init_ops.zeros_initializer(),
    moving_variance_initializer=init_ops.ones_initializer(),
    beta_regularizer=None,
    gamma_regularizer=None,
    beta_constraint=None,
    gamma_constraint=None,
    training=False,
    trainable=True,
    name=None,
    reuse=None,
    renorm=False,
    renorm_clipping=None,
    renorm_momentum=0.99,
    fused=None,
    virtual_batch_size=None,
    adjustment=None,
):
    """Functional BatchNormalization.

    Example:
        h = tf.layers.batch_normalization(h, training=True)
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train_op = optimizer.minimize(loss)
    """
    layer = BatchNormalization(
        axis=axis,
        momentum=momentum,
        epsilon=epsilon,
        center=center,
        scale=scale,
        beta_initializer=beta_initializer,
        gamma_initializer=gamma_initializer,
        moving_mean_initializer=moving_mean_initializer,
        moving_variance_initializer=moving_variance_initializer,
        beta_regularizer=beta_regularizer,
        gamma_regularizer=gamma_regularizer,
        beta_constraint=beta_constraint,
        gamma_constraint=gamma_constraint,
        renorm=renorm,
        renorm_clipping=renorm_clipping,
        renorm_momentum=renorm_momentum,
        fused=fused,
        trainable=trainable,
        virtual_batch_size=virtual_batch_size,
        adjustment=adjustment,
        name=name,
        _reuse=reuse,
        _scope=name,
    )
    return layer.apply(inputs, training=training)

"""tf.contrib.layers: initializers, regularizers, flatten and fully_connected (TF1 contrib)."""

from __future__ import annotations

import numbers

from flowgraph.core import dtypes
from flowgraph.framework import default_graph
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.recompute import recompute_grad
from flowgraph.layers.core import Dense, Flatten
from flowgraph.ops import init_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import nn as nn_ops
from flowgraph.ops import reduction as reduction_ops

__all__ = [
    "flatten",
    "fully_connected",
    "l1_l2_regularizer",
    "l1_regularizer",
    "l2_regularizer",
    "recompute_grad",
    "sum_regularizer",
    "variance_scaling_initializer",
    "xavier_initializer",
    "xavier_initializer_conv2d",
]


def xavier_initializer(uniform=True, seed=None, dtype=dtypes.float32):
    """Glorot & Bengio (2010): variance 2 / (fan_in + fan_out).

    (contrib's variance scaling, factor 1)."""
    return variance_scaling_initializer(1.0, "FAN_AVG", uniform, seed, dtype)


xavier_initializer_conv2d = xavier_initializer


def variance_scaling_initializer(
    factor=2.0, mode="FAN_IN", uniform=False, seed=None, dtype=dtypes.float32
):
    """contrib's He initializer: variance factor / n, n from `mode` FAN_IN, FAN_OUT or FAN_AVG.

    Unlike core's, the normal case is a truncated normal with stddev sqrt(1.3·factor/n) (no
    truncation correction) — kept as TF1 contrib defines it.
    """
    if not dtypes.as_dtype(dtype).is_floating:
        raise TypeError("Cannot create initializer for non-floating point type.")
    if mode not in ("FAN_IN", "FAN_OUT", "FAN_AVG"):
        raise TypeError(f"Unknown mode {mode} [FAN_IN, FAN_OUT, FAN_AVG]")
    core_mode = {"FAN_IN": "fan_in", "FAN_OUT": "fan_out", "FAN_AVG": "fan_avg"}[mode]
    if uniform:
        return init_ops.variance_scaling_initializer(factor, core_mode, "uniform", seed, dtype)
    # contrib: stddev = sqrt(1.3 * factor / n) = core "untruncated" sqrt(scale/n) with
    # scale = 1.3·factor, drawn from a truncated normal.
    return _ContribTruncatedScaling(1.3 * factor, core_mode, seed, dtype)


class _ContribTruncatedScaling(init_ops.variance_scaling_initializer):
    """Truncated normal with stddev sqrt(scale / n) (no division by the truncation stddev)."""

    def __init__(self, scale, mode, seed, dtype):
        super().__init__(scale, mode, "truncated_normal", seed, dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from flowgraph.ops import random as random_ops

        dtype = dtypes.as_dtype(dtype or self.dtype)
        dims = [int(d) for d in (shape.as_list() if hasattr(shape, "as_list") else shape)]
        fan_in, fan_out = init_ops._compute_fans(dims)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        stddev = (self.scale / max(1.0, n)) ** 0.5
        return random_ops.truncated_normal(dims, 0.0, stddev, dtype, seed=self.seed)


def _check_scale(scale, name):
    if isinstance(scale, numbers.Integral) and not isinstance(scale, bool):
        raise ValueError(f"scale cannot be an integer: {scale}")
    if isinstance(scale, numbers.Real):
        if scale < 0.0:
            raise ValueError(f"Setting a scale less than 0 on a regularizer: {scale}")
        return scale != 0.0
    return True


def l1_regularizer(scale, scope=None):
    """A function weights -> scale·sum(|weights|) (None when scale is 0)."""
    if not _check_scale(scale, "l1"):
        return lambda _: None

    def l1(weights):
        with default_graph.get().name_scope(scope or "l1_regularizer") as name:
            s = convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
            return math_ops.multiply(s, reduction_ops.reduce_sum(math_ops.abs(weights)), name=name)

    return l1


def l2_regularizer(scale, scope=None):
    """A function weights -> scale·sum(weights²)/2 (None when scale is 0)."""
    if not _check_scale(scale, "l2"):
        return lambda _: None

    def l2(weights):
        with default_graph.get().name_scope(scope or "l2_regularizer") as name:
            s = convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
            return math_ops.multiply(s, nn_ops.l2_loss(weights), name=name)

    return l2


def l1_l2_regularizer(scale_l1=1.0, scale_l2=1.0, scope=None):
    """The sum of an L1 and an L2 regularizer."""
    return sum_regularizer(
        [l1_regularizer(scale_l1), l2_regularizer(scale_l2)], scope=scope or "l1_l2_regularizer"
    )


def sum_regularizer(regularizer_list, scope=None):
    """A regularizer adding the losses of `regularizer_list` (None when all give None)."""
    regularizers = [r for r in regularizer_list if r is not None]
    if not regularizers:
        return lambda _: None

    def total(weights):
        with default_graph.get().name_scope(scope or "sum_regularizer") as name:
            losses = [loss for loss in (r(weights) for r in regularizers) if loss is not None]
            return math_ops.add_n(losses, name=name) if losses else None

    return total


def flatten(inputs, outputs_collections=None, scope=None):
    """[batch, ...] -> [batch, k] (contrib's name scope is 'Flatten')."""
    if outputs_collections is not None:
        raise NotImplementedError(
            "contrib.layers.flatten(outputs_collections=...) is not supported."
        )
    with default_graph.get().name_scope(scope or "Flatten"):
        return Flatten(name="flatten").apply(inputs)


def fully_connected(
    inputs,
    num_outputs,
    activation_fn=nn_ops.relu,
    normalizer_fn=None,
    normalizer_params=None,
    weights_initializer=None,
    weights_regularizer=None,
    biases_initializer=init_ops.zeros_initializer(),
    biases_regularizer=None,
    reuse=None,
    variables_collections=None,
    outputs_collections=None,
    trainable=True,
    scope=None,
):
    """contrib's dense layer: variables `fully_connected/weights` and `fully_connected/biases`."""
    for arg, value in (
        ("normalizer_fn", normalizer_fn),
        ("normalizer_params", normalizer_params),
        ("variables_collections", variables_collections),
        ("outputs_collections", outputs_collections),
    ):
        if value is not None:
            raise NotImplementedError(
                f"contrib.layers.fully_connected({arg}=...) is not supported."
            )
    layer = _ContribDense(
        num_outputs,
        activation=activation_fn,
        use_bias=biases_initializer is not None,
        kernel_initializer=weights_initializer or xavier_initializer(),
        bias_initializer=biases_initializer,
        kernel_regularizer=weights_regularizer,
        bias_regularizer=biases_regularizer,
        trainable=trainable,
        name=scope or "fully_connected",
        _scope=scope,
        _reuse=reuse,
    )
    return layer.apply(inputs)


class _ContribDense(Dense):
    """Dense with contrib's variable names (`weights`, `biases`)."""

    def add_weight(self, name, shape, **kwargs):
        return super().add_weight(
            {"kernel": "weights", "bias": "biases"}.get(name, name), shape, **kwargs
        )

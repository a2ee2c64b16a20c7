"""tf.nn (Table 1 "Neural-net building blocks"): activations, softmax, bias, losses,
normalization, top-k, dropout and embeddings, with TF 1.15's signatures.

Ops with a kernel end in `apply_op`; composites (moments, l2_normalize, the sigmoid
cross-entropies, dropout, ...) are built from math and array ops exactly as TF1 builds them, so
their gradients come from those ops'. Convolution and pooling live in `nn_conv.py`, embeddings
and candidate sampling in `embedding.py` and `candidate_sampling.py`; all are re-exported here,
since `flowgraph.namespaces` assembles tf.nn from this module's `__all__`.
"""

from __future__ import annotations

import collections
import numbers

from flowgraph.core import dtypes, errors
from flowgraph.framework.apply_op import apply_op, graph_of
from flowgraph.framework.convert import constant_value, convert_to_tensor
from flowgraph.framework.operation import Tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import candidate_sampling, embedding, nn_conv
from flowgraph.ops import linalg as linalg_ops
from flowgraph.ops import logging as logging_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import random as random_ops
from flowgraph.ops import reduction as reduction_ops

__all__ = (
    [
        "relu",
        "relu6",
        "elu",
        "selu",
        "leaky_relu",
        "softplus",
        "softsign",
        "crelu",
        "sigmoid",
        "tanh",
        "softmax",
        "log_softmax",
        "bias_add",
        "xw_plus_b",
        "l2_loss",
        "l2_normalize",
        "moments",
        "batch_normalization",
        "fused_batch_norm",
        "lrn",
        "local_response_normalization",
        "softmax_cross_entropy_with_logits",
        "softmax_cross_entropy_with_logits_v2",
        "sparse_softmax_cross_entropy_with_logits",
        "sigmoid_cross_entropy_with_logits",
        "weighted_cross_entropy_with_logits",
        "log_poisson_loss",
        "top_k",
        "in_top_k",
        "dropout",
        "relu_layer",
    ]
    + nn_conv.__all__
    + embedding.__all__
    + candidate_sampling.__all__
)


def _scope(name, default, values):
    """Enters the name scope of a composite op in the graph of its inputs (TF's ops.name_scope)."""
    graph = graph_of(list(values))
    return graph, graph.name_scope(name or default)


# -- activations ----------------------------------------------------------------------------------
def relu(features, name=None):
    """max(features, 0). Example: h = tf.nn.relu(tf.matmul(x, w) + b)"""
    return apply_op("Relu", [features], name=name).outputs[0]


def relu6(features, name=None):
    """min(max(features, 0), 6)."""
    return apply_op("Relu6", [features], name=name).outputs[0]


def elu(features, name=None):
    """exp(features) - 1 where features < 0, else features."""
    return apply_op("Elu", [features], name=name).outputs[0]


def selu(features, name=None):
    """scale * elu-like(features) with the self-normalizing constants of Klambauer et al."""
    return apply_op("Selu", [features], name=name).outputs[0]


def leaky_relu(features, alpha=0.2, name=None):
    """features where positive, else alpha * features."""
    return apply_op("LeakyRelu", [features], name=name, alpha=float(alpha)).outputs[0]


def softplus(features, name=None):
    """log(exp(features) + 1), computed without overflow."""
    return apply_op("Softplus", [features], name=name).outputs[0]


def softsign(features, name=None):
    """features / (abs(features) + 1)."""
    return apply_op("Softsign", [features], name=name).outputs[0]


def crelu(features, name=None, axis=-1):
    """Concatenated ReLU: relu(concat([features, -features], axis))."""
    graph, scope = _scope(name, "CRelu", [features])
    with graph.as_default(), scope as scope_name:
        features = convert_to_tensor(features, name="features")
        both = array_ops.concat([features, math_ops.negative(features)], axis)
        return relu(both, name=scope_name)


def sigmoid(x, name=None):
    """tf.nn.sigmoid is tf.sigmoid."""
    return math_ops.sigmoid(x, name=name)


def tanh(x, name=None):
    """tf.nn.tanh is tf.tanh."""
    return math_ops.tanh(x, name=name)


# -- softmax --------------------------------------------------------------------------------------
def _axis_arg(axis, dim, default=-1):
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    return default if axis is None and dim is None else (axis if axis is not None else dim)


def _on_last_axis(op_type, logits, axis, name):
    """Softmax/LogSoftmax work on the last axis; another axis is swapped there and back. The
    axis may be a tensor (its value read at run time when it is not constant)."""
    logits = convert_to_tensor(logits, name="logits")
    rank = logits.shape.ndims
    if isinstance(axis, Tensor):
        value = constant_value(axis)
        axis = int(value) if value is not None else axis
    if isinstance(axis, Tensor) or rank is None:
        if not isinstance(axis, Tensor) and axis == -1:
            return apply_op(op_type, [logits], name=name).outputs[0]
        dynamic_rank = array_ops.rank(logits)
        axis = convert_to_tensor(axis, dtype=dtypes.int32, name="axis")
        # floormod would wrap an out-of-range axis silently: check it first, as TF's shape
        # function does for a constant one.
        in_range = math_ops.logical_and(
            math_ops.greater_equal(axis, -dynamic_rank), math_ops.less(axis, dynamic_rank)
        )
        message = "Dimension must be in the range [-rank, rank); dimension, rank:"
        check = logging_ops.Assert(in_range, [message, axis, dynamic_rank])
        with graph_of([logits]).control_dependencies([check]):
            axis = math_ops.floormod(axis, dynamic_rank)
        positions = array_ops.range_(dynamic_rank)
        last = dynamic_rank - 1

        def at(position):
            return math_ops.cast(math_ops.equal(positions, position), dtypes.int32)

        perm = positions + at(axis) * (last - axis) + at(last) * (axis - last)
        result = apply_op(op_type, [array_ops.transpose(logits, perm)]).outputs[0]
        result = array_ops.transpose(result, perm, name=name)
        result.set_shape(logits.shape)
        return result
    if not -rank <= axis < rank:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Dimension ({axis}) must be in the range [{-rank}, {rank}) where {rank} is the "
            "number of dimensions in the input.",
        )
    if axis % rank == rank - 1:
        return apply_op(op_type, [logits], name=name).outputs[0]
    perm = list(range(rank))
    perm[axis % rank], perm[-1] = perm[-1], perm[axis % rank]
    swapped = array_ops.transpose(logits, perm)
    result = apply_op(op_type, [swapped]).outputs[0]
    return array_ops.transpose(result, perm, name=name)


def softmax(logits, axis=None, name=None, dim=None):
    """exp(logits) / sum(exp(logits), axis), along `axis` (default the last; `dim` is TF1's
    name)."""
    return _on_last_axis("Softmax", logits, _axis_arg(axis, dim), name)


def log_softmax(logits, axis=None, name=None, dim=None):
    """logits - log(sum(exp(logits), axis)), computed stably."""
    return _on_last_axis("LogSoftmax", logits, _axis_arg(axis, dim), name)


# -- bias and dense layers -------------------------------------------------------------------------
def bias_add(value, bias, data_format=None, name=None):
    """value + bias, with `bias` a vector along the channel axis (last for NHWC, 1 for NCHW)."""
    data_format = data_format or "NHWC"
    if data_format not in ("NHWC", "NCHW", "N..C", "NC.."):
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    data_format = "NCHW" if data_format.startswith("NC") else "NHWC"
    graph, scope = _scope(name, "BiasAdd", [value, bias])
    with graph.as_default(), scope as scope_name:
        value = convert_to_tensor(value, name="input")
        bias = convert_to_tensor(bias, dtype=value.dtype, name="bias")
        return apply_op("BiasAdd", [value, bias], name=scope_name, data_format=data_format).outputs[
            0
        ]


def xw_plus_b(x, weights, biases, name=None):
    """matmul(x, weights) + biases."""
    graph, scope = _scope(name, "xw_plus_b", [x, weights, biases])
    with graph.as_default(), scope as scope_name:
        return bias_add(linalg_ops.matmul(x, weights), biases, name=scope_name)


def relu_layer(x, weights, biases, name=None):
    """relu(matmul(x, weights) + biases)."""
    graph, scope = _scope(name, "relu_layer", [x, weights, biases])
    with graph.as_default(), scope as scope_name:
        return relu(bias_add(linalg_ops.matmul(x, weights), biases), name=scope_name)


# -- losses and normalization ----------------------------------------------------------------------
def l2_loss(t, name=None):
    """sum(t ** 2) / 2."""
    return apply_op("L2Loss", [t], name=name).outputs[0]


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """x / sqrt(max(sum(x ** 2, axis), epsilon))."""
    axis = _axis_arg(axis, dim, default=None)
    graph, scope = _scope(name, "l2_normalize", [x])
    with graph.as_default(), scope as scope_name:
        x = convert_to_tensor(x, name="x")
        square_sum = reduction_ops.reduce_sum(math_ops.square(x), axis, keepdims=True)
        inv_norm = math_ops.rsqrt(math_ops.maximum(square_sum, math_ops.cast(epsilon, x.dtype)))
        return math_ops.multiply(x, inv_norm, name=scope_name)


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """(mean, variance) of `x` over `axes`; `shift` is accepted and unused, as in TF 1.15."""
    if keep_dims is not None and keepdims is not None:
        raise ValueError("Cannot specify both 'keep_dims' and 'keepdims'")
    keep = bool(keep_dims if keep_dims is not None else keepdims)
    graph, scope = _scope(name, "moments", [x, axes])
    with graph.as_default(), scope:
        x = convert_to_tensor(x, name="x")
        # half statistics are accumulated in float32, as TF does.
        y = math_ops.cast(x, dtypes.float32) if x.dtype == dtypes.float16 else x
        mean = reduction_ops.reduce_mean(y, axes, keepdims=True, name="mean")
        variance = reduction_ops.reduce_mean(
            math_ops.squared_difference(y, array_ops.stop_gradient(mean)),
            axes,
            keepdims=True,
            name="variance",
        )
        if not keep:
            mean = array_ops.squeeze(mean, axes)
            variance = array_ops.squeeze(variance, axes)
        if x.dtype == dtypes.float16:
            return math_ops.cast(mean, dtypes.float16), math_ops.cast(variance, dtypes.float16)
        return mean, variance


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """scale * (x - mean) / sqrt(variance + epsilon) + offset; offset and scale may be None."""
    graph, scope = _scope(name, "batchnorm", [x, mean, variance, scale, offset])
    with graph.as_default(), scope as scope_name:
        inv = math_ops.rsqrt(math_ops.add(variance, variance_epsilon))
        if scale is not None:
            inv = math_ops.multiply(inv, scale)
        shift = math_ops.multiply(mean, inv)
        shift = math_ops.subtract(offset, shift) if offset is not None else math_ops.negative(shift)
        x = convert_to_tensor(x, name="x")
        return math_ops.add(
            math_ops.multiply(x, math_ops.cast(inv, x.dtype)),
            math_ops.cast(shift, x.dtype),
            name=scope_name,
        )


def fused_batch_norm(
    x,
    scale,
    offset=None,
    mean=None,
    variance=None,
    epsilon=0.001,
    data_format="NHWC",
    is_training=True,
    name=None,
    exponential_avg_factor=1.0,
):
    """Batch normalization of a 4-D `x` in one op: returns (y, batch_mean, batch_variance).

    In training, mean and variance are the batch's (the returned variance is unbiased); in
    inference they must be given.
    """
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    if not is_training and (mean is None or variance is None):
        raise ValueError(
            "Both 'mean' and 'variance' must be a 1D tensor when is_training is False."
        )
    graph, scope = _scope(name, "FusedBatchNorm", [x, scale, offset])
    with graph.as_default(), scope as scope_name:
        x = convert_to_tensor(x, name="input")
        scale = convert_to_tensor(scale, name="scale")
        u = scale.dtype
        empty = convert_to_tensor([], dtype=u)
        offset = (
            array_ops.zeros_like(scale) if offset is None else convert_to_tensor(offset, dtype=u)
        )
        mean = empty if mean is None else convert_to_tensor(mean, dtype=u)
        variance = empty if variance is None else convert_to_tensor(variance, dtype=u)
        # TF1 avoids eps < 1.001e-5 (cuDNN's minimum); the CPU result is the same either way.
        epsilon = max(float(epsilon), 1.001e-5)
        op = apply_op(
            "FusedBatchNormV3",
            [x, scale, offset, mean, variance],
            name=scope_name,
            epsilon=epsilon,
            data_format=data_format,
            is_training=bool(is_training),
            exponential_avg_factor=float(exponential_avg_factor),
        )
        return op.outputs[0], op.outputs[1], op.outputs[2]


def local_response_normalization(input, depth_radius=5, bias=1, alpha=1, beta=0.5, name=None):
    """input / (bias + alpha * sum of squares over nearby channels) ** beta (4-D, NHWC)."""
    return apply_op(
        "LRN",
        [input],
        name=name,
        depth_radius=int(depth_radius),
        bias=float(bias),
        alpha=float(alpha),
        beta=float(beta),
    ).outputs[0]


lrn = local_response_normalization


# -- top-k -----------------------------------------------------------------------------------------
TopKV2 = collections.namedtuple("TopKV2", ["values", "indices"])


def top_k(input, k=1, sorted=True, name=None, index_type=dtypes.int32):
    """The k largest entries of the last axis and their indices (ties: the lower index first).
    `index_type` (int16, int32 or int64; newer TF's argument) types the indices."""
    op = apply_op(
        "TopKV2",
        [input, convert_to_tensor(k, preferred_dtype=dtypes.int32)],
        name=name,
        sorted=bool(sorted),
        index_type=dtypes.as_dtype(index_type),
    )
    return TopKV2(op.outputs[0], op.outputs[1])


def in_top_k(predictions, targets, k, name=None):
    """Whether each target's prediction is among the k largest of its row (bool vector)."""
    targets = convert_to_tensor(targets, name="targets")
    op = apply_op(
        "InTopKV2", [predictions, targets, convert_to_tensor(k, dtype=targets.dtype)], name=name
    )
    return op.outputs[0]


# -- dropout ---------------------------------------------------------------------------------------
def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Keeps each element with probability 1 - rate (scaled by 1 / (1 - rate)), else zeroes it.

    Exactly one of `keep_prob` (TF1) and `rate` must be given. Example: tf.nn.dropout(h, rate=0.5)
    """
    if (keep_prob is None) == (rate is None):
        raise ValueError("Exactly one of 'keep_prob' and 'rate' must be given")
    graph, scope = _scope(name, "dropout", [x])
    with graph.as_default(), scope as scope_name:
        x = convert_to_tensor(x, name="x")
        if not x.dtype.is_floating:
            raise ValueError(
                f"x has to be a floating point tensor since it's going to be scaled. Got a "
                f"{x.dtype.name} tensor instead."
            )
        if keep_prob is None:
            if isinstance(rate, numbers.Real) and not 0 <= rate < 1:
                raise ValueError(
                    f"rate must be a scalar tensor or a float in the range [0, 1), got {rate}"
                )
            keep_prob = math_ops.subtract(
                convert_to_tensor(1.0, dtype=x.dtype), convert_to_tensor(rate, dtype=x.dtype)
            )
        elif isinstance(keep_prob, numbers.Real) and not 0 < keep_prob <= 1:
            raise ValueError(
                f"keep_prob must be a scalar tensor or a float in the range (0, 1], got {keep_prob}"
            )
        keep_prob = convert_to_tensor(keep_prob, dtype=x.dtype, name="keep_prob")
        shape = array_ops.shape(x) if noise_shape is None else noise_shape
        # keep_prob + U[0, 1) is >= 1 with probability keep_prob: its floor is the keep mask.
        uniform = random_ops.random_uniform(shape, seed=seed, dtype=x.dtype)
        mask = math_ops.floor(math_ops.add(keep_prob, uniform))
        result = math_ops.multiply(math_ops.divide(x, keep_prob), mask, name=scope_name)
        if noise_shape is None:
            result.set_shape(x.shape)
        return result


# -- re-exports: tf.nn also holds the convolution, pooling, embedding and sampling ops -------------
from flowgraph.ops.candidate_sampling import (  # noqa: F401
    compute_accidental_hits,
    log_uniform_candidate_sampler,
    nce_loss,
    sampled_softmax_loss,
    uniform_candidate_sampler,
)
from flowgraph.ops.embedding import embedding_lookup  # noqa: F401
from flowgraph.ops.nn_conv import (  # noqa: F401
    atrous_conv2d,
    avg_pool,
    avg_pool2d,
    conv1d,
    conv2d,
    conv2d_backprop_filter,
    conv2d_backprop_input,
    conv2d_transpose,
    depthwise_conv2d,
    depthwise_conv2d_native,
    depthwise_conv2d_native_backprop_filter,
    depthwise_conv2d_native_backprop_input,
    max_pool,
    max_pool2d,
    separable_conv2d,
)
from flowgraph.ops.nn_xent import (
    log_poisson_loss,
    sigmoid_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits_v2,
    sparse_softmax_cross_entropy_with_logits,
    weighted_cross_entropy_with_logits,
)

"""The cross-entropy losses of tf.nn: softmax (dense and sparse labels) and sigmoid (plain and
weighted), built as TensorFlow 1.15 builds them.

The softmax ops' kernels take matrices, so inputs of any rank, known or only known at run
time, are flattened to [-1, classes] and the cost reshaped back; labels need only flatten to
the same matrix (a program's `[y]` of shape (1, ?, 7) against logits (?, 7) works, as in TF).
float16 and bfloat16 logits are computed in float32 and the cost cast back.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.framework.apply_op import apply_op, graph_of
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import array_index, nn_conv
from flowgraph.ops import logging as logging_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import reduction as reduction_ops

_LOW_PRECISION = (dtypes.float16, dtypes.bfloat16)


def _scope(name, default, values):
    graph = graph_of(list(values))
    return graph, graph.name_scope(name or default)


def _named_only(sentinel, fn_name):
    if sentinel is not None:
        raise ValueError(
            f"Only call `{fn_name}` with named arguments (labels=..., logits=..., ...)"
        )


def _flatten_outer_dims(t):
    """`t` as a matrix [product of the outer dims, last dim], whatever its rank."""
    last = array_index.slice(array_ops.shape(t), array_ops.reshape(array_ops.rank(t) - 1, [1]), [1])
    flat = array_ops.reshape(t, array_ops.concat([[-1], last], 0))
    dims = t.shape.as_list() if t.shape.ndims is not None else None
    if dims:
        outer = None if None in dims[:-1] else int(np.prod(dims[:-1], dtype=np.int64))
        flat.set_shape([outer, dims[-1]])
    return flat


def _move_axis_to_end(t, axis, rank):
    """`t` with dimension `axis` (a Python int or a scalar tensor, may be negative) moved to
    the end, the others keeping their order: perm [0..axis-1, axis+1..rank-1, axis]."""
    axis = math_ops.floormod(axis, rank)
    positions = array_ops.range_(rank)
    after = math_ops.cast(math_ops.greater_equal(positions, axis), dtypes.int32)
    is_last = math_ops.cast(math_ops.equal(positions, rank - 1), dtypes.int32)
    perm = positions + after - is_last * (rank - axis)
    return array_ops.transpose(t, perm)


def softmax_cross_entropy_with_logits_v2(labels, logits, axis=-1, name=None, dim=None):
    """Per-example -sum(labels * log_softmax(logits)) along `axis` (a Python int or a scalar
    tensor); gradients flow into labels too.

    Example: loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_one_hot, logits=z)
    """
    if dim is not None:
        if axis not in (-1, None):
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    axis = -1 if axis is None else axis
    graph, scope = _scope(name, "softmax_cross_entropy_with_logits", [logits, labels])
    with graph.as_default(), scope as scope_name:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, name="labels")
        static_shape = logits.shape
        if static_shape.ndims == 0:
            raise ValueError("logits must have at least one dimension")
        low_precision = logits.dtype.base_dtype in _LOW_PRECISION
        precise = math_ops.cast(logits, dtypes.float32) if low_precision else logits
        labels = math_ops.cast(labels, precise.dtype)
        if static_shape.ndims == 2 and labels.shape.ndims == 2 and _is_last(axis, 2):
            # matrices already: the op alone (TF's Grappler folds the flattening away)
            cost = apply_op(
                "SoftmaxCrossEntropyWithLogits", [precise, labels], name=scope_name
            ).outputs[0]
            return math_ops.cast(cost, logits.dtype) if low_precision else cost
        rank = array_ops.rank(precise)
        if not (isinstance(axis, int) and (axis == -1 or axis == (static_shape.ndims or 0) - 1)):
            if isinstance(axis, int) and static_shape.ndims is not None:
                _check_axis(axis, static_shape.ndims)
            precise = _move_axis_to_end(precise, axis, rank)
            labels = _move_axis_to_end(labels, axis, rank)
        input_shape = array_ops.shape(precise)
        cost = apply_op(
            "SoftmaxCrossEntropyWithLogits",
            [_flatten_outer_dims(precise), _flatten_outer_dims(labels)],
            name=scope_name,
        ).outputs[0]
        cost = array_ops.reshape(
            cost, array_index.slice(input_shape, [0], array_ops.reshape(rank - 1, [1]))
        )
        if static_shape.ndims is not None:
            dims = static_shape.as_list()
            if isinstance(axis, int):
                del dims[axis]
                cost.set_shape(dims)
            else:
                cost.set_shape([None] * (len(dims) - 1))
        return math_ops.cast(cost, logits.dtype) if low_precision else cost


def _is_last(axis, ndims):
    return isinstance(axis, int) and axis in (-1, ndims - 1)


def _check_axis(axis, ndims):
    if not -ndims <= axis < ndims:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Dimension ({axis}) must be in the range [{-ndims}, {ndims}) where {ndims} is the "
            "number of dimensions in the input.",
        )


def softmax_cross_entropy_with_logits(
    _sentinel=None, labels=None, logits=None, dim=-1, name=None, axis=None
):
    """TF1's version: like _v2 but no gradient flows into `labels` (they are wrapped in
    stop_gradient)."""
    _named_only(_sentinel, "softmax_cross_entropy_with_logits")
    if axis is not None and dim != -1:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = dim if axis is None else axis
    graph, scope = _scope(name, "softmax_cross_entropy_with_logits_sg", [logits, labels])
    with graph.as_default(), scope as scope_name:
        labels = array_ops.stop_gradient(labels, name="labels_stop_gradient")
        return softmax_cross_entropy_with_logits_v2(
            labels=labels, logits=logits, axis=axis, name=scope_name
        )


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """Per-example -log_softmax(logits)[label]; labels are class indices of rank rank(logits) - 1.

    A label outside [0, num_classes) is an InvalidArgumentError when the op runs; with shapes
    known only at run time, mismatched labels fail an assert there.
    """
    _named_only(_sentinel, "sparse_softmax_cross_entropy_with_logits")
    graph, scope = _scope(name, "SparseSoftmaxCrossEntropyWithLogits", [labels, logits])
    with graph.as_default(), scope:
        labels = convert_to_tensor(labels, name="labels")
        logits = convert_to_tensor(logits, name="logits")
        low_precision = logits.dtype.base_dtype in _LOW_PRECISION
        precise = math_ops.cast(logits, dtypes.float32) if low_precision else logits
        rank, label_rank = logits.shape.ndims, labels.shape.ndims
        if rank == 0:
            raise ValueError(f"Logits cannot be scalars - received shape {logits.shape}.")
        if rank is not None and label_rank is not None and label_rank != rank - 1:
            raise ValueError(
                f"Rank mismatch: Rank of labels (received {label_rank}) should equal rank of "
                f"logits minus 1 (received {rank})."
            )
        fully_defined = labels.shape.is_fully_defined() and (
            rank is not None and logits.shape[:-1].is_fully_defined()
        )
        if fully_defined and labels.shape.as_list() != logits.shape.as_list()[:-1]:
            raise ValueError(
                f"Shape mismatch: The shape of labels (received {labels.shape}) should equal the "
                f"shape of logits except for the last dimension (received {logits.shape})."
            )
        op_name = name or "SparseSoftmaxCrossEntropyWithLogits"
        if rank == 2:
            cost = apply_op(
                "SparseSoftmaxCrossEntropyWithLogits", [precise, labels], name=op_name
            ).outputs[0]
            return math_ops.cast(cost, logits.dtype) if low_precision else cost
        checks = []
        if not fully_defined:
            labels_shape, outer = array_ops.shape(labels), array_ops.shape(logits)[:-1]
            same = reduction_ops.reduce_all(math_ops.equal(labels_shape, outer))
            message = "labels must have the shape of logits without its last dimension"
            checks.append(logging_ops.Assert(same, [message, labels_shape, outer]))
        with graph.control_dependencies(checks):
            classes = array_ops.shape(logits)[array_ops.rank(logits) - 1]
            flat_logits = array_ops.reshape(precise, array_ops.stack([-1, classes]))
            labels_shape = array_ops.shape(labels)
            cost = apply_op(
                "SparseSoftmaxCrossEntropyWithLogits",
                [flat_logits, array_ops.reshape(labels, [-1])],
                name=op_name,
            ).outputs[0]
            cost = array_ops.reshape(cost, labels_shape)
            cost.set_shape(labels.shape)
            return math_ops.cast(cost, logits.dtype) if low_precision else cost


def _same_shape(labels, logits):
    if not labels.shape.is_compatible_with(logits.shape):
        raise ValueError(
            f"logits and labels must have the same shape ({logits.shape} vs {labels.shape})"
        )


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """Element-wise max(x, 0) - x * z + log(1 + exp(-|x|)) for logits x and labels z (stable)."""
    _named_only(_sentinel, "sigmoid_cross_entropy_with_logits")
    graph, scope = _scope(name, "logistic_loss", [logits, labels])
    with graph.as_default(), scope as scope_name:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, dtype=logits.dtype, name="labels")
        _same_shape(labels, logits)
        zeros = array_ops.zeros_like(logits)
        cond = math_ops.greater_equal(logits, zeros)
        relu_logits = math_ops.where(cond, logits, zeros)
        neg_abs_logits = math_ops.where(cond, math_ops.negative(logits), logits)
        return math_ops.add(
            math_ops.subtract(relu_logits, math_ops.multiply(logits, labels)),
            math_ops.log1p(math_ops.exp(neg_abs_logits)),
            name=scope_name,
        )


def weighted_cross_entropy_with_logits(
    labels=None, logits=None, pos_weight=None, name=None, targets=None
):
    """Sigmoid cross-entropy whose positive term is weighted by `pos_weight` (TF1 `targets` =
    labels)."""
    labels = nn_conv._one_of(labels, targets, "labels", "targets")
    if pos_weight is None:
        raise ValueError("pos_weight is required")
    graph, scope = _scope(name, "logistic_loss", [logits, labels])
    with graph.as_default(), scope as scope_name:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, dtype=logits.dtype, name="labels")
        _same_shape(labels, logits)
        pos_weight = convert_to_tensor(pos_weight, dtype=logits.dtype)
        one = convert_to_tensor(1.0, dtype=logits.dtype)
        log_weight = math_ops.add(
            one, math_ops.multiply(math_ops.subtract(pos_weight, one), labels)
        )
        softplus_neg = math_ops.add(
            math_ops.log1p(math_ops.exp(math_ops.negative(math_ops.abs(logits)))),
            math_ops.maximum(math_ops.negative(logits), 0.0),
        )
        return math_ops.add(
            math_ops.multiply(math_ops.subtract(one, labels), logits),
            math_ops.multiply(log_weight, softplus_neg),
            name=scope_name,
        )


def log_poisson_loss(targets, log_input, compute_full_loss=False, name=None):
    """Element-wise negative log-likelihood of `targets` under Poisson(exp(log_input)):
    exp(log_input) - log_input * targets, plus Stirling's approximation of log(targets!) (for
    targets > 1) when `compute_full_loss` (TF 1.15's nn_impl.log_poisson_loss)."""
    graph, scope = _scope(name, "log_poisson_loss", [log_input, targets])
    with graph.as_default(), scope as scope_name:
        log_input = convert_to_tensor(log_input, name="log_input")
        targets = convert_to_tensor(targets, name="targets")
        if not targets.shape.is_compatible_with(log_input.shape):
            raise ValueError(
                f"log_input and targets must have the same shape ({log_input.shape} vs "
                f"{targets.shape})"
            )
        result = math_ops.subtract(
            math_ops.exp(log_input),
            math_ops.multiply(log_input, targets),
            name=None if compute_full_loss else scope_name,
        )
        if not compute_full_loss:
            return result
        point_five = convert_to_tensor(0.5, dtype=targets.dtype)
        two_pi = convert_to_tensor(2 * np.pi, dtype=targets.dtype)
        stirling = (targets * math_ops.log(targets)) - targets
        stirling = stirling + point_five * math_ops.log(two_pi * targets)
        zeros = array_ops.zeros_like(targets, dtype=targets.dtype)
        ones = array_ops.ones_like(targets, dtype=targets.dtype)
        small = math_ops.logical_and(
            math_ops.greater_equal(targets, zeros), math_ops.less_equal(targets, ones)
        )
        return math_ops.add(result, math_ops.where(small, zeros, stirling), name=scope_name)

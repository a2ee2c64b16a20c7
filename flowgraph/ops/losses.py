"""tf.losses: per-example losses reduced with weights, and the LOSSES collection.

Each loss computes per-element values in float32, multiplies them by `weights` (a scalar or a
tensor broadcastable to the losses), reduces them as `reduction` says, casts the result back to
the input dtype and adds it to `loss_collection`, so `get_total_loss()` can sum a model's losses
with the regularization losses that `get_variable(regularizer=...)` collected.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import graph_of
from flowgraph.framework.convert import constant, convert_to_tensor
from flowgraph.framework.graph import GraphKeys
from flowgraph.ops import array as array_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import nn as nn_ops
from flowgraph.ops import reduction as reduction_ops

__all__ = [
    "Reduction",
    "absolute_difference",
    "add_loss",
    "compute_weighted_loss",
    "cosine_distance",
    "get_losses",
    "get_regularization_loss",
    "get_regularization_losses",
    "get_total_loss",
    "hinge_loss",
    "huber_loss",
    "log_loss",
    "mean_pairwise_squared_error",
    "mean_squared_error",
    "sigmoid_cross_entropy",
    "softmax_cross_entropy",
    "sparse_softmax_cross_entropy",
]


class Reduction:
    """How `compute_weighted_loss` reduces the weighted per-element losses."""

    NONE = "none"  # keep the per-element losses
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"  # sum / number of elements
    MEAN = "weighted_mean"  # sum / sum of the (broadcast) weights
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"  # sum / count of nonzero weights
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (
            cls.NONE,
            cls.SUM,
            cls.MEAN,
            cls.SUM_OVER_BATCH_SIZE,
            cls.SUM_OVER_NONZERO_WEIGHTS,
            cls.SUM_BY_NONZERO_WEIGHTS,
        )

    @classmethod
    def validate(cls, key):
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}.")


def _name_scope(name, default, values):
    graph = graph_of(list(values)) if values else default_graph.get()
    return graph.name_scope(name or default)


def _check_broadcastable(weights, losses):
    """Weights must be a scalar or have the losses' rank with each dim 1 or equal (TF1's rule)."""
    w, l = weights.get_shape(), losses.get_shape()
    if w.ndims is None or l.ndims is None or w.ndims == 0:
        return
    if w.ndims != l.ndims:
        raise ValueError(
            f"weights can not be broadcast to values. values.rank={l.ndims}. "
            f"weights.rank={w.ndims}. "
            f"values.shape={l}. weights.shape={w}."
        )
    for dw, dl in zip(w.as_list(), l.as_list()):
        if dw is not None and dl is not None and dw not in (1, dl):
            raise ValueError(
                f"weights can not be broadcast to values. values.shape={l}. weights.shape={w}."
            )


def _num_elements(losses):
    return math_ops.cast(array_ops.size(losses), losses.dtype, name="num_elements")


def _num_present(losses, weights):
    """How many losses have a nonzero weight (after broadcasting the weights)."""
    with default_graph.get().name_scope("num_present"):
        nonzero = math_ops.cast(math_ops.not_equal(weights, 0.0), dtypes.float32)
        present = nonzero * array_ops.ones_like(losses)
        return reduction_ops.reduce_sum(present)


def compute_weighted_loss(
    losses,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Weights `losses` and reduces them; the result is added to `loss_collection`.

    Example: loss = tf.losses.compute_weighted_loss(per_example, weights=mask)
    """
    Reduction.validate(reduction)
    with _name_scope(scope, "weighted_loss", (losses, weights)):
        losses = convert_to_tensor(losses)
        input_dtype = losses.dtype.base_dtype
        losses = math_ops.cast(losses, dtypes.float32)
        weights = math_ops.cast(convert_to_tensor(weights), dtypes.float32)
        _check_broadcastable(weights, losses)
        weighted = math_ops.multiply(losses, weights)
        if reduction == Reduction.NONE:
            loss = weighted
        else:
            loss = reduction_ops.reduce_sum(weighted)
            if reduction == Reduction.MEAN:
                denom = reduction_ops.reduce_sum(array_ops.ones_like(losses) * weights)
                loss = math_ops.div_no_nan(loss, denom, name="value")
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = math_ops.div_no_nan(loss, _num_present(losses, weights), name="value")
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = math_ops.div_no_nan(loss, _num_elements(losses), name="value")
        loss = math_ops.cast(loss, input_dtype)
        add_loss(loss, loss_collection)
        return loss


def _check_args(**args):
    for name, value in args.items():
        if value is None:
            raise ValueError(f"{name} must not be None.")


def _float_pair(labels, predictions):
    predictions = math_ops.cast(convert_to_tensor(predictions), dtypes.float32)
    labels = math_ops.cast(convert_to_tensor(labels), dtypes.float32)
    predictions.get_shape().assert_is_compatible_with(labels.get_shape())
    return labels, predictions


def absolute_difference(
    labels,
    predictions,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Weighted |predictions - labels|."""
    _check_args(labels=labels, predictions=predictions)
    with _name_scope(scope, "absolute_difference", (predictions, labels, weights)) as scope:
        labels, predictions = _float_pair(labels, predictions)
        losses = math_ops.abs(math_ops.subtract(predictions, labels))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def mean_squared_error(
    labels,
    predictions,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Weighted (predictions - labels)².

    Example: loss = tf.losses.mean_squared_error(y, y_hat)
    """
    _check_args(labels=labels, predictions=predictions)
    with _name_scope(scope, "mean_squared_error", (predictions, labels, weights)) as scope:
        labels, predictions = _float_pair(labels, predictions)
        losses = math_ops.squared_difference(predictions, labels)
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def hinge_loss(
    labels,
    logits,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """max(0, 1 - y·logits) with labels in {0, 1} mapped to y in {-1, 1}."""
    _check_args(labels=labels, logits=logits)
    with _name_scope(scope, "hinge_loss", (logits, labels, weights)) as scope:
        labels, logits = _float_pair(labels, logits)
        all_ones = array_ops.ones_like(labels)
        signs = math_ops.subtract(2.0 * labels, all_ones)
        losses = nn_ops.relu(math_ops.subtract(all_ones, math_ops.multiply(signs, logits)))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def huber_loss(
    labels,
    predictions,
    weights=1.0,
    delta=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """0.5·e² where |e| <= delta, delta·(|e| - 0.5·delta) beyond: quadratic near 0, linear far."""
    _check_args(labels=labels, predictions=predictions)
    with _name_scope(scope, "huber_loss", (predictions, labels, weights)) as scope:
        labels, predictions = _float_pair(labels, predictions)
        abs_error = math_ops.abs(math_ops.subtract(predictions, labels))
        quadratic = math_ops.minimum(abs_error, delta)
        linear = math_ops.subtract(abs_error, quadratic)
        losses = math_ops.add(
            0.5 * math_ops.multiply(quadratic, quadratic), math_ops.multiply(delta, linear)
        )
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def log_loss(
    labels,
    predictions,
    weights=1.0,
    epsilon=1e-7,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Binary cross-entropy of probabilities: -y·log(p + eps) - (1 - y)·log(1 - p + eps)."""
    _check_args(labels=labels, predictions=predictions)
    with _name_scope(scope, "log_loss", (predictions, labels, weights)) as scope:
        labels, predictions = _float_pair(labels, predictions)
        losses = -math_ops.multiply(
            labels, math_ops.log(predictions + epsilon)
        ) - math_ops.multiply(1.0 - labels, math_ops.log(1.0 - predictions + epsilon))
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def sigmoid_cross_entropy(
    multi_class_labels,
    logits,
    weights=1.0,
    label_smoothing=0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Sigmoid cross-entropy; `label_smoothing` moves labels towards 1/2: y·(1-s) + s/2."""
    _check_args(multi_class_labels=multi_class_labels, logits=logits)
    with _name_scope(
        scope, "sigmoid_cross_entropy_loss", (logits, multi_class_labels, weights)
    ) as scope:
        logits = convert_to_tensor(logits)
        labels = math_ops.cast(multi_class_labels, logits.dtype)
        logits.get_shape().assert_is_compatible_with(labels.get_shape())
        if label_smoothing > 0:
            labels = labels * (1 - label_smoothing) + 0.5 * label_smoothing
        losses = nn_ops.sigmoid_cross_entropy_with_logits(
            labels=labels, logits=logits, name="xentropy"
        )
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def softmax_cross_entropy(
    onehot_labels,
    logits,
    weights=1.0,
    label_smoothing=0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Softmax cross-entropy of one-hot labels; `label_smoothing` s turns each label y into
    y·(1-s) + s/num_classes. `weights` are per example ([batch] or scalar).

    Example: loss = tf.losses.softmax_cross_entropy(tf.one_hot(y, 10), logits)
    """
    _check_args(onehot_labels=onehot_labels, logits=logits)
    with _name_scope(
        scope, "softmax_cross_entropy_loss", (logits, onehot_labels, weights)
    ) as scope:
        logits = convert_to_tensor(logits)
        labels = math_ops.cast(onehot_labels, logits.dtype)
        logits.get_shape().assert_is_compatible_with(labels.get_shape())
        if label_smoothing > 0:
            num_classes = math_ops.cast(array_ops.shape(labels)[-1], logits.dtype)
            labels = labels * (1.0 - label_smoothing) + label_smoothing / num_classes
        labels = array_ops.stop_gradient(labels, name="labels_stop_gradient")
        losses = nn_ops.softmax_cross_entropy_with_logits_v2(
            labels=labels, logits=logits, name="xentropy"
        )
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def _squeeze_last(t, other_rank):
    """Drops a trailing size-1 dim of `t` when it makes `t`'s rank equal `other_rank`."""
    s = t.get_shape()
    if (
        s.ndims is not None
        and other_rank is not None
        and s.ndims == other_rank + 1
        and s[-1].value == 1
    ):
        return array_ops.squeeze(t, [-1])
    return t


def sparse_softmax_cross_entropy(
    labels,
    logits,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
):
    """Softmax cross-entropy of integer class ids `labels` ([batch] or [batch, 1])."""
    _check_args(labels=labels, logits=logits)
    with _name_scope(
        scope, "sparse_softmax_cross_entropy_loss", (logits, labels, weights)
    ) as scope:
        logits = convert_to_tensor(logits)
        labels = convert_to_tensor(labels)
        logits_rank = logits.get_shape().ndims
        labels = _squeeze_last(labels, None if logits_rank is None else logits_rank - 1)
        weights = convert_to_tensor(weights)
        weights = _squeeze_last(weights, labels.get_shape().ndims)
        losses = nn_ops.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits, name="xentropy"
        )
        return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


# -- the LOSSES collection --------------------------------------------------------------------
def cosine_distance(
    labels,
    predictions,
    axis=None,
    weights=1.0,
    scope=None,
    loss_collection=GraphKeys.LOSSES,
    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS,
    dim=None,
):
    """1 - sum(labels * predictions) along `axis` (both unit-normalized), then weighted.

    Example: loss = tf.losses.cosine_distance(tf.nn.l2_normalize(y, 1), y_hat_unit, axis=1)
    """
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = dim if axis is None else axis
    if axis is None:
        raise ValueError("You must specify 'axis'.")
    _check_args(labels=labels, predictions=predictions)
    with _name_scope(scope, "cosine_distance_loss", (predictions, labels, weights)) as name:
        labels, predictions = _float_pair(labels, predictions)
        radial = math_ops.multiply(predictions, labels)
        losses = 1 - reduction_ops.reduce_sum(radial, axis=(axis,), keepdims=True)
        return compute_weighted_loss(losses, weights, name, loss_collection, reduction=reduction)


def mean_pairwise_squared_error(
    labels, predictions, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES
):
    """For each example, the mean over pairs of its elements (i, j) of
    ((p_i - p_j) - (l_i - l_j))², weighted per example and summed over the batch."""
    _check_args(labels=labels, predictions=predictions)
    with _name_scope(scope, "mean_pairwise_squared_error", (predictions, labels, weights)):
        weights = math_ops.cast(convert_to_tensor(weights), dtypes.float32)
        labels, predictions = _float_pair(labels, predictions)
        diffs = math_ops.subtract(predictions, labels)
        _check_broadcastable(weights, diffs)
        axis = array_ops.range(1, array_ops.rank(diffs))
        sum_squares = reduction_ops.reduce_sum(math_ops.square(diffs), axis=axis, keepdims=True)
        with default_graph.get().name_scope("num_present"):
            nonzero = math_ops.cast(math_ops.not_equal(weights, 0.0), dtypes.float32)
            present = reduction_ops.reduce_sum(
                nonzero * array_ops.ones_like(diffs), axis=axis, keepdims=True
            )
        term1 = 2.0 * math_ops.div_no_nan(
            sum_squares, math_ops.maximum(present - 1, 0.0), name="value"
        )
        sum_diff = reduction_ops.reduce_sum(diffs, axis=axis, keepdims=True)
        term2 = 2.0 * math_ops.div_no_nan(
            math_ops.square(sum_diff),
            math_ops.maximum(math_ops.multiply(present, present - 1), 0.0),
            name="value",
        )
        loss = reduction_ops.reduce_sum(math_ops.multiply(term1 - term2, weights))
        mean_loss = math_ops.where(
            reduction_ops.reduce_sum(present) > 0, loss, array_ops.zeros_like(loss), name="value"
        )
        add_loss(mean_loss, loss_collection)
        return mean_loss


def add_loss(loss, loss_collection=GraphKeys.LOSSES):
    """Adds an externally computed loss to `loss_collection` (None: to no collection)."""
    if loss_collection:
        graph = getattr(loss, "graph", None) or default_graph.get()
        graph.add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=GraphKeys.LOSSES):
    """The losses in `loss_collection` whose names match the regex `scope`."""
    return default_graph.get().get_collection(loss_collection, scope)


def get_regularization_losses(scope=None):
    return default_graph.get().get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """The sum of the regularization losses (a 0.0 constant when there are none)."""
    losses = get_regularization_losses(scope)
    if losses:
        return math_ops.add_n(losses, name=name)
    return constant(0.0)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    """The sum of the collected losses, plus the regularization losses by default."""
    losses = get_losses(scope=scope)
    if add_regularization_losses:
        losses = losses + get_regularization_losses(scope=scope)
    if not losses:
        raise ValueError("No losses found: add some with tf.losses.* or tf.losses.add_loss first.")
    return math_ops.add_n(losses, name=name)

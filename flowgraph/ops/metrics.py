"""tf.metrics: streaming metrics as (value, update_op) pairs over local accumulator variables.

A metric keeps running sums in variables of the LOCAL_VARIABLES and METRIC_VARIABLES collections
(`mean/total`, `mean/count`), so `tf.local_variables_initializer()` resets it. Running `update_op`
folds one batch into the sums and returns the updated value; `value` reads the sums without
changing them.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import default_graph
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.graph import GraphKeys
from flowgraph.ops import array as array_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import reduction as reduction_ops
from flowgraph.ops import variable_ops, variables
from flowgraph.ops import variable_scope as vs

__all__ = ["accuracy", "mean", "mean_absolute_error", "mean_squared_error", "precision", "recall"]


def _metric_variable(shape, dtype, name):
    """A zero-initialized accumulator in LOCAL_VARIABLES and METRIC_VARIABLES."""
    return variables.Variable(
        lambda: array_ops.zeros(shape, dtype),
        trainable=False,
        name=name,
        collections=[GraphKeys.LOCAL_VARIABLES, GraphKeys.METRIC_VARIABLES],
    )


def _add_to(collections, value):
    if collections:
        default_graph.get().add_to_collections(collections, value)


def _squeeze_to_rank(t, rank):
    """Drops a trailing size-1 dim of `t` when that makes its rank `rank` (TF1's
    remove_squeezable_dimensions, for statically known ranks)."""
    s = t.get_shape()
    if s.ndims is not None and rank is not None and s.ndims == rank + 1 and s[-1].value == 1:
        return array_ops.squeeze(t, [-1])
    return t


def _prepare(predictions, labels, weights):
    predictions = convert_to_tensor(predictions)
    if labels is not None:
        labels = convert_to_tensor(labels)
        predictions = _squeeze_to_rank(predictions, labels.get_shape().ndims)
        labels = _squeeze_to_rank(labels, predictions.get_shape().ndims)
    if weights is not None:
        weights = convert_to_tensor(weights)
        weights = _squeeze_to_rank(weights, predictions.get_shape().ndims)
    return predictions, labels, weights


def _broadcast_weights(weights, values):
    """Weights as float32 with the shape of `values` (a scalar or compatible-rank weight)."""
    w, v = weights.get_shape(), values.get_shape()
    if w.ndims not in (None, 0) and v.ndims is not None and w.ndims != v.ndims:
        raise ValueError(
            f"weights can not be broadcast to values. values.shape={v}. weights.shape={w}."
        )
    return math_ops.cast(weights, dtypes.float32) * array_ops.ones_like(values)


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The (weighted) mean of all `values` seen so far.

    Example:
        m, update = tf.metrics.mean(x)
        sess.run(tf.local_variables_initializer()); sess.run(update, {x: batch}); sess.run(m)
    """
    with vs.variable_scope(name, "mean", (values, weights)):
        values = math_ops.cast(convert_to_tensor(values), dtypes.float32)
        total = _metric_variable([], dtypes.float32, "total")
        count = _metric_variable([], dtypes.float32, "count")
        if weights is None:
            num_values = math_ops.cast(array_ops.size(values), dtypes.float32)
        else:
            values, _, weights = _prepare(values, None, weights)
            weights = _broadcast_weights(weights, values)
            values = math_ops.multiply(values, weights)
            num_values = reduction_ops.reduce_sum(weights)
        update_total = variable_ops.assign_add(total, reduction_ops.reduce_sum(values))
        with default_graph.get().control_dependencies([values]):
            update_count = variable_ops.assign_add(count, num_values)
        value = math_ops.div_no_nan(total, math_ops.maximum(count, 0.0), name="value")
        update_op = math_ops.div_no_nan(
            update_total, math_ops.maximum(update_count, 0.0), name="update_op"
        )
        _add_to(metrics_collections, value)
        _add_to(updates_collections, update_op)
        return value, update_op


def accuracy(
    labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None
):
    """The (weighted) fraction of `predictions` equal to `labels`.

    Example: acc, update = tf.metrics.accuracy(y, tf.argmax(logits, 1))
    """
    predictions, labels, weights = _prepare(predictions, labels, weights)
    predictions.get_shape().assert_is_compatible_with(labels.get_shape())
    if labels.dtype.base_dtype != predictions.dtype.base_dtype:
        predictions = math_ops.cast(predictions, labels.dtype.base_dtype)
    is_correct = math_ops.cast(math_ops.equal(predictions, labels), dtypes.float32)
    return mean(is_correct, weights, metrics_collections, updates_collections, name or "accuracy")


def mean_squared_error(
    labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None
):
    """The (weighted) running mean of (labels - predictions)²."""
    predictions, labels, weights = _prepare(predictions, labels, weights)
    predictions.get_shape().assert_is_compatible_with(labels.get_shape())
    squared = math_ops.squared_difference(
        math_ops.cast(labels, dtypes.float32), math_ops.cast(predictions, dtypes.float32)
    )
    return mean(
        squared, weights, metrics_collections, updates_collections, name or "mean_squared_error"
    )


def mean_absolute_error(
    labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None
):
    """The (weighted) running mean of |labels - predictions|."""
    predictions, labels, weights = _prepare(predictions, labels, weights)
    predictions.get_shape().assert_is_compatible_with(labels.get_shape())
    diff = math_ops.cast(labels, dtypes.float32) - math_ops.cast(predictions, dtypes.float32)
    return mean(
        math_ops.abs(diff),
        weights,
        metrics_collections,
        updates_collections,
        name or "mean_absolute_error",
    )


def _count(condition, weights, name):
    """A running (weighted) count of true entries of `condition`: `<name>/count`."""
    with vs.variable_scope(None, name, (condition, weights)):
        count = _metric_variable([], dtypes.float32, "count")
        hits = math_ops.cast(condition, dtypes.float32)
        if weights is not None:
            hits = math_ops.multiply(hits, _broadcast_weights(weights, hits))
        update = variable_ops.assign_add(count, reduction_ops.reduce_sum(hits))
        return _read(count), update


def _read(var):
    """The current value of a variable as a Tensor (reads through `Variable.value()`)."""
    return var.value() if hasattr(var, "value") else convert_to_tensor(var)


def _ratio_metric(
    labels,
    predictions,
    weights,
    metrics_collections,
    updates_collections,
    name,
    default,
    other_label,
):
    """tp / (tp + other), `other` = false positives (precision) or false negatives (recall)."""
    with vs.variable_scope(name, default, (predictions, labels, weights)):
        predictions, labels, weights = _prepare(predictions, labels, weights)
        predictions = math_ops.cast(predictions, dtypes.bool_)
        labels = math_ops.cast(labels, dtypes.bool_)
        predictions.get_shape().assert_is_compatible_with(labels.get_shape())
        tp, tp_update = _count(math_ops.logical_and(labels, predictions), weights, "true_positives")
        if other_label == "false_positives":
            cond = math_ops.logical_and(math_ops.logical_not(labels), predictions)
        else:
            cond = math_ops.logical_and(labels, math_ops.logical_not(predictions))
        other, other_update = _count(cond, weights, other_label)

        def ratio(t, o, op_name):
            return math_ops.div_no_nan(t, t + o, name=op_name)

        value = ratio(tp, other, "value")
        update_op = ratio(tp_update, other_update, "update_op")
        _add_to(metrics_collections, value)
        _add_to(updates_collections, update_op)
        return value, update_op


def precision(
    labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None
):
    """Running true_positives / (true_positives + false_positives) of boolean predictions."""
    return _ratio_metric(
        labels,
        predictions,
        weights,
        metrics_collections,
        updates_collections,
        name,
        "precision",
        "false_positives",
    )


def recall(
    labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None
):
    """Running true_positives / (true_positives + false_negatives) of boolean predictions."""
    return _ratio_metric(
        labels,
        predictions,
        weights,
        metrics_collections,
        updates_collections,
        name,
        "recall",
        "false_negatives",
    )

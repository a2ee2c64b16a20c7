"""tf.metrics built on means and confusion matrices (TF1's metrics_impl): element-wise means of
whole tensors, relative and root-mean-squared errors, cosine distance, the fraction below a
threshold, and the per-class metrics of segmentation and classification (mean IoU, mean
per-class accuracy) over a running confusion matrix.

Names, collections and the values of `update_op` follow TensorFlow 1.15 (mean_iou's update is
the updated confusion matrix; mean_per_class_accuracy's the per-class accuracies), so programs
that fetch them see TensorFlow's shapes.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.scopes import name_scope
from flowgraph.ops import array, linalg, reduction, variable_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import variable_scope as vs
from flowgraph.ops.confusion_matrix import confusion_matrix
from flowgraph.ops.metrics import (
    _add_to,
    _broadcast_weights,
    _metric_variable,
    _prepare,
    _read,
    mean,
    mean_squared_error,
)

__all__ = [
    "mean_cosine_distance",
    "mean_iou",
    "mean_per_class_accuracy",
    "mean_relative_error",
    "mean_tensor",
    "percentage_below",
    "root_mean_squared_error",
]


def _float(x):
    return math_ops.cast(x, dtypes.float32)


def _flat(x):
    """x as a vector when its static rank is above 1 (TF reshapes only then)."""
    if x is not None and x.get_shape().ndims is not None and x.get_shape().ndims > 1:
        return array.reshape(x, [-1])
    return x


def _collect(metrics_collections, updates_collections, value, update_op):
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def mean_tensor(
    values, weights=None, metrics_collections=None, updates_collections=None, name=None
):
    """The element-wise (weighted) running mean of `values`, a tensor of values' shape.

    Example: m, update = tf.metrics.mean_tensor(x)  # x [batch?, 3] -> m [batch?, 3]
    """
    with vs.variable_scope(name, "mean", (values, weights)):
        values = _float(convert_to_tensor(values))
        shape = values.get_shape()
        if not shape.is_fully_defined():
            raise ValueError(f"mean_tensor needs values of a fully defined shape, got {shape}")
        total = _metric_variable(shape.as_list(), dtypes.float32, "total_tensor")
        count = _metric_variable(shape.as_list(), dtypes.float32, "count_tensor")
        num_values = array.ones_like(values)
        if weights is not None:
            values, _, weights = _prepare(values, None, weights)
            weights = _broadcast_weights(weights, values)
            values = math_ops.multiply(values, weights)
            num_values = math_ops.multiply(num_values, weights)
        update_total = variable_ops.assign_add(total, values)
        update_count = variable_ops.assign_add(count, num_values)
        value = math_ops.div_no_nan(_read(total), _read(count), name="value")
        update_op = math_ops.div_no_nan(update_total, update_count, name="update_op")
        return _collect(metrics_collections, updates_collections, value, update_op)


def mean_relative_error(
    labels,
    predictions,
    normalizer,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """The running mean of |labels - predictions| / normalizer (0 where normalizer is 0)."""
    predictions, labels, weights = _prepare(predictions, labels, weights)
    predictions.get_shape().assert_is_compatible_with(labels.get_shape())
    normalizer = convert_to_tensor(normalizer)
    predictions, normalizer, _ = _prepare(predictions, normalizer, None)
    predictions.get_shape().assert_is_compatible_with(normalizer.get_shape())
    labels, predictions, normalizer = _float(labels), _float(predictions), _float(normalizer)
    relative_errors = math_ops.where(
        math_ops.equal(normalizer, 0.0),
        array.zeros_like(labels),
        math_ops.divide(math_ops.abs(labels - predictions), normalizer),
    )
    return mean(
        relative_errors,
        weights,
        metrics_collections,
        updates_collections,
        name or "mean_relative_error",
    )


def root_mean_squared_error(
    labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None
):
    """sqrt of the running mean of (labels - predictions)²."""
    mse, update_mse = mean_squared_error(
        labels, predictions, weights, None, None, name or "root_mean_squared_error"
    )
    return _collect(
        metrics_collections, updates_collections, math_ops.sqrt(mse), math_ops.sqrt(update_mse)
    )


def mean_cosine_distance(
    labels,
    predictions,
    dim,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """1 - the running mean of sum(labels * predictions) along `dim` (inputs unit-normalized)."""
    predictions, labels, weights = _prepare(predictions, labels, weights)
    predictions.get_shape().assert_is_compatible_with(labels.get_shape())
    radial = math_ops.multiply(_float(predictions), _float(labels))
    radial = reduction.reduce_sum(radial, axis=[dim], keepdims=True)
    distance, update = mean(radial, weights, None, None, name or "mean_cosine_distance")
    return _collect(
        metrics_collections,
        updates_collections,
        math_ops.subtract(1.0, distance),
        math_ops.subtract(1.0, update),
    )


def percentage_below(
    values,
    threshold,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """The running (weighted) fraction of `values` below `threshold`."""
    below = _float(math_ops.less(convert_to_tensor(values), threshold))
    return mean(
        below,
        weights,
        metrics_collections,
        updates_collections,
        name or "percentage_below_threshold",
    )


def _streaming_confusion_matrix(labels, predictions, num_classes, weights=None):
    """(running float64 [num_classes, num_classes] matrix, its update) of flattened inputs."""
    total_cm = _metric_variable(
        [num_classes, num_classes], dtypes.float64, "total_confusion_matrix"
    )
    predictions = _flat(math_ops.cast(convert_to_tensor(predictions), dtypes.int64))
    labels = _flat(math_ops.cast(convert_to_tensor(labels), dtypes.int64))
    weights = _flat(None if weights is None else convert_to_tensor(weights))
    current = confusion_matrix(
        labels, predictions, num_classes, weights=weights, dtype=dtypes.float64
    )
    return total_cm, variable_ops.assign_add(total_cm, current)


def mean_iou(
    labels,
    predictions,
    num_classes,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """Mean intersection-over-union of the classes seen: per class, true positives over
    (true positives + false positives + false negatives), averaged over classes present.
    `update_op` returns the updated confusion matrix (float64), as TensorFlow's.
    """
    with vs.variable_scope(name, "mean_iou", (predictions, labels, weights)):
        predictions, labels = convert_to_tensor(predictions), convert_to_tensor(labels)
        predictions.get_shape().assert_is_compatible_with(labels.get_shape())
        total_cm, update_op = _streaming_confusion_matrix(labels, predictions, num_classes, weights)
        cm = _read(total_cm)
        with name_scope("compute_mean_iou"):
            sum_over_row = _float(reduction.reduce_sum(cm, 0))
            sum_over_col = _float(reduction.reduce_sum(cm, 1))
            diag = _float(linalg.diag_part(cm))
            denominator = sum_over_row + sum_over_col - diag
            num_valid = reduction.reduce_sum(_float(math_ops.not_equal(denominator, 0)))
            denominator = math_ops.where(
                math_ops.greater(denominator, 0), denominator, array.ones_like(denominator)
            )
            iou = math_ops.divide(diag, denominator)
            value = math_ops.where(
                math_ops.greater(num_valid, 0),
                reduction.reduce_sum(iou, name="mean_iou") / num_valid,
                0.0,
            )
        return _collect(metrics_collections, updates_collections, value, update_op)


def mean_per_class_accuracy(
    labels,
    predictions,
    num_classes,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """The mean over classes of each class's running accuracy (correct / seen, 0 for a class
    not seen). `update_op` returns the [num_classes] per-class accuracies, as TensorFlow's.
    """
    with vs.variable_scope(name, "mean_accuracy", (predictions, labels, weights)):
        labels = _flat(math_ops.cast(convert_to_tensor(labels), dtypes.int64))
        predictions = _flat(convert_to_tensor(predictions))
        predictions.get_shape().assert_is_compatible_with(labels.get_shape())
        total = _metric_variable([num_classes], dtypes.float32, "total")
        count = _metric_variable([num_classes], dtypes.float32, "count")
        ones = array.ones(array.reshape(array.size(labels), [1]), dtypes.float32)
        if labels.dtype != predictions.dtype:
            predictions = math_ops.cast(predictions, labels.dtype)
        is_correct = _float(math_ops.equal(predictions, labels))
        if weights is not None:
            weights = _float(_flat(convert_to_tensor(weights)))
            is_correct = is_correct * weights
            ones = ones * weights
        update_total = variable_ops.scatter_add(total, labels, ones)
        update_count = variable_ops.scatter_add(count, labels, is_correct)
        per_class = math_ops.div_no_nan(_read(count), _read(total))
        value = reduction.reduce_mean(per_class, name="mean_accuracy")
        update_op = math_ops.div_no_nan(update_count, update_total, name="update_op")
        return _collect(metrics_collections, updates_collections, value, update_op)

"""tf.metrics over decision thresholds (TF1's metrics_impl): confusion counts at thresholds,
precision and recall at thresholds, AUC of the ROC or PR curve, sensitivity at a specificity
and back, and the plain true/false positive/negative counts.

Predictions are probabilities in [0, 1] (an Assert checks it); a prediction counts as positive
at threshold t when it is > t. The counts live in local metric variables as in metrics.py, so
`tf.local_variables_initializer()` resets them; each metric returns (value, update_op).
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import convert
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.scopes import control_dependencies
from flowgraph.ops import array, logging, reduction, variable_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import variable_scope as vs
from flowgraph.ops.metrics import _add_to, _broadcast_weights, _metric_variable, _prepare, _read
from flowgraph.platform import tf_logging

__all__ = [
    "auc",
    "false_negatives",
    "false_negatives_at_thresholds",
    "false_positives",
    "false_positives_at_thresholds",
    "precision_at_thresholds",
    "recall_at_thresholds",
    "sensitivity_at_specificity",
    "specificity_at_sensitivity",
    "true_negatives",
    "true_negatives_at_thresholds",
    "true_positives",
    "true_positives_at_thresholds",
]

_NAMES = {"tp": "true_positives", "fn": "false_negatives", "tn": "true_negatives"}
_NAMES["fp"] = "false_positives"
_KEPSILON = 1e-7  # thresholds just outside [0, 1] catch predictions of exactly 0 and 1


def _in_unit_interval(predictions):
    p = math_ops.cast(predictions, dtypes.float32)
    ok = reduction.reduce_all(math_ops.logical_and(p >= 0.0, p <= 1.0))
    with control_dependencies([logging.Assert(ok, ["predictions must be in [0, 1]", p])]):
        return array.identity(p)


def _confusion_at_thresholds(labels, predictions, thresholds, weights=None, includes=None):
    """({key: counts variable [len(thresholds)]}, {key: its update}) for keys of
    tp/fn/tn/fp (TF's _confusion_matrix_at_thresholds)."""
    includes = tuple(_NAMES) if includes is None else includes
    for key in includes:
        if key not in _NAMES:
            raise ValueError(f"Invalid key: {key}.")
    predictions = _in_unit_interval(predictions)
    predictions, labels, weights = _prepare(
        predictions, math_ops.cast(convert_to_tensor(labels), dtypes.bool_), weights
    )
    n = len(thresholds)
    predictions_2d = array.reshape(predictions, [-1, 1])
    labels_2d = array.reshape(labels, [1, -1])
    count = predictions_2d.shape[0].value
    if count is None:
        count = array.shape(predictions_2d)[0]
    thresh_tiled = array.tile(
        array.expand_dims(convert.constant(thresholds, dtypes.float32), [1]),
        array.stack([1, count]),
    )
    pred_is_pos = math_ops.greater(
        array.tile(array.transpose(predictions_2d), [n, 1]), thresh_tiled
    )
    label_is_pos = array.tile(labels_2d, [n, 1])
    conditions = {
        "tp": lambda: math_ops.logical_and(label_is_pos, pred_is_pos),
        "fn": lambda: math_ops.logical_and(label_is_pos, math_ops.logical_not(pred_is_pos)),
        "tn": lambda: math_ops.logical_and(
            math_ops.logical_not(label_is_pos), math_ops.logical_not(pred_is_pos)
        ),
        "fp": lambda: math_ops.logical_and(math_ops.logical_not(label_is_pos), pred_is_pos),
    }
    weights_tiled = None
    if weights is not None:
        weights = _broadcast_weights(weights, predictions)
        weights_tiled = array.tile(array.reshape(weights, [1, -1]), [n, 1])
    values, updates = {}, {}
    for key in ("tp", "fn", "tn", "fp"):
        if key not in includes:
            continue
        counts = _metric_variable([n], dtypes.float32, _NAMES[key])
        hits = math_ops.cast(conditions[key](), dtypes.float32)
        if weights_tiled is not None:
            hits *= weights_tiled
        updates[key] = variable_ops.assign_add(counts, reduction.reduce_sum(hits, 1))
        values[key] = _read(counts)
    return values, updates


def _count_metric(
    labels, predictions, weights, metrics_collections, updates_collections, name, key
):
    """A running (weighted) count of one confusion cell of boolean predictions."""
    with vs.variable_scope(name, _NAMES[key], (predictions, labels, weights)):
        predictions = math_ops.cast(convert_to_tensor(predictions), dtypes.bool_)
        labels = math_ops.cast(convert_to_tensor(labels), dtypes.bool_)
        predictions, labels, weights = _prepare(predictions, labels, weights)
        pos, neg = predictions, math_ops.logical_not(predictions)
        truth, lie = labels, math_ops.logical_not(labels)
        cell = {"tp": (truth, pos), "fn": (truth, neg), "tn": (lie, neg), "fp": (lie, pos)}[key]
        hits = math_ops.cast(math_ops.logical_and(*cell), dtypes.float32)
        if weights is not None:
            hits = math_ops.multiply(hits, math_ops.cast(weights, dtypes.float32))
        count = _metric_variable([], dtypes.float32, "count")
        value = _read(count)
        update = variable_ops.assign_add(count, reduction.reduce_sum(hits))
        _add_to(metrics_collections, value)
        _add_to(updates_collections, update)
        return value, update


def _counter(key):
    def metric(
        labels,
        predictions,
        weights=None,
        metrics_collections=None,
        updates_collections=None,
        name=None,
    ):
        return _count_metric(
            labels, predictions, weights, metrics_collections, updates_collections, name, key
        )

    metric.__name__ = _NAMES[key]
    metric.__doc__ = f"The running (weighted) number of {_NAMES[key].replace('_', ' ')}."
    return metric


true_positives = _counter("tp")
false_negatives = _counter("fn")
true_negatives = _counter("tn")
false_positives = _counter("fp")


def _at_thresholds(key):
    def metric(
        labels,
        predictions,
        thresholds,
        weights=None,
        metrics_collections=None,
        updates_collections=None,
        name=None,
    ):
        with vs.variable_scope(name, _NAMES[key], (predictions, labels, weights)):
            values, updates = _confusion_at_thresholds(
                labels, predictions, thresholds, weights, includes=(key,)
            )
            _add_to(metrics_collections, values[key])
            _add_to(updates_collections, updates[key])
            return values[key], updates[key]

    metric.__name__ = f"{_NAMES[key]}_at_thresholds"
    metric.__doc__ = f"Running (weighted) {_NAMES[key].replace('_', ' ')} at each threshold."
    return metric


true_positives_at_thresholds = _at_thresholds("tp")
false_negatives_at_thresholds = _at_thresholds("fn")
true_negatives_at_thresholds = _at_thresholds("tn")
false_positives_at_thresholds = _at_thresholds("fp")


def _ratio_at_thresholds(labels, predictions, thresholds, weights, collections, name, kind):
    metrics_collections, updates_collections = collections
    other = "fp" if kind == "precision" else "fn"
    with vs.variable_scope(name, f"{kind}_at_thresholds", (predictions, labels, weights)):
        values, updates = _confusion_at_thresholds(
            labels, predictions, thresholds, weights, includes=("tp", other)
        )

        def ratio(tp, o, suffix):
            return math_ops.div(tp, _KEPSILON + tp + o, name=f"{kind}_{suffix}")

        value = ratio(values["tp"], values[other], "value")
        update = ratio(updates["tp"], updates[other], "update_op")
        _add_to(metrics_collections, value)
        _add_to(updates_collections, update)
        return value, update


def precision_at_thresholds(
    labels,
    predictions,
    thresholds,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """Running precision tp / (tp + fp) of `predictions` > t for each threshold t."""
    collections = (metrics_collections, updates_collections)
    return _ratio_at_thresholds(
        labels, predictions, thresholds, weights, collections, name, "precision"
    )


def recall_at_thresholds(
    labels,
    predictions,
    thresholds,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """Running recall tp / (tp + fn) of `predictions` > t for each threshold t."""
    collections = (metrics_collections, updates_collections)
    return _ratio_at_thresholds(
        labels, predictions, thresholds, weights, collections, name, "recall"
    )


def _even_thresholds(num_thresholds):
    """num_thresholds - 2 evenly spaced in (0, 1), and one just outside each end."""
    inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return [0.0 - _KEPSILON] + inner + [1.0 + _KEPSILON]


def auc(
    labels,
    predictions,
    weights=None,
    num_thresholds=200,
    metrics_collections=None,
    updates_collections=None,
    curve="ROC",
    name=None,
    summation_method="trapezoidal",
    thresholds=None,
):
    """The area under the ROC (default) or PR curve, from confusion counts at `num_thresholds`
    thresholds (or the given `thresholds`); `summation_method` "trapezoidal",
    "careful_interpolation" (PR's exact interpolation), "minoring" or "majoring".

    Example: auc, update = tf.metrics.auc(labels, tf.sigmoid(logits))
    """
    with vs.variable_scope(name, "auc", (labels, predictions, weights)):
        if curve not in ("ROC", "PR"):
            raise ValueError(f"curve must be either ROC or PR, {curve} unknown")
        if summation_method not in ("trapezoidal", "careful_interpolation", "minoring", "majoring"):
            raise ValueError(f"Invalid summation_method: {summation_method}")
        if thresholds is not None:
            points = [0.0 - _KEPSILON] + sorted(thresholds) + [1.0 + _KEPSILON]
        else:
            points = _even_thresholds(num_thresholds)
        values, updates = _confusion_at_thresholds(labels, predictions, points, weights)
        n = len(points)

        def area(c, name):
            return _area(c["tp"], c["fn"], c["tn"], c["fp"], n, curve, summation_method, name)

        value, update = area(values, "value"), area(updates, "update_op")
        _add_to(metrics_collections, value)
        _add_to(updates_collections, update)
        return value, update


def _area(tp, fn, tn, fp, n, curve, summation_method, name):
    """The area under the curve through the n threshold points (TF's compute_auc)."""
    epsilon = 1.0e-6
    if curve == "PR" and summation_method == "careful_interpolation":
        return _interpolate_pr_auc(tp, fp, fn, n)
    if curve == "PR" and summation_method == "trapezoidal":
        tf_logging.warning(
            "Trapezoidal rule is known to produce incorrect PR-AUCs; please switch to "
            '"careful_interpolation" instead.'
        )
    recall = math_ops.div(tp + epsilon, tp + fn + epsilon)
    if curve == "ROC":
        x, y = math_ops.div(fp, fp + tn + epsilon), recall
    else:
        x, y = recall, math_ops.div(tp + epsilon, tp + fp + epsilon)
    width = x[: n - 1] - x[1:]
    if summation_method in ("trapezoidal", "careful_interpolation"):
        height = (y[: n - 1] + y[1:]) / 2.0
    elif summation_method == "minoring":
        height = math_ops.minimum(y[: n - 1], y[1:])
    else:
        height = math_ops.maximum(y[: n - 1], y[1:])
    return reduction.reduce_sum(math_ops.multiply(width, height), name=name)


def _interpolate_pr_auc(tp, fp, fn, n):
    """PR-AUC with precision interpolated between thresholds as Davis & Goadrich (2006)
    describe: exact for the step from one threshold's counts to the next."""
    dtp = tp[: n - 1] - tp[1:]
    p = tp + fp
    prec_slope = math_ops.div_no_nan(
        dtp, math_ops.maximum(p[: n - 1] - p[1:], 0), name="prec_slope"
    )
    intercept = tp[1:] - math_ops.multiply(prec_slope, p[1:])
    both = math_ops.logical_and(p[: n - 1] > 0, p[1:] > 0)
    ratio = math_ops.div_no_nan(
        p[: n - 1], math_ops.maximum(p[1:], 0), name="recall_relative_ratio"
    )
    safe_p_ratio = math_ops.where(both, ratio, array.ones_like(p[1:]))
    increments = math_ops.div_no_nan(
        prec_slope * (dtp + intercept * math_ops.log(safe_p_ratio)),
        math_ops.maximum(tp[1:] + fn[1:], 0),
        name="pr_auc_increment",
    )
    return reduction.reduce_sum(increments, name="interpolate_pr_auc")


def sensitivity_at_specificity(
    labels,
    predictions,
    specificity,
    weights=None,
    num_thresholds=200,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """The recall at the threshold whose specificity tn / (tn + fp) is closest to
    `specificity`."""
    if specificity < 0 or specificity > 1:
        raise ValueError("`specificity` must be in the range [0, 1].")
    with vs.variable_scope(name, "sensitivity_at_specificity", (predictions, labels, weights)):
        points = _even_thresholds(num_thresholds)
        values, updates = _confusion_at_thresholds(labels, predictions, points, weights)

        def compute(c, name):
            specificities = math_ops.div(c["tn"], c["tn"] + c["fp"] + _KEPSILON)
            index = math_ops.cast(
                reduction.argmin(math_ops.abs(specificities - specificity), 0), dtypes.int32
            )
            tp, fn = c["tp"][index], c["fn"][index]
            return math_ops.div(tp, tp + fn + _KEPSILON, name)

        value, update = compute(values, "value"), compute(updates, "update_op")
        _add_to(metrics_collections, value)
        _add_to(updates_collections, update)
        return value, update


def specificity_at_sensitivity(
    labels,
    predictions,
    sensitivity,
    weights=None,
    num_thresholds=200,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """The specificity at the threshold whose recall is closest to `sensitivity` (the last
    such threshold on ties, as TF picks it)."""
    if sensitivity < 0 or sensitivity > 1:
        raise ValueError("`sensitivity` must be in the range [0, 1].")
    with vs.variable_scope(name, "specificity_at_sensitivity", (predictions, labels, weights)):
        points = _even_thresholds(num_thresholds)
        values, updates = _confusion_at_thresholds(labels, predictions, points, weights)

        def compute(c, name):
            gaps = math_ops.abs(math_ops.div(c["tp"], c["tp"] + c["fn"] + _KEPSILON) - sensitivity)
            at_min = math_ops.cast(math_ops.equal(gaps, reduction.reduce_min(gaps)), dtypes.int64)
            index = math_ops.cast(reduction.argmax(reduction.cumsum(at_min), 0), dtypes.int32)
            tn, fp = c["tn"][index], c["fp"][index]
            return math_ops.div(tn, tn + fp + _KEPSILON, name)

        value, update = compute(values, "value"), compute(updates, "update_op")
        _add_to(metrics_collections, value)
        _add_to(updates_collections, update)
        return value, update

"""tf.metrics of ranked predictions (TF1's metrics_impl): precision and recall of the top k
predicted classes against a set of true labels per example, optionally for one class, and mean
average precision at k.

Labels are int64 class ids, dense [D1, ..., DN, num_labels] (or without the last dimension) or
a SparseTensor; the true positives of a row are the size of the intersection of its top-k set
with its label set (tf.sets), so repeated or missing labels count as TensorFlow counts them.
Accumulators are float64 local metric variables named as TensorFlow names them
(`precision_at_5/true_positive_at_5`, `average_precision_at_3/max`).
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework.scopes import name_scope
from flowgraph.framework.sparse_tensor import SparseTensor, convert_to_tensor_or_sparse_tensor
from flowgraph.ops import array, nn, reduction, sets, sparse, variable_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops.metrics import _add_to, _metric_variable

__all__ = [
    "average_precision_at_k",
    "precision_at_k",
    "precision_at_top_k",
    "recall_at_k",
    "recall_at_top_k",
    "sparse_average_precision_at_k",
    "sparse_precision_at_k",
]


def _at_k_name(name, k=None, class_id=None):
    name = f"{name}_at_{k}" if k is not None else f"{name}_at_k"
    return name if class_id is None else f"{name}_class{class_id}"


def _static_rank(x):
    if isinstance(x, SparseTensor):
        return x.dense_shape.get_shape()[0].value
    return x.get_shape().ndims


def _maybe_expand_labels(labels, predictions):
    """Labels with a last dimension of label sets: [D1..DN] labels get one (needs static ranks,
    which every TF1 program that reaches here has)."""
    labels = convert_to_tensor_or_sparse_tensor(labels)
    labels_rank, predictions_rank = _static_rank(labels), predictions.get_shape().ndims
    if labels_rank is None or predictions_rank is None:
        raise ValueError(
            f"labels and predictions need static ranks: labels {labels}, predictions {predictions}"
        )
    if predictions_rank == labels_rank:
        return labels
    if predictions_rank != labels_rank + 1:
        raise ValueError(
            f"Unexpected labels shape {_shape(labels)} for predictions shape "
            f"{predictions.get_shape()}."
        )
    with name_scope(None, "expand_labels", [predictions]) as scope:
        if isinstance(labels, SparseTensor):
            shape = array.concat([labels.dense_shape, [1]], 0)
            return sparse.sparse_reshape(labels, shape, name=scope)
        return array.expand_dims(labels, -1, name=scope)


def _shape(x):
    return x.dense_shape if isinstance(x, SparseTensor) else x.get_shape()


def _select_class_id(ids, selected_id):
    """The entries of `ids` equal to `selected_id`, as a SparseTensor of ids' shape."""
    ids = convert_to_tensor_or_sparse_tensor(ids)
    if isinstance(ids, SparseTensor):
        return sparse.sparse_retain(ids, math_ops.equal(ids.values, selected_id))
    ids_shape = array.shape(ids, out_type=dtypes.int64)
    filled_shape = array.concat([ids_shape[:-1], [1]], 0)
    filled = array.fill(filled_shape, math_ops.cast(selected_id, dtypes.int64))
    result = sets.set_intersection(filled, ids)
    return SparseTensor(result.indices, result.values, ids_shape)


def _count_at_k(kind, labels, predictions_idx, class_id=None, weights=None, name=None):
    """Per-row float64 counts of true positives ('tp'), false positives ('fp': predicted, not
    a label) or false negatives ('fn': a label, not predicted)."""
    default = {"tp": "true_positives", "fp": "false_positives", "fn": "false_negatives"}[kind]
    with name_scope(name, default, [predictions_idx, labels, weights]):
        if class_id is not None:
            labels = _select_class_id(labels, class_id)
            predictions_idx = _select_class_id(predictions_idx, class_id)
        if kind == "tp":
            found = sets.set_intersection(predictions_idx, labels)
        else:
            found = sets.set_difference(predictions_idx, labels, aminusb=kind == "fp")
        count = math_ops.cast(sets.set_size(found), dtypes.float64)
        if weights is not None:
            count = math_ops.multiply(count, math_ops.cast(weights, dtypes.float64))
        return count


def _streaming_count_at_k(kind, labels, predictions_idx, k, class_id, weights):
    """(running float64 total of `kind` counts, its update)."""
    default = {"tp": "true_positive", "fp": "false_positive", "fn": "false_negative"}[kind]
    with name_scope(None, _at_k_name(default, k, class_id), [predictions_idx, labels]) as scope:
        batch = reduction.reduce_sum(_count_at_k(kind, labels, predictions_idx, class_id, weights))
        total = _metric_variable([], dtypes.float64, scope)
        return total.value(), variable_ops.assign_add(total, batch, name="update")


def _ratio_at_top_k(
    metric, other, labels, predictions_idx, k, class_id, weights, collections, name
):
    metrics_collections, updates_collections = collections
    default = _at_k_name(metric, k, class_id)
    with name_scope(name, default, [predictions_idx, labels, weights]) as scope:
        labels = _maybe_expand_labels(labels, predictions_idx)
        top_k = math_ops.cast(predictions_idx, dtypes.int64)
        tp, tp_update = _streaming_count_at_k("tp", labels, top_k, k, class_id, weights)
        o, o_update = _streaming_count_at_k(other, labels, top_k, k, class_id, weights)
        value = math_ops.divide(tp, math_ops.add(tp, o), name=scope)
        update = math_ops.divide(tp_update, math_ops.add(tp_update, o_update), name="update")
        _add_to(metrics_collections, value)
        _add_to(updates_collections, update)
        return value, update


def precision_at_top_k(
    labels,
    predictions_idx,
    k=None,
    class_id=None,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """Running precision of given top-k class ids `predictions_idx` ([D1..DN, k]): true
    positives / (true positives + false positives), NaN while nothing was predicted."""
    collections = (metrics_collections, updates_collections)
    return _ratio_at_top_k(
        "precision", "fp", labels, predictions_idx, k, class_id, weights, collections, name
    )


def recall_at_top_k(
    labels,
    predictions_idx,
    k=None,
    class_id=None,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """Running recall of given top-k class ids: true positives / (true positives + false
    negatives), NaN while no label was seen."""
    collections = (metrics_collections, updates_collections)
    return _ratio_at_top_k(
        "recall", "fn", labels, predictions_idx, k, class_id, weights, collections, name
    )


def _at_k(top_k_metric, metric):
    def at_k(
        labels,
        predictions,
        k,
        class_id=None,
        weights=None,
        metrics_collections=None,
        updates_collections=None,
        name=None,
    ):
        default = _at_k_name(metric, k, class_id)
        with name_scope(name, default, [predictions, labels, weights]) as scope:
            _, top_k_idx = nn.top_k(predictions, k)
            return top_k_metric(
                labels,
                top_k_idx,
                k,
                class_id,
                weights,
                metrics_collections,
                updates_collections,
                name=scope,
            )

    at_k.__name__ = f"{metric}_at_k"
    at_k.__doc__ = (
        f"Running {metric} of the k highest-scored classes of `predictions` ([D1..DN, "
        "num_classes] scores) against `labels`; for one class with `class_id`."
    )
    return at_k


precision_at_k = _at_k(precision_at_top_k, "precision")
recall_at_k = _at_k(recall_at_top_k, "recall")
sparse_precision_at_k = precision_at_k


def _expand_and_tile(tensor, multiple):
    """`tensor` with a new second-to-last dimension repeated `multiple` times."""
    with name_scope(None, "expand_and_tile", [tensor]) as scope:
        if isinstance(tensor, SparseTensor):
            rank = array.size(tensor.dense_shape)
            shape = array.concat(
                [tensor.dense_shape[: rank - 1], [1], tensor.dense_shape[rank - 1 :]],
                0,
                name="expanded_shape",
            )
            expanded = sparse.sparse_reshape(tensor, shape, name="expand")
            if multiple == 1:
                return expanded
            return sparse.sparse_concat(-2, [expanded] * multiple, name=scope)
        expanded = array.expand_dims(tensor, -2, name="expand")
        if multiple == 1:
            return expanded
        ones = array.ones_like(array.shape(tensor))
        multiples = array.concat([ones[:-1], [multiple], ones[-1:]], 0, name="multiples")
        return array.tile(expanded, multiples, name=scope)


def _num_relevant(labels, k):
    """min(k, number of labels) per row (labels < 0 do not count in a dense tensor)."""
    with name_scope(None, "num_relevant", [labels]) as scope:
        if isinstance(labels, SparseTensor):
            return math_ops.minimum(sets.set_size(labels), k, name=scope)
        valid = math_ops.greater_equal(labels, 0)
        count = reduction.reduce_sum(math_ops.cast(valid, labels.dtype), axis=-1)
        return math_ops.minimum(count, k, name=scope)


def _average_precision_per_row(labels, predictions_idx):
    """Average precision at k of each row: the mean over relevant positions i of the
    precision at i, divided by min(k, number of labels)."""
    with name_scope(None, "average_precision", [predictions_idx, labels]) as scope:
        predictions_idx = math_ops.cast(predictions_idx, dtypes.int64, name="predictions_idx")
        if predictions_idx.get_shape().ndims == 0:
            raise ValueError("The rank of predictions_idx must be at least 1.")
        k = predictions_idx.get_shape()[-1].value
        if k is None:
            raise ValueError("The last dimension of predictions_idx must be set.")
        labels = _maybe_expand_labels(labels, predictions_idx)
        per_k = array.expand_dims(predictions_idx, -1)
        labels_per_k = _expand_and_tile(labels, k)
        relevant = _count_at_k("tp", labels_per_k, per_k, name="relevant_per_k")
        tp_per_k = reduction.cumsum(relevant, axis=-1, name="tp_per_k")
        retrieved = reduction.cumsum(array.ones_like(relevant), axis=-1, name="retrieved_per_k")
        precision = math_ops.divide(tp_per_k, retrieved, name="precision_per_k")
        relevant_precision = math_ops.multiply(precision, relevant)
        precision_sum = reduction.reduce_sum(relevant_precision, axis=[-1], name="precision_sum")
        relevant_count = math_ops.cast(_num_relevant(labels, k), dtypes.float64)
        return math_ops.divide(precision_sum, relevant_count, name=scope)


def _accumulate(name, batch):
    with name_scope(None, name, [batch]) as scope:
        var = _metric_variable([], dtypes.float64, scope)
        return var.value(), variable_ops.assign_add(var, batch, name="update")


def average_precision_at_k(
    labels,
    predictions,
    k,
    weights=None,
    metrics_collections=None,
    updates_collections=None,
    name=None,
):
    """Running mean average precision at k of the scores `predictions` against `labels`.

    Example: m, update = tf.metrics.average_precision_at_k(labels_int64, logits, 5)
    """
    if k < 1:
        raise ValueError(f"Invalid k={k}.")
    default = _at_k_name("average_precision", k)
    with name_scope(name, default, [predictions, labels, weights]) as scope:
        _, predictions_idx = nn.top_k(predictions, k)
        average_precision = _average_precision_per_row(labels, predictions_idx)
        if weights is None:  # each row can reach 1: the most is the number of rows
            batch_max = math_ops.cast(array.size(average_precision), dtypes.float64)
        else:
            weights = math_ops.cast(weights, dtypes.float64) * array.ones_like(average_precision)
            average_precision = math_ops.multiply(average_precision, weights)
            batch_max = reduction.reduce_sum(weights)
        max_value, max_update = _accumulate("max", batch_max)
        total, total_update = _accumulate("total", reduction.reduce_sum(average_precision))
        value = math_ops.div_no_nan(total, max_value, name="mean")
        update = math_ops.div_no_nan(total_update, max_update, name=scope)
        _add_to(metrics_collections, value)
        _add_to(updates_collections, update)
        return value, update


sparse_average_precision_at_k = average_precision_at_k

"""tf.confusion_matrix (tf.math.confusion_matrix): counts of (label, prediction) pairs, built as
TensorFlow builds it, a SparseTensor of ones (or weights) added to a zero matrix, behind checks
that the classes are in range."""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.scopes import control_dependencies, name_scope
from flowgraph.framework.sparse_tensor import SparseTensor
from flowgraph.ops import array, logging, reduction, sparse
from flowgraph.ops import math as math_ops

__all__ = ["confusion_matrix"]


def _checked(x, condition, message):
    """`x`, computed after an Assert that `condition` holds everywhere."""
    check = logging.Assert(reduction.reduce_all(condition), [message, x])
    with control_dependencies([check]):
        return array.identity(x)


def confusion_matrix(
    labels, predictions, num_classes=None, dtype=dtypes.int32, name=None, weights=None
):
    """[num_classes, num_classes] counts: entry [i, j] is how many examples of label i were
    predicted j (or their summed `weights`). Without `num_classes`, the largest class seen + 1.

    Example: tf.confusion_matrix([1, 2, 4], [2, 2, 4]) has ones at [1, 2], [2, 2] and [4, 4]
    """
    with name_scope(name, "confusion_matrix", (predictions, labels, num_classes, weights)):
        labels = convert_to_tensor(labels, name="labels")
        predictions = convert_to_tensor(predictions, name="predictions")
        labels, predictions = remove_squeezable_dimensions(labels, predictions)
        predictions = math_ops.cast(predictions, dtypes.int64)
        labels = math_ops.cast(labels, dtypes.int64)
        labels = _checked(labels, labels >= 0, "`labels` contains negative values")
        predictions = _checked(
            predictions, predictions >= 0, "`predictions` contains negative values"
        )
        if num_classes is None:
            num_classes = (
                math_ops.maximum(reduction.reduce_max(predictions), reduction.reduce_max(labels))
                + 1
            )
        else:
            limit = math_ops.cast(num_classes, dtypes.int64)
            labels = _checked(labels, labels < limit, "`labels` out of bound")
            predictions = _checked(predictions, predictions < limit, "`predictions` out of bound")
        if weights is not None:
            weights = convert_to_tensor(weights, name="weights")
            predictions.get_shape().assert_is_compatible_with(weights.get_shape())
            weights = math_ops.cast(weights, dtype)
        shape = array.stack([num_classes, num_classes])
        indices = array.stack([labels, predictions], axis=1)
        values = array.ones_like(predictions, dtype) if weights is None else weights
        counts = SparseTensor(indices, values, math_ops.cast(shape, dtypes.int64))
        zeros = array.zeros(math_ops.cast(shape, dtypes.int32), dtype)
        return sparse.sparse_add(zeros, counts)


def remove_squeezable_dimensions(labels, predictions, expected_rank_diff=0, name=None):
    """Drops a last dimension of size 1 from labels or predictions when their ranks differ by
    one more than `expected_rank_diff` (statically known ranks; TF's helper of the same name)."""
    with name_scope(name, "remove_squeezable_dimensions", [labels, predictions]):
        predictions = convert_to_tensor(predictions)
        labels = convert_to_tensor(labels)
        p_rank, l_rank = predictions.shape.ndims, labels.shape.ndims
        if p_rank is not None and l_rank is not None:
            diff = p_rank - l_rank
            if diff == expected_rank_diff + 1 and predictions.shape[-1].is_compatible_with(1):
                predictions = array.squeeze(predictions, [-1])
            elif diff == expected_rank_diff - 1 and labels.shape[-1].is_compatible_with(1):
                labels = array.squeeze(labels, [-1])
        return labels, predictions

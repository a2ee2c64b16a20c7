"""tf.contrib.seq2seq.sequence_loss: the weighted cross-entropy of a batch of sequences.

The per-step losses come from one [batch * time, classes] softmax (or a user's
`softmax_loss_function(labels=, logits=)`), are multiplied by `weights` (usually a sequence mask
so padding costs nothing), then averaged or summed over the batch and/or time axes. As in TF
1.15, "average" divides by the sum of the weights and "sum" divides by the number of non-zero
weights (the documented "sum and divide by the size, not counting 0 weights"); both use
div_no_nan so an all-zero mask gives 0 rather than NaN.
"""

from __future__ import annotations

from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.scopes import name_scope
from flowgraph.ops import array as array_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import nn as nn_ops
from flowgraph.ops import reduction as reduction_ops

__all__ = ["SequenceLoss", "sequence_loss"]


def _check_rank(t, rank, what):
    if t.get_shape().ndims != rank:
        raise ValueError(f"{what} must be a {_RANK_TEXT[what]} tensor")


_RANK_TEXT = {
    "Logits": "[batch_size x sequence_length x logits]",
    "Targets": "[batch_size x sequence_length]",
    "Weights": "[batch_size x sequence_length]",
}


def sequence_loss(
    logits,
    targets,
    weights,
    average_across_timesteps=True,
    average_across_batch=True,
    sum_over_timesteps=False,
    sum_over_batch=False,
    softmax_loss_function=None,
    name=None,
):
    """Weighted cross-entropy of `logits` [batch, time, classes] against int `targets`
    [batch, time], weighted by `weights` [batch, time].

    Result shape: a scalar when both axes are reduced, [time] when only the batch axis is,
    [batch] when only the time axis is, else [batch, time].

    Example:
        mask = tf.sequence_mask(lengths, max_len, dtype=tf.float32)
        loss = tf.contrib.seq2seq.sequence_loss(logits, targets, mask)
    """
    logits = convert_to_tensor(logits, name="logits")
    targets = convert_to_tensor(targets, name="targets")
    weights = convert_to_tensor(weights, name="weights")
    _check_rank(logits, 3, "Logits")
    _check_rank(targets, 2, "Targets")
    _check_rank(weights, 2, "Weights")
    if average_across_timesteps and sum_over_timesteps:
        raise ValueError(
            "average_across_timesteps and sum_over_timesteps cannot be set to True at same time."
        )
    if average_across_batch and sum_over_batch:
        raise ValueError(
            "average_across_batch and sum_over_batch cannot be set to True at same time."
        )
    if softmax_loss_function is not None and not callable(softmax_loss_function):
        raise TypeError("softmax_loss_function must be callable(labels=, logits=)")
    with name_scope(name, "sequence_loss", [logits, targets, weights]):
        num_classes = logits.get_shape()[2].value or array_ops.shape(logits)[2]
        logits_flat = array_ops.reshape(logits, [-1, num_classes])
        targets_flat = array_ops.reshape(targets, [-1])
        if softmax_loss_function is None:
            crossent = nn_ops.sparse_softmax_cross_entropy_with_logits(
                labels=targets_flat, logits=logits_flat
            )
        else:
            crossent = softmax_loss_function(labels=targets_flat, logits=logits_flat)
        crossent = crossent * array_ops.reshape(weights, [-1])
        return _reduce(
            crossent,
            weights,
            array_ops.shape(logits)[0:2],
            average_time=average_across_timesteps,
            average_batch=average_across_batch,
            sum_time=sum_over_timesteps,
            sum_batch=sum_over_batch,
        )


def _reduce(crossent, weights, batch_time, average_time, average_batch, sum_time, sum_batch):
    """Reduces the flat weighted losses as sequence_loss's four flags say (module docstring)."""
    if average_time and average_batch:
        total = reduction_ops.reduce_sum(crossent)
        return math_ops.div_no_nan(total, reduction_ops.reduce_sum(weights))
    if sum_time and sum_batch:
        total = reduction_ops.reduce_sum(crossent)
        count = math_ops.cast(reduction_ops.count_nonzero(weights), crossent.dtype)
        return math_ops.div_no_nan(total, count)
    crossent = array_ops.reshape(crossent, batch_time)
    if average_time or average_batch:
        axis = [0] if average_batch else [1]
        total = reduction_ops.reduce_sum(crossent, axis=axis)
        return math_ops.div_no_nan(total, reduction_ops.reduce_sum(weights, axis=axis))
    if sum_time or sum_batch:
        axis = [0] if sum_batch else [1]
        total = reduction_ops.reduce_sum(crossent, axis=axis)
        count = math_ops.cast(reduction_ops.count_nonzero(weights, axis=axis), crossent.dtype)
        return math_ops.div_no_nan(total, count)
    return crossent


class SequenceLoss:
    """sequence_loss as a loss object (TF 1.15's Keras-style `SequenceLoss`): by default it
    sums over both axes and divides by the number of non-zero weights.

    Example:
        loss = tf.contrib.seq2seq.SequenceLoss()(targets, logits, sample_weight=mask)
    """

    def __init__(
        self,
        average_across_timesteps=False,
        average_across_batch=False,
        sum_over_timesteps=True,
        sum_over_batch=True,
        softmax_loss_function=None,
        name=None,
    ):
        self.average_across_timesteps = average_across_timesteps
        self.average_across_batch = average_across_batch
        self.sum_over_timesteps = sum_over_timesteps
        self.sum_over_batch = sum_over_batch
        self.softmax_loss_function = softmax_loss_function
        self.name = name

    def __call__(self, y_true, y_pred, sample_weight=None):
        """The loss of logits `y_pred` against targets `y_true`, weighted by `sample_weight`
        (None: every step weighs 1)."""
        if sample_weight is None:
            y_true = convert_to_tensor(y_true, name="y_true")
            y_pred = convert_to_tensor(y_pred, name="y_pred")
            sample_weight = array_ops.ones(array_ops.shape(y_true), dtype=y_pred.dtype)
        return sequence_loss(
            y_pred,
            y_true,
            sample_weight,
            average_across_timesteps=self.average_across_timesteps,
            average_across_batch=self.average_across_batch,
            sum_over_timesteps=self.sum_over_timesteps,
            sum_over_batch=self.sum_over_batch,
            softmax_loss_function=self.softmax_loss_function,
            name=self.name,
        )

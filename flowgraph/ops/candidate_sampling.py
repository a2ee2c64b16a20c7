"""Candidate samplers and the sampled losses built on them: nce_loss and sampled_softmax_loss
(TF's candidate_sampling_ops and nn_impl). Re-exported into tf.nn by `flowgraph.ops.nn`.

A sampled loss scores each example against its true classes and `num_sampled` classes drawn
from a sampler, instead of all `num_classes`; `subtract_log_q` corrects each logit by the log of
its expected count in the sample, and `remove_accidental_hits` masks sampled classes that
happen to be one of the example's true classes.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework.apply_op import apply_op, graph_of
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import array_index
from flowgraph.ops import linalg as linalg_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import reduction as reduction_ops
from flowgraph.ops.embedding import embedding_lookup
from flowgraph.ops.random import get_seed

__all__ = [
    "compute_accidental_hits",
    "log_uniform_candidate_sampler",
    "nce_loss",
    "sampled_softmax_loss",
    "uniform_candidate_sampler",
]


def _sampler(op_type, true_classes, num_true, num_sampled, unique, range_max, seed, name):
    seed1, seed2 = get_seed(seed)
    op = apply_op(
        op_type,
        [true_classes],
        name=name,
        num_true=int(num_true),
        num_sampled=int(num_sampled),
        unique=bool(unique),
        range_max=int(range_max),
        seed=seed1 or 0,
        seed2=seed2 or 0,
    )
    return tuple(op.outputs)


def uniform_candidate_sampler(
    true_classes, num_true, num_sampled, unique, range_max, seed=None, name=None
):
    """(sampled_candidates, true_expected_count, sampled_expected_count) drawn uniformly from
    [0, range_max); `unique` samples without replacement."""
    return _sampler(
        "UniformCandidateSampler",
        true_classes,
        num_true,
        num_sampled,
        unique,
        range_max,
        seed,
        name,
    )


def log_uniform_candidate_sampler(
    true_classes, num_true, num_sampled, unique, range_max, seed=None, name=None
):
    """Like uniform_candidate_sampler, with P(k) = log((k + 2) / (k + 1)) / log(range_max + 1)
    (Zipf's law: suited to classes sorted by decreasing frequency)."""
    return _sampler(
        "LogUniformCandidateSampler",
        true_classes,
        num_true,
        num_sampled,
        unique,
        range_max,
        seed,
        name,
    )


def compute_accidental_hits(true_classes, sampled_candidates, num_true, seed=None, name=None):
    """(indices, ids, weights) of the sampled candidates equal to a true class of their row."""
    seed1, seed2 = get_seed(seed)
    op = apply_op(
        "ComputeAccidentalHits",
        [true_classes, sampled_candidates],
        name=name,
        num_true=int(num_true),
        seed=seed1 or 0,
        seed2=seed2 or 0,
    )
    return tuple(op.outputs)


def _sampled_logits(
    weights,
    biases,
    labels,
    inputs,
    num_sampled,
    num_classes,
    num_true,
    sampled_values,
    subtract_log_q,
    remove_accidental_hits,
    partition_strategy,
    seed,
):
    """(logits [batch, num_true + num_sampled], labels of the same shape) for a sampled loss."""
    weights = list(weights) if isinstance(weights, (list, tuple)) else [weights]
    labels = convert_to_tensor(labels, name="labels")
    if labels.dtype != dtypes.int64:
        labels = math_ops.cast(labels, dtypes.int64)
    inputs = convert_to_tensor(inputs, name="inputs")
    labels_flat = array_ops.reshape(labels, [-1])
    if sampled_values is None:
        sampled_values = log_uniform_candidate_sampler(
            labels, num_true, num_sampled, True, num_classes, seed=seed
        )
    sampled, true_expected, sampled_expected = (array_ops.stop_gradient(s) for s in sampled_values)
    sampled = math_ops.cast(sampled, dtypes.int64)
    all_ids = array_ops.concat([labels_flat, sampled], 0)
    all_w = embedding_lookup(weights, all_ids, partition_strategy=partition_strategy)
    all_b = embedding_lookup(biases, all_ids, partition_strategy=partition_strategy)
    n_true = array_ops.size(labels_flat)
    true_w = array_index.slice(all_w, array_ops.stack([0, 0]), array_ops.stack([n_true, -1]))
    sampled_w = array_index.slice(all_w, array_ops.stack([n_true, 0]), [-1, -1])
    true_b = array_ops.reshape(
        array_index.slice(all_b, array_ops.stack([0]), array_ops.stack([n_true])), [-1, num_true]
    )
    sampled_b = array_index.slice(all_b, array_ops.stack([n_true]), [-1])
    # [batch, num_true]: each example's input dotted with each of its true classes' weights.
    dim = array_ops.shape(true_w)[1:2]
    true_w = array_ops.reshape(true_w, array_ops.concat([[-1, num_true], dim], 0))
    true_logits = reduction_ops.reduce_sum(
        math_ops.multiply(array_ops.expand_dims(inputs, 1), true_w), 2
    )
    true_logits = math_ops.add(true_logits, true_b)
    sampled_logits = math_ops.add(linalg_ops.matmul(inputs, sampled_w, transpose_b=True), sampled_b)
    if remove_accidental_hits:
        rows, ids, hit_weights = compute_accidental_hits(labels, sampled, num_true=num_true)
        where = array_ops.stack([rows, math_ops.cast(ids, dtypes.int32)], axis=1)
        shape = array_ops.shape(sampled_logits)
        mask = array_index.scatter_nd(
            where, math_ops.cast(hit_weights, sampled_logits.dtype), shape
        )
        sampled_logits = math_ops.add(sampled_logits, mask)
    if subtract_log_q:
        true_logits = math_ops.subtract(
            true_logits, math_ops.log(math_ops.cast(true_expected, true_logits.dtype))
        )
        sampled_logits = math_ops.subtract(
            sampled_logits, math_ops.log(math_ops.cast(sampled_expected, sampled_logits.dtype))
        )
    logits = array_ops.concat([true_logits, sampled_logits], 1)
    out_labels = array_ops.concat(
        [
            math_ops.divide(array_ops.ones_like(true_logits), float(num_true)),
            array_ops.zeros_like(sampled_logits),
        ],
        1,
    )
    return logits, out_labels


def nce_loss(
    weights,
    biases,
    labels,
    inputs,
    num_sampled,
    num_classes,
    num_true=1,
    sampled_values=None,
    remove_accidental_hits=False,
    partition_strategy="mod",
    name="nce_loss",
):
    """Noise-contrastive estimation loss per example: logistic losses of the true classes
    against sampled noise classes (Gutmann & Hyvarinen; word2vec's training objective)."""
    from flowgraph.ops.nn import sigmoid_cross_entropy_with_logits

    graph = graph_of(
        [weights if not isinstance(weights, (list, tuple)) else weights[0], biases, inputs]
    )
    with graph.as_default(), graph.name_scope(name or "nce_loss"):
        logits, labels = _sampled_logits(
            weights,
            biases,
            labels,
            inputs,
            num_sampled,
            num_classes,
            num_true,
            sampled_values,
            True,
            remove_accidental_hits,
            partition_strategy,
            None,
        )
        losses = sigmoid_cross_entropy_with_logits(
            labels=labels, logits=logits, name="sampled_losses"
        )
        return reduction_ops.reduce_sum(losses, 1)


def sampled_softmax_loss(
    weights,
    biases,
    labels,
    inputs,
    num_sampled,
    num_classes,
    num_true=1,
    sampled_values=None,
    remove_accidental_hits=True,
    partition_strategy="mod",
    name="sampled_softmax_loss",
    seed=None,
):
    """Softmax cross-entropy per example over the true and the sampled classes only."""
    from flowgraph.ops.nn import softmax_cross_entropy_with_logits_v2

    graph = graph_of(
        [weights if not isinstance(weights, (list, tuple)) else weights[0], biases, inputs]
    )
    with graph.as_default(), graph.name_scope(name or "sampled_softmax_loss"):
        logits, labels = _sampled_logits(
            weights,
            biases,
            labels,
            inputs,
            num_sampled,
            num_classes,
            num_true,
            sampled_values,
            True,
            remove_accidental_hits,
            partition_strategy,
            seed,
        )
        labels = array_ops.stop_gradient(labels, name="labels_stop_gradient")
        return softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)

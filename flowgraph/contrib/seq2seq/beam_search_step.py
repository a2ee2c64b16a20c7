"""One step of beam search (TF1's `_beam_search_step` and its scoring helpers), as a function
of the logits and the previous BeamSearchDecoderState; see beam_search_decoder.py for the
algorithm. Shapes: batch B, beam K, vocabulary V."""

from __future__ import annotations

import collections

from flowgraph.contrib.seq2seq.attention_wrapper import AttentionWrapperState
from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape
from flowgraph.framework import nest
from flowgraph.framework.convert import constant_value, convert_to_tensor
from flowgraph.framework.scopes import name_scope
from flowgraph.ops import array as array_ops
from flowgraph.ops import array_index
from flowgraph.ops import math as math_ops
from flowgraph.ops import nn as nn_ops
from flowgraph.ops import reduction as reduction_ops
from flowgraph.ops.tensor_array import TensorArray

__all__ = ["BeamSearchDecoderOutput", "BeamSearchDecoderState", "beam_search_step"]


class BeamSearchDecoderState(
    collections.namedtuple(
        "BeamSearchDecoderState",
        ("cell_state", "log_probs", "finished", "lengths", "accumulated_attention_probs"),
    )
):
    """Per beam: the cell state, total log-probability, finished flag, length (int64) and the
    summed attention (only with a coverage penalty, else ())."""

    __slots__ = ()


class BeamSearchDecoderOutput(
    collections.namedtuple("BeamSearchDecoderOutput", ("scores", "predicted_ids", "parent_ids"))
):
    """One step per beam: the (penalized) score, the chosen word and the beam it extends."""

    __slots__ = ()


def _static_int(t):
    value = t if isinstance(t, int) else constant_value(t)
    return None if value is None else int(value)


def beam_search_step(
    time,
    logits,
    next_cell_state,
    beam_state,
    batch_size,
    beam_width,
    end_token,
    length_penalty_weight,
    coverage_penalty_weight,
):
    """(BeamSearchDecoderOutput, BeamSearchDecoderState) of one step from logits [B, K, V]."""
    static_batch = _static_int(batch_size)
    prediction_lengths = beam_state.lengths
    previously_finished = beam_state.finished
    not_finished = math_ops.logical_not(previously_finished)
    # Total log-probabilities of every (beam, word) continuation: [B, K, V].
    step_log_probs = nn_ops.log_softmax(logits)
    step_log_probs = _mask_probs(step_log_probs, end_token, previously_finished)
    total_probs = array_ops.expand_dims(beam_state.log_probs, 2) + step_log_probs
    # Their lengths: +1 for a live beam, unless the word is end_token.
    vocab_size = logits.get_shape()[-1].value or array_ops.shape(logits)[-1]
    lengths_to_add = array_index.one_hot(
        array_ops.fill(array_ops.stack([batch_size, beam_width]), end_token),
        depth=vocab_size,
        on_value=convert_to_tensor(0, dtypes.int64),
        off_value=convert_to_tensor(1, dtypes.int64),
        dtype=dtypes.int64,
    )
    lengths_to_add = lengths_to_add * array_ops.expand_dims(
        math_ops.cast(not_finished, dtypes.int64), 2
    )
    new_prediction_lengths = lengths_to_add + array_ops.expand_dims(prediction_lengths, 2)
    accumulated_attention_probs = None
    attention_probs = attention_probs_of_state(next_cell_state, coverage_penalty_weight)
    if attention_probs is not None:
        attention_probs = attention_probs * array_ops.expand_dims(
            math_ops.cast(not_finished, attention_probs.dtype), 2
        )
        accumulated_attention_probs = beam_state.accumulated_attention_probs + attention_probs
    scores = _get_scores(
        log_probs=total_probs,
        sequence_lengths=new_prediction_lengths,
        length_penalty_weight=length_penalty_weight,
        coverage_penalty_weight=coverage_penalty_weight,
        finished=previously_finished,
        accumulated_attention_probs=accumulated_attention_probs,
    )
    # The K best of the K * V candidates of each batch entry.
    scores_flat = array_ops.reshape(scores, array_ops.stack([batch_size, -1]))
    next_beam_scores, word_indices = nn_ops.top_k(scores_flat, k=beam_width)
    next_beam_scores.set_shape([static_batch, beam_width])
    word_indices.set_shape([static_batch, beam_width])

    def gather(values, gather_shape, name=None):
        return _tensor_gather_helper(
            next_beam_ids, values, batch_size, beam_width, gather_shape, name=name
        )

    next_word_ids = math_ops.cast(
        math_ops.mod(word_indices, vocab_size, name="next_beam_word_ids"), dtypes.int32
    )
    next_beam_ids = math_ops.cast(
        math_ops.floordiv(word_indices, vocab_size), dtypes.int32, name="next_beam_parent_ids"
    )
    next_beam_probs = _tensor_gather_helper(
        word_indices, total_probs, batch_size, beam_width * vocab_size, [-1], "next_beam_probs"
    )
    previously_finished = gather(previously_finished, [-1])
    next_finished = math_ops.logical_or(
        previously_finished, math_ops.equal(next_word_ids, end_token), name="next_beam_finished"
    )
    # A beam's length grows by one unless its parent had already finished.
    next_prediction_len = gather(beam_state.lengths, [-1]) + math_ops.cast(
        math_ops.logical_not(previously_finished), dtypes.int64
    )
    next_accumulated_attention_probs = ()
    if accumulated_attention_probs is not None:
        next_accumulated_attention_probs = gather(
            accumulated_attention_probs,
            array_ops.stack([batch_size * beam_width, -1]),
            name="next_accumulated_attention_probs",
        )
    next_cell_state = nest.map_structure(
        lambda values: _maybe_tensor_gather_helper(
            next_beam_ids,
            values,
            batch_size,
            beam_width,
            array_ops.stack([batch_size * beam_width, -1]),
        ),
        next_cell_state,
    )
    next_state = BeamSearchDecoderState(
        cell_state=next_cell_state,
        log_probs=next_beam_probs,
        lengths=next_prediction_len,
        finished=next_finished,
        accumulated_attention_probs=next_accumulated_attention_probs,
    )
    output = BeamSearchDecoderOutput(
        scores=next_beam_scores, predicted_ids=next_word_ids, parent_ids=next_beam_ids
    )
    return output, next_state


def attention_probs_of_state(cell_state, coverage_penalty_weight):
    """The alignments [B, K, memory time] of the attention in `cell_state` (averaged over
    several mechanisms or layers), or None when there is no coverage penalty."""
    if _is_zero(coverage_penalty_weight):
        return None
    per_layer = []
    if isinstance(cell_state, AttentionWrapperState):
        per_layer = [_alignments_of(cell_state)]
    elif isinstance(cell_state, tuple):
        per_layer = [_alignments_of(s) for s in cell_state if isinstance(s, AttentionWrapperState)]
    if not per_layer:
        raise ValueError("coverage_penalty_weight must be 0.0 if no cell is attentional.")
    return _mean_of(per_layer)


def _is_zero(weight):
    value = constant_value(convert_to_tensor(weight)) if not isinstance(weight, float) else weight
    return value is not None and float(value) == 0.0


def _mean_of(tensors):
    if len(tensors) == 1:
        return tensors[0]
    stacked = array_ops.concat([array_ops.expand_dims(t, -1) for t in tensors], -1)
    return reduction_ops.reduce_mean(stacked, -1)


def _alignments_of(state):
    alignments = state.alignments
    return _mean_of(list(alignments)) if isinstance(alignments, tuple) else alignments


def _length_penalty(sequence_lengths, penalty_factor):
    """GNMT's ((5 + length) / 6) ** penalty_factor; 1 when the factor is statically 0."""
    penalty_factor = convert_to_tensor(penalty_factor, name="penalty_factor")
    penalty_factor.set_shape(())
    static = constant_value(penalty_factor)
    if static is not None and float(static) == 0:
        return 1.0
    lengths = math_ops.cast(sequence_lengths, dtypes.float32)
    factor = math_ops.cast(penalty_factor, dtypes.float32)
    return math_ops.truediv((5.0 + lengths) ** factor, (5.0 + 1.0) ** factor)


def _get_scores(
    log_probs,
    sequence_lengths,
    length_penalty_weight,
    coverage_penalty_weight,
    finished,
    accumulated_attention_probs,
):
    """Length-penalized log-probabilities, plus the weighted coverage penalty (GNMT:
    sum over memory steps of log(min(attention so far, 1)), for finished beams)."""
    length_penalty = math_ops.cast(
        _length_penalty(sequence_lengths, length_penalty_weight), log_probs.dtype
    )
    scores = log_probs / length_penalty
    coverage_penalty_weight = convert_to_tensor(
        coverage_penalty_weight, name="coverage_penalty_weight"
    )
    if coverage_penalty_weight.get_shape().ndims != 0:
        raise ValueError(
            "coverage_penalty_weight should be a scalar, but saw shape: "
            f"{coverage_penalty_weight.get_shape()}"
        )
    if _is_zero(coverage_penalty_weight):
        return scores
    if accumulated_attention_probs is None:
        raise ValueError(
            "accumulated_attention_probs can be None only if coverage penalty is disabled."
        )
    # Memory steps never attended (past the source length) do not count.
    accumulated = math_ops.where(
        math_ops.equal(accumulated_attention_probs, 0.0),
        array_ops.ones_like(accumulated_attention_probs),
        accumulated_attention_probs,
    )
    coverage_penalty = reduction_ops.reduce_sum(math_ops.log(math_ops.minimum(accumulated, 1.0)), 2)
    coverage_penalty = coverage_penalty * math_ops.cast(finished, coverage_penalty.dtype)
    weight = math_ops.cast(coverage_penalty_weight, coverage_penalty.dtype)
    return scores + array_ops.expand_dims(coverage_penalty * weight, 2)


def _mask_probs(probs, eos_token, finished):
    """Finished beams' rows become log-probability 0 on end_token and the dtype's lowest value
    elsewhere: a finished beam continues only with end_token, at no cost."""
    vocab_size = array_ops.shape(probs)[2]
    finished_row = array_index.one_hot(
        eos_token,
        vocab_size,
        dtype=probs.dtype,
        on_value=convert_to_tensor(0.0, dtype=probs.dtype),
        off_value=convert_to_tensor(probs.dtype.min, dtype=probs.dtype),
    )
    finished_mask = array_ops.expand_dims(finished, 2)
    finished_mask = array_ops.tile(finished_mask, array_ops.stack([1, 1, vocab_size]))
    finished_probs = array_ops.zeros_like(probs) + array_ops.reshape(finished_row, [1, 1, -1])
    return math_ops.where(finished_mask, finished_probs, probs)


def _maybe_tensor_gather_helper(gather_indices, gather_from, batch_size, range_size, gather_shape):
    """_tensor_gather_helper for tensors of rank >= 2; TensorArrays and scalars pass through."""
    if isinstance(gather_from, TensorArray):
        return gather_from
    if gather_from.get_shape().ndims is None:
        raise ValueError(f"Expected tensor ({gather_from}) to have known rank, but ndims == None.")
    if gather_from.get_shape().ndims >= 2:
        return _tensor_gather_helper(
            gather_indices, gather_from, batch_size, range_size, gather_shape
        )
    return gather_from


def _tensor_gather_helper(
    gather_indices, gather_from, batch_size, range_size, gather_shape, name=None
):
    """gather_from[b, gather_indices[b, k]] for each (b, k): the [B, range_size, ...] values,
    flattened to `gather_shape` ([-1] or [B * range_size, -1]), gathered at the flat indices
    b * range_size + index, and reshaped back to [B, K, ...]."""
    with name_scope(name, "tensor_gather_helper"):
        rank = 1 if isinstance(gather_shape, list) else 2
        offsets = array_ops.expand_dims(array_ops.range(batch_size) * range_size, 1)
        flat_indices = array_ops.reshape(gather_indices + offsets, [-1])
        output = array_index.gather(array_ops.reshape(gather_from, gather_shape), flat_indices)
        final_shape = array_ops.shape(gather_from)[: 1 + rank]
        static_batch = _static_int(batch_size)
        final_static = TensorShape([static_batch]).concatenate(
            gather_from.get_shape()[1 : 1 + rank]
        )
        output = array_ops.reshape(output, final_shape, name="output")
        output.set_shape(final_static)
        return output

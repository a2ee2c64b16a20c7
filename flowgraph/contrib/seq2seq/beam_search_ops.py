"""Beam search's tensor plumbing: `gather_tree` (the GatherTree op), `tile_batch` (repeat each
batch entry beam_width times, for the memory and initial state of a BeamSearchDecoder), and
`gather_tree_from_array` (reorder per-step values, such as an alignment history, along the
final beams' backtracked paths)."""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape
from flowgraph.framework import nest
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.scopes import name_scope
from flowgraph.gradients.registry import not_differentiable
from flowgraph.ops import array as array_ops
from flowgraph.ops import array_index
from flowgraph.ops import math as math_ops
from flowgraph.ops import reduction as reduction_ops

__all__ = ["gather_tree", "gather_tree_from_array", "tile_batch"]

not_differentiable("GatherTree")  # ids and parent pointers: nothing to differentiate


def gather_tree(step_ids, parent_ids, max_sequence_lengths, end_token, name=None):
    """The full id sequences of the final beams, backtracked through `parent_ids`.

    step_ids, parent_ids: int32 [max_time, batch, beam]; max_sequence_lengths: int32 [batch];
    end_token: the int32 id written after a beam's end and past its batch's length.

    Example:
        ids = tf.contrib.seq2seq.gather_tree([[[1, 2]], [[3, 4]]], [[[0, 0]], [[1, 0]]], [2], 9)
        # [[[2, 1]], [[3, 4]]]: beam 0 of step 1 came from beam 1 of step 0
    """
    with name_scope(name, "GatherTree", [step_ids, parent_ids]) as scope:
        step_ids = convert_to_tensor(step_ids, dtypes.int32, name="step_ids")
        parent_ids = convert_to_tensor(parent_ids, dtypes.int32, name="parent_ids")
        lengths = convert_to_tensor(max_sequence_lengths, dtypes.int32, name="lengths")
        end_token = convert_to_tensor(end_token, dtypes.int32, name="end_token")
        return apply_op(
            "GatherTree", [step_ids, parent_ids, lengths, end_token], name=scope[:-1]
        ).outputs[0]


def _tile_batch(t, multiplier):
    """[batch, ...] -> [batch * multiplier, ...], each entry repeated `multiplier` times."""
    t = convert_to_tensor(t, name="t")
    shape = t.get_shape()
    if shape.ndims is None or shape.ndims < 1:
        raise ValueError("t must have statically known rank")
    shape_t = array_ops.shape(t)
    tiling = [1] * (shape.ndims + 1)
    tiling[1] = multiplier
    static_batch = shape[0].value * multiplier if shape[0].value is not None else None
    tiled = array_ops.tile(array_ops.expand_dims(t, 1), tiling)
    tiled = array_ops.reshape(
        tiled, array_ops.concat([array_ops.reshape(shape_t[0] * multiplier, [1]), shape_t[1:]], 0)
    )
    tiled.set_shape(TensorShape([static_batch]).concatenate(shape[1:]))
    return tiled


def tile_batch(t, multiplier, name=None):
    """Each batch entry of every tensor in the nested `t` repeated `multiplier` times in a row:
    [a, b] -> [a, a, a, b, b, b] for multiplier 3 (the layout BeamSearchDecoder expects).

    Example:
        memory = tf.contrib.seq2seq.tile_batch(encoder_outputs, multiplier=beam_width)
    """
    flat_t = nest.flatten(t)
    with name_scope(name, "tile_batch", flat_t):
        return nest.map_structure(lambda t_: _tile_batch(t_, multiplier), t)


def _dim(t, axis):
    return t.get_shape()[axis].value or array_ops.shape(t)[axis]


def gather_tree_from_array(t, parent_ids, sequence_length):
    """`t` [max_time, batch, beam, ...] with each step's beams reordered so that beam k holds
    the values along final beam k's backtracked path; steps past a beam's `sequence_length`
    [batch, beam] keep their own beam."""
    t = convert_to_tensor(t, name="t")
    parent_ids = convert_to_tensor(parent_ids, dtypes.int32, name="parent_ids")
    sequence_length = convert_to_tensor(sequence_length, name="sequence_length")
    max_time = _dim(parent_ids, 0)
    batch_size = _dim(parent_ids, 1)
    beam_width = _dim(parent_ids, 2)
    beam_ids = array_ops.reshape(array_ops.range(beam_width), [1, 1, -1])
    beam_ids = array_ops.tile(beam_ids, array_ops.stack([max_time, batch_size, 1]))
    max_lengths = math_ops.cast(reduction_ops.reduce_max(sequence_length, axis=1), dtypes.int32)
    sorted_beam_ids = gather_tree(beam_ids, parent_ids, max_lengths, beam_width + 1)
    in_bound = array_ops.transpose(
        array_index.sequence_mask(sequence_length, maxlen=max_time), perm=[2, 0, 1]
    )
    sorted_beam_ids = math_ops.where(in_bound, sorted_beam_ids, beam_ids)
    time_ind = array_ops.tile(
        array_ops.reshape(array_ops.range(max_time), [-1, 1, 1]),
        array_ops.stack([1, batch_size, beam_width]),
    )
    batch_ind = array_ops.tile(
        array_ops.reshape(array_ops.range(batch_size), [1, -1, 1]),
        array_ops.stack([max_time, 1, beam_width]),
    )
    indices = array_ops.stack([time_ind, batch_ind, sorted_beam_ids], -1)
    final_shape = array_ops.shape(t)
    gather_from = array_ops.reshape(t, array_ops.stack([max_time, batch_size, beam_width, -1]))
    ordered = array_index.gather_nd(gather_from, indices)
    ordered = array_ops.reshape(ordered, final_shape)
    ordered.set_shape(t.get_shape())
    return ordered

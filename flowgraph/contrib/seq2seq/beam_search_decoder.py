"""BeamSearchDecoder: keeps the `beam_width` best partial sequences per batch entry at every
step (TF1's tf.contrib.seq2seq.BeamSearchDecoder).

State and outputs are [batch, beam, ...]; the cell runs on [batch * beam, ...] (merge before,
split after), so the cell's state and any attention memory must be tiled with `tile_batch`.
Each step: log_softmax of the logits, finished beams forced to emit `end_token` at no cost,
total log-probabilities = beam log-prob + step log-prob, scored with the GNMT length penalty
((5 + length) / 6) ** length_penalty_weight and, optionally, a coverage penalty on the
attention; the `beam_width` best (beam, word) pairs of each batch entry over all
beam * vocab candidates (top_k) become the new beams, and their states are gathered from their
parents. At the end, `finalize` backtracks the parent pointers (GatherTree) into whole
sequences, and (reorder_tensor_arrays) reorders TensorArrays in the cell state, such as an
alignment history, along the same paths.
"""

from __future__ import annotations

import collections
import logging
import numbers

import numpy as np

from flowgraph.contrib.seq2seq.basic_decoder import check_cell_and_layer, output_size_after_layer
from flowgraph.contrib.seq2seq.beam_search_ops import gather_tree, gather_tree_from_array
from flowgraph.contrib.seq2seq.beam_search_step import (
    BeamSearchDecoderOutput,
    BeamSearchDecoderState,
    attention_probs_of_state,
    beam_search_step,
)
from flowgraph.contrib.seq2seq.decoder import Decoder
from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape
from flowgraph.framework import default_graph, nest
from flowgraph.framework.convert import constant_value, convert_to_tensor
from flowgraph.framework.operation import Tensor
from flowgraph.framework.scopes import name_scope
from flowgraph.ops import array as array_ops
from flowgraph.ops import array_index
from flowgraph.ops import embedding as embedding_ops
from flowgraph.ops import logging as logging_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import reduction as reduction_ops
from flowgraph.ops.control_flow.cond import cond
from flowgraph.ops.tensor_array import TensorArray

__all__ = [
    "BeamSearchDecoder",
    "BeamSearchDecoderOutput",
    "BeamSearchDecoderState",
    "FinalBeamSearchDecoderOutput",
]

_log = logging.getLogger(__name__)


class FinalBeamSearchDecoderOutput(
    collections.namedtuple(
        "FinalBeamDecoderOutput", ["predicted_ids", "beam_search_decoder_output"]
    )
):
    """predicted_ids: the backtracked sequences [batch, time, beam] (beam 0 the best);
    beam_search_decoder_output: the raw per-step BeamSearchDecoderOutput."""

    __slots__ = ()


def _static_int(t):
    value = constant_value(t) if not isinstance(t, int) else t
    return None if value is None else int(value)


def _static_shape(s):
    """A state_size entry as a TensorShape: a size that is a tensor (the memory length of
    an attention mechanism) becomes its constant value, or an unknown shape."""
    if isinstance(s, Tensor):
        value = constant_value(s)
        if value is None:
            return TensorShape(None)
        return TensorShape(np.reshape(value, [-1]).tolist())
    return s if isinstance(s, TensorShape) else TensorShape([s] if isinstance(s, int) else s)


def _check_known_rank(t):
    if t.get_shape().ndims is None:
        raise ValueError(f"Expected tensor ({t}) to have known rank, but ndims == None.")


class BeamSearchDecoder(Decoder):
    """Beam search with `cell` from `initial_state` (tiled to [batch * beam_width, ...]).

    Example:
        memory = tf.contrib.seq2seq.tile_batch(encoder_outputs, multiplier=beam_width)
        attention = tf.contrib.seq2seq.LuongAttention(64, memory)
        cell = tf.contrib.seq2seq.AttentionWrapper(decoder_cell, attention)
        initial = cell.zero_state(batch * beam_width, tf.float32).clone(
            cell_state=tf.contrib.seq2seq.tile_batch(encoder_state, beam_width))
        decoder = tf.contrib.seq2seq.BeamSearchDecoder(
            cell, embedding, start_tokens, end_token, initial, beam_width,
            output_layer=projection, length_penalty_weight=0.6)
        outputs, _, _ = tf.contrib.seq2seq.dynamic_decode(decoder, maximum_iterations=50)
        best = outputs.predicted_ids[:, :, 0]
    """

    def __init__(
        self,
        cell,
        embedding,
        start_tokens,
        end_token,
        initial_state,
        beam_width,
        output_layer=None,
        length_penalty_weight=0.0,
        coverage_penalty_weight=0.0,
        reorder_tensor_arrays=True,
    ):
        check_cell_and_layer(cell, output_layer)
        if not isinstance(beam_width, numbers.Integral) or beam_width < 1:
            raise ValueError(f"beam_width must be a positive Python int, saw {beam_width!r}")
        self._cell = cell
        self._output_layer = output_layer
        self._reorder_tensor_arrays = reorder_tensor_arrays
        self._beam_width = int(beam_width)
        self._length_penalty_weight = length_penalty_weight
        self._coverage_penalty_weight = coverage_penalty_weight
        if callable(embedding):
            self._embedding_fn = embedding
        else:
            self._embedding_fn = lambda ids: embedding_ops.embedding_lookup(embedding, ids)
        self._start_tokens = convert_to_tensor(start_tokens, dtypes.int32, name="start_tokens")
        if self._start_tokens.get_shape().ndims != 1:
            raise ValueError("start_tokens must be a vector")
        self._end_token = convert_to_tensor(end_token, dtypes.int32, name="end_token")
        if self._end_token.get_shape().ndims != 0:
            raise ValueError("end_token must be a scalar")
        self._batch_size = array_ops.size(start_tokens)
        self._initial_cell_state = nest.map_structure(
            self._maybe_split_batch_beams, initial_state, self._cell.state_size
        )
        self._start_tokens = array_ops.tile(
            array_ops.expand_dims(self._start_tokens, 1), [1, self._beam_width]
        )
        self._start_inputs = self._embedding_fn(self._start_tokens)
        first_beam = array_ops.zeros(array_ops.reshape(self._batch_size, [1]), dtypes.int32)
        # Only beam 0 is live at the start: the other beams would duplicate it.
        self._finished = array_index.one_hot(
            first_beam, depth=self._beam_width, on_value=False, off_value=True, dtype=dtypes.bool_
        )

    # -- Decoder properties ---------------------------------------------------------------------
    @property
    def batch_size(self):
        return self._batch_size

    @property
    def tracks_own_finished(self):
        """Beams are reordered each step, so a beam's finished flag comes from its parent."""
        return True

    @property
    def output_size(self):
        beams = TensorShape([self._beam_width])
        return BeamSearchDecoderOutput(scores=beams, predicted_ids=beams, parent_ids=beams)

    @property
    def output_dtype(self):
        dtype = nest.flatten(self._initial_cell_state)[0].dtype
        return BeamSearchDecoderOutput(
            scores=nest.map_structure(lambda _: dtype, self._rnn_output_size()),
            predicted_ids=dtypes.int32,
            parent_ids=dtypes.int32,
        )

    def _rnn_output_size(self):
        return output_size_after_layer(self._cell, self._output_layer)

    def initialize(self, name=None):
        with name_scope(name, "BeamSearchDecoderInitialize"):
            return self._initialize()

    def _initialize(self):
        dtype = nest.flatten(self._initial_cell_state)[0].dtype
        first_beam = array_ops.zeros(array_ops.reshape(self._batch_size, [1]), dtypes.int32)
        log_probs = array_index.one_hot(
            first_beam,
            depth=self._beam_width,
            on_value=convert_to_tensor(0.0, dtype=dtype),
            off_value=convert_to_tensor(-np.inf, dtype=dtype),
            dtype=dtype,
        )
        attention_probs = attention_probs_of_state(
            self._initial_cell_state, self._coverage_penalty_weight
        )
        lengths = array_ops.zeros(
            array_ops.stack([self._batch_size, self._beam_width]), dtype=dtypes.int64
        )
        initial_state = BeamSearchDecoderState(
            cell_state=self._initial_cell_state,
            log_probs=log_probs,
            finished=self._finished,
            lengths=lengths,
            accumulated_attention_probs=() if attention_probs is None else attention_probs,
        )
        return self._finished, self._start_inputs, initial_state

    def finalize(self, outputs, final_state, sequence_lengths):
        """Backtracks the parent ids into whole sequences (see the module docstring)."""
        max_lengths = math_ops.cast(
            reduction_ops.reduce_max(final_state.lengths, axis=1), dtypes.int32
        )
        predicted_ids = gather_tree(
            outputs.predicted_ids, outputs.parent_ids, max_lengths, self._end_token
        )
        if self._reorder_tensor_arrays:
            final_state = final_state._replace(
                cell_state=nest.map_structure(
                    lambda t: self._maybe_sort_array_beams(
                        t, outputs.parent_ids, final_state.lengths
                    ),
                    final_state.cell_state,
                )
            )
        outputs = FinalBeamSearchDecoderOutput(
            beam_search_decoder_output=outputs, predicted_ids=predicted_ids
        )
        return outputs, final_state

    # -- [batch, beam] <-> [batch * beam] -------------------------------------------------------
    def _merge_batch_beams(self, t, s):
        """[batch, beam, s...] -> [batch * beam, s...]."""
        static_batch = _static_int(self._batch_size)
        merged = array_ops.reshape(
            t,
            array_ops.concat(
                [
                    array_ops.reshape(self._batch_size * self._beam_width, [1]),
                    array_ops.shape(t)[2:],
                ],
                0,
            ),
        )
        batch_beam = None if static_batch is None else static_batch * self._beam_width
        merged.set_shape(TensorShape([batch_beam]).concatenate(_static_shape(s)))
        return merged

    def _split_batch_beams(self, t, s):
        """[batch * beam, s...] -> [batch, beam, s...]."""
        shape = array_ops.stack([self._batch_size, self._beam_width])
        split = array_ops.reshape(t, array_ops.concat([shape, array_ops.shape(t)[1:]], 0))
        expected = TensorShape([_static_int(self._batch_size), self._beam_width]).concatenate(
            _static_shape(s)
        )
        known = t.get_shape()
        static_batch = _static_int(self._batch_size)
        if (
            static_batch is not None
            and known.ndims
            and known[0].value is not None
            and known[0].value != static_batch * self._beam_width
        ):
            raise ValueError(
                "Unexpected behavior when reshaping between beam width and batch size.  The "
                f"reshaped tensor has shape: {known}.  We expected it to have shape "
                f"(batch_size, beam_width, depth) == {expected}.  Perhaps you forgot to create "
                "a zero_state with batch_size=encoder_batch_size * beam_width?"
            )
        split.set_shape(expected)
        return split

    def _maybe_split_batch_beams(self, t, s):
        if isinstance(t, TensorArray):
            return t
        t = convert_to_tensor(t)
        _check_known_rank(t)
        return self._split_batch_beams(t, s) if t.get_shape().ndims >= 1 else t

    def _maybe_merge_batch_beams(self, t, s):
        if isinstance(t, TensorArray):
            return t
        _check_known_rank(t)
        return self._merge_batch_beams(t, s) if t.get_shape().ndims >= 2 else t

    def _maybe_sort_array_beams(self, t, parent_ids, sequence_length):
        """A TensorArray of [batch * beam, ...] elements, stacked and reordered along the final
        beams' paths; anything else (or an array whose elements cannot be) is kept as is."""
        if not isinstance(t, TensorArray):
            return t
        shape = t.element_shape
        if shape.ndims is None or shape.ndims < 1:
            _log.warning(
                "The TensorArray %s in the cell state is not amenable to sorting based on the "
                "beam search result. For a TensorArray to be sorted, its elements shape must be "
                "defined and have at least a rank of 1, but saw shape: %s",
                t.handle.name,
                shape,
            )
            return t
        static_batch = _static_int(self._batch_size)
        if (
            static_batch is not None
            and shape[0].value is not None
            and shape[0].value != static_batch * self._beam_width
        ):
            _log.warning(
                "TensorArray reordering expects elements to be reshapable to [batch_size, "
                "beam_size, -1] which is incompatible with the current shape %s. Consider "
                "setting reorder_tensor_arrays to False to disable TensorArray reordering "
                "during the beam search.",
                shape,
            )
            return t
        stacked = t.stack()
        message = (
            "TensorArray reordering expects elements to be reshapable to [batch_size, "
            "beam_size, -1] which is incompatible with the dynamic shape of "
            f"{stacked.name} elements. Consider setting reorder_tensor_arrays to False to "
            "disable TensorArray reordering during the beam search."
        )
        batch_beam = self._batch_size * self._beam_width
        check = logging_ops.Assert(
            math_ops.equal(array_ops.shape(stacked)[1], batch_beam), [message]
        )
        with default_graph.get().control_dependencies([check]):
            return gather_tree_from_array(stacked, parent_ids, sequence_length)

    # -- one step -------------------------------------------------------------------------------
    def step(self, time, inputs, state, name=None):
        with name_scope(name, "BeamSearchDecoderStep", (time, inputs)):
            inputs = nest.map_structure(
                lambda inp: self._merge_batch_beams(inp, inp.get_shape()[2:]), inputs
            )
            cell_state = nest.map_structure(
                self._maybe_merge_batch_beams, state.cell_state, self._cell.state_size
            )
            cell_outputs, next_cell_state = self._cell(inputs, cell_state)
            cell_outputs = nest.map_structure(
                lambda out: self._split_batch_beams(out, out.get_shape()[1:]), cell_outputs
            )
            next_cell_state = nest.map_structure(
                self._maybe_split_batch_beams, next_cell_state, self._cell.state_size
            )
            if self._output_layer is not None:
                cell_outputs = self._output_layer(cell_outputs)
            output, next_state = beam_search_step(
                time=time,
                logits=cell_outputs,
                next_cell_state=next_cell_state,
                beam_state=state,
                batch_size=self._batch_size,
                beam_width=self._beam_width,
                end_token=self._end_token,
                length_penalty_weight=self._length_penalty_weight,
                coverage_penalty_weight=self._coverage_penalty_weight,
            )
            finished = next_state.finished
            sample_ids = output.predicted_ids
            next_inputs = cond(
                reduction_ops.reduce_all(finished),
                lambda: self._start_inputs,
                lambda: self._embedding_fn(sample_ids),
            )
        return output, next_state, next_inputs, finished

"""Decoder and dynamic_decode: a decoder's steps run in one while loop (whitepaper §4.4) until
every sequence in the batch is finished (TF1's tf.contrib.seq2seq.decoder).

A Decoder says how to start (`initialize` -> finished, first inputs, state) and how to take one
step (`step` -> outputs, next state, next inputs, finished); `dynamic_decode` runs the loop:
each step's outputs are written to growing TensorArrays (one per output tensor) and stacked
at the end, and the per-example lengths count the steps taken before finishing. A decoder may
rewrite the stacked outputs at the end (`finalize`, e.g. beam search backtracking).
"""

from __future__ import annotations

import abc
import numbers

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape, as_shape
from flowgraph.framework import nest
from flowgraph.framework.convert import constant_value, convert_to_tensor
from flowgraph.framework.operation import Tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import reduction as reduction_ops
from flowgraph.ops import variable_scope as vs
from flowgraph.ops.control_flow.while_loop import while_loop
from flowgraph.ops.dynamic_rnn import _transpose_batch_time
from flowgraph.ops.tensor_array import TensorArray

__all__ = ["Decoder", "dynamic_decode"]


class Decoder(abc.ABC):
    """What dynamic_decode drives (see the module docstring). `tracks_own_finished` is True
    for decoders (beam search) whose finished flags may turn back to False, so the loop must
    not OR them with the previous ones."""

    @property
    @abc.abstractmethod
    def batch_size(self):
        """The batch size of the inputs (an int or a scalar int32 tensor)."""

    @property
    @abc.abstractmethod
    def output_size(self):
        """A (nested) structure of TensorShapes or ints: one step's output per example."""

    @property
    @abc.abstractmethod
    def output_dtype(self):
        """A (nested) structure of DTypes matching `output_size`."""

    @abc.abstractmethod
    def initialize(self, name=None):
        """(finished, initial inputs, initial state)."""

    @abc.abstractmethod
    def step(self, time, inputs, state, name=None):
        """(outputs, next state, next inputs, finished) of step `time`."""

    @property
    def tracks_own_finished(self):
        return False

    def finalize(self, outputs, final_state, sequence_lengths):
        raise NotImplementedError


def zero_state_tensors(size, batch_size, dtype):
    """Zeros of shape [batch_size] + size for each (size, dtype) of a nested structure; a size
    or batch size may be an int, a TensorShape or a scalar tensor."""

    def zeros(s, d):
        if isinstance(s, Tensor):
            inner = array_ops.reshape(s, [-1])
            static = TensorShape([constant_value(s)])
        else:
            static = as_shape([s] if isinstance(s, numbers.Integral) else s)
            inner = static.as_list()
        if isinstance(batch_size, numbers.Integral) and not isinstance(s, Tensor):
            z = array_ops.zeros([batch_size] + inner, dtype=d)
        else:
            batch = array_ops.reshape(convert_to_tensor(batch_size, dtypes.int32), [1])
            z = array_ops.zeros(array_ops.concat([batch, inner], 0), dtype=d)
        static_batch = batch_size if isinstance(batch_size, numbers.Integral) else None
        if static_batch is None and isinstance(batch_size, Tensor):
            value = constant_value(batch_size)
            static_batch = None if value is None else int(value)
        z.set_shape(TensorShape([static_batch]).concatenate(static))
        return z

    dtype_tree = dtype if nest.is_sequence(dtype) else nest.map_structure(lambda _: dtype, size)
    return nest.map_structure(zeros, size, dtype_tree)


def _batch_shape(batch_size, from_shape):
    """[static batch] + from_shape for an output TensorArray's element shape (None: unknown)."""
    if not isinstance(from_shape, TensorShape) or from_shape.ndims == 0:
        return None
    static = constant_value(convert_to_tensor(batch_size, name="batch_size"))
    return TensorShape([None if static is None else int(static)]).concatenate(from_shape)


def _check_maximum_iterations(maximum_iterations):
    if maximum_iterations is None:
        return None
    maximum_iterations = convert_to_tensor(
        maximum_iterations, dtype=dtypes.int32, name="maximum_iterations"
    )
    if maximum_iterations.get_shape().ndims != 0:
        raise ValueError("maximum_iterations must be a scalar")
    return maximum_iterations


def dynamic_decode(
    decoder,
    output_time_major=False,
    impute_finished=False,
    maximum_iterations=None,
    parallel_iterations=32,
    swap_memory=False,
    scope=None,
):
    """Runs `decoder` step by step until every example is finished (or `maximum_iterations`).

    Returns (final_outputs, final_state, final_sequence_lengths): outputs [batch, time, ...]
    ([time, batch, ...] with `output_time_major`), the last state, and int32 lengths [batch].
    With `impute_finished`, a finished example's outputs are zeros and its state is copied
    through unchanged (slower, but the final state is the state at its last real step and
    gradients do not flow through the padding steps).

    Example:
        helper = tf.contrib.seq2seq.TrainingHelper(decoder_inputs, target_lengths)
        decoder = tf.contrib.seq2seq.BasicDecoder(cell, helper, encoder_state, projection)
        outputs, state, lengths = tf.contrib.seq2seq.dynamic_decode(decoder)
        logits = outputs.rnn_output
    """
    if not isinstance(decoder, Decoder):
        raise TypeError(f"Expected decoder to be type Decoder, but saw: {type(decoder)}")
    with vs.variable_scope(scope, default_name="decoder"):
        maximum_iterations = _check_maximum_iterations(maximum_iterations)
        initial_finished, initial_inputs, initial_state = decoder.initialize()
        zero_outputs = zero_state_tensors(
            decoder.output_size, decoder.batch_size, decoder.output_dtype
        )
        if maximum_iterations is not None:
            initial_finished = math_ops.logical_or(initial_finished, 0 >= maximum_iterations)
        initial_sequence_lengths = array_ops.zeros_like(initial_finished, dtype=dtypes.int32)
        initial_time = convert_to_tensor(0, dtype=dtypes.int32)
        initial_outputs_ta = nest.map_structure(
            lambda s, d: TensorArray(
                dtype=d,
                size=0,
                dynamic_size=True,
                element_shape=_batch_shape(decoder.batch_size, s),
            ),
            _as_shapes(decoder.output_size),
            decoder.output_dtype,
        )

        def condition(time, outputs_ta, state, inputs, finished, sequence_lengths):
            return math_ops.logical_not(reduction_ops.reduce_all(finished))

        def body(time, outputs_ta, state, inputs, finished, sequence_lengths):
            next_outputs, decoder_state, next_inputs, decoder_finished = decoder.step(
                time, inputs, state
            )
            lengths = None
            if decoder.tracks_own_finished:
                next_finished = decoder_finished
                lengths = getattr(decoder_state, "lengths", None)
            else:
                next_finished = math_ops.logical_or(decoder_finished, finished)
            if lengths is not None:  # the decoder counts them; read them again next step
                next_sequence_lengths = math_ops.cast(lengths, dtypes.int32)
            else:
                next_sequence_lengths = math_ops.where(
                    math_ops.logical_not(finished),
                    array_ops.fill(array_ops.shape(sequence_lengths), time + 1),
                    sequence_lengths,
                )
            nest.assert_same_structure(state, decoder_state, "state and the decoder's state")
            nest.assert_same_structure(outputs_ta, next_outputs, "output_size and the outputs")
            nest.assert_same_structure(inputs, next_inputs, "inputs and the next inputs")
            if impute_finished:
                emit = nest.map_structure(
                    lambda out, zero: math_ops.where(finished, zero, out),
                    next_outputs,
                    zero_outputs,
                )
                next_state = nest.map_structure(
                    lambda new, cur: _maybe_copy_state(finished, new, cur), decoder_state, state
                )
            else:
                emit, next_state = next_outputs, decoder_state
            outputs_ta = nest.map_structure(lambda ta, out: ta.write(time, out), outputs_ta, emit)
            return (
                time + 1,
                outputs_ta,
                next_state,
                next_inputs,
                next_finished,
                next_sequence_lengths,
            )

        res = while_loop(
            condition,
            body,
            (
                initial_time,
                initial_outputs_ta,
                initial_state,
                initial_inputs,
                initial_finished,
                initial_sequence_lengths,
            ),
            parallel_iterations=parallel_iterations,
            maximum_iterations=maximum_iterations,
            swap_memory=swap_memory,
        )
        final_outputs_ta, final_state, final_sequence_lengths = res[1], res[2], res[5]
        final_outputs = nest.map_structure(lambda ta: ta.stack(), final_outputs_ta)
        try:
            final_outputs, final_state = decoder.finalize(
                final_outputs, final_state, final_sequence_lengths
            )
        except NotImplementedError:
            pass
        if not output_time_major:
            final_outputs = nest.map_structure(_transpose_batch_time, final_outputs)
    return final_outputs, final_state, final_sequence_lengths


def _as_shapes(output_size):
    """Every int or list in a nested output_size as a TensorShape."""
    return nest.map_structure(
        lambda s: s if isinstance(s, TensorShape) else as_shape([s] if isinstance(s, int) else s),
        output_size,
    )


def _maybe_copy_state(finished, new, cur):
    """`cur` for finished examples, else `new`; TensorArrays and scalars pass through."""
    if isinstance(cur, TensorArray):
        return new
    new.set_shape(cur.get_shape())
    if new.get_shape().ndims == 0:
        return new
    return math_ops.where(finished, cur, new)

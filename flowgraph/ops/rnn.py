"""Unrolled recurrent networks: `static_rnn` and `static_bidirectional_rnn` (TF1's tf.nn).

The graph holds one copy of the cell per time step, all sharing the cell's variables (the
variable scope is set to reuse after the first step). With `sequence_length`, each example
stops at its own length: past it the output is zero and the state is copied through, chosen
per example with a select, so the final state is the state at each example's last step.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape
from flowgraph.framework import nest
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import rnn_cell
from flowgraph.ops import variable_scope as vs

__all__ = ["static_bidirectional_rnn", "static_rnn"]


def _batch_size(first_input):
    """The static batch size if known, else a scalar tensor."""
    shape = first_input.get_shape()
    if shape.ndims is not None and shape.ndims >= 1 and shape[0].value is not None:
        return shape[0].value
    return array_ops.shape(first_input)[0]


def _check_inputs(inputs):
    if not nest.is_sequence(inputs):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    for flat in nest.flatten(inputs):
        shape = flat.get_shape()
        if shape.ndims is not None and shape.ndims >= 2:
            for i, size in enumerate(shape.as_list()[1:]):
                if size is None:
                    raise ValueError(
                        f"Input size (dimension {i} of inputs) must be accessible via shape "
                        "inference, but saw value None."
                    )


def _select_rows(finished, a, b):
    """Per example (row): `a` where `finished`, else `b`."""
    rank = b.get_shape().ndims
    cond = finished
    if rank is not None and rank > 1:
        cond = array_ops.reshape(finished, [-1] + [1] * (rank - 1))
    return math_ops.where_v2(cond, a, b)


def _rnn_step(time, sequence_length, zero_output, state, call_cell):
    """One masked step: examples whose length is <= time emit zeros and keep their state."""
    new_output, new_state = call_cell()
    nest.assert_same_structure(state, new_state, "state and new_state")
    finished = math_ops.greater_equal(time, sequence_length)
    flat_out = [
        _select_rows(finished, z, o)
        for z, o in zip(nest.flatten(zero_output), nest.flatten(new_output))
    ]
    flat_state = [
        _select_rows(finished, s, n) for s, n in zip(nest.flatten(state), nest.flatten(new_state))
    ]
    for out, ref in zip(flat_out + flat_state, nest.flatten(new_output) + nest.flatten(new_state)):
        out.set_shape(ref.get_shape())
    return (
        nest.pack_sequence_as(new_output, flat_out),
        nest.pack_sequence_as(new_state, flat_state),
    )


def _zero_output(cell, batch_size, dtype):
    def zeros(size):
        return rnn_cell._zeros(batch_size, size, dtype)

    return nest.map_structure(zeros, cell.output_size)


def static_rnn(cell, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
    """Runs `cell` over the list `inputs` (one [batch, depth] tensor per time step).

    Returns (outputs, state): the list of per-step outputs and the final state.

    Example:
        cell = tf.nn.rnn_cell.BasicLSTMCell(64)
        outputs, state = tf.nn.static_rnn(cell, tf.unstack(x, axis=1), dtype=tf.float32)
    """
    rnn_cell.assert_like_rnncell("cell", cell)
    _check_inputs(inputs)
    outputs = []
    with vs.variable_scope(scope or "rnn") as varscope:
        first = nest.flatten(inputs)[0]
        batch_size = _batch_size(first)
        if initial_state is not None:
            state = initial_state
        else:
            if not dtype:
                raise ValueError("If no initial_state is provided, dtype must be specified")
            state = cell.zero_state(batch_size, dtype)
        if sequence_length is not None:
            sequence_length = convert_to_tensor(sequence_length, name="sequence_length")
            if sequence_length.get_shape().ndims not in (None, 1):
                raise ValueError("sequence_length must be a vector of length batch_size")
            sequence_length = math_ops.cast(sequence_length, dtypes.int32)
            state_dtype = dtype or nest.flatten(state)[0].dtype
            zero_output = _zero_output(cell, batch_size, dtypes.as_dtype(state_dtype).base_dtype)
        for time, input_ in enumerate(inputs):
            if time > 0:
                varscope.reuse_variables()

            def call_cell(input_=input_, state=state):
                return cell(input_, state)

            if sequence_length is not None:
                output, state = _rnn_step(time, sequence_length, zero_output, state, call_cell)
            else:
                output, state = call_cell()
            outputs.append(output)
        return outputs, state


def _reverse_seq(input_seq, lengths):
    """Reverses the time order; with `lengths`, only each example's first lengths[b] steps."""
    if lengths is None:
        return list(reversed(input_seq))
    flat_per_step = [nest.flatten(x) for x in input_seq]
    columns = []
    for parts in zip(*flat_per_step):
        joined = array_ops.stack(parts)  # [time, batch, ...]
        shape = TensorShape([None]).concatenate(parts[0].get_shape().with_rank_at_least(1))
        joined.set_shape(shape.merge_with(joined.get_shape()))
        reversed_ = array_ops.reverse_sequence(
            joined, math_ops.cast(lengths, dtypes.int64), seq_axis=0, batch_axis=1
        )
        steps = array_ops.unstack(reversed_, num=len(input_seq))
        for s, p in zip(steps, parts):
            s.set_shape(p.get_shape())
        columns.append(steps)
    return [
        nest.pack_sequence_as(input_seq[t], [col[t] for col in columns])
        for t in range(len(input_seq))
    ]


def static_bidirectional_rnn(
    cell_fw,
    cell_bw,
    inputs,
    initial_state_fw=None,
    initial_state_bw=None,
    dtype=None,
    sequence_length=None,
    scope=None,
):
    """A forward and a backward static_rnn over `inputs`; per-step outputs are concatenated
    [fw, bw] along depth. Returns (outputs, output_state_fw, output_state_bw)."""
    rnn_cell.assert_like_rnncell("cell_fw", cell_fw)
    rnn_cell.assert_like_rnncell("cell_bw", cell_bw)
    if not nest.is_sequence(inputs):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    with vs.variable_scope(scope or "bidirectional_rnn"):
        with vs.variable_scope("fw") as fw_scope:
            output_fw, state_fw = static_rnn(
                cell_fw, inputs, initial_state_fw, dtype, sequence_length, scope=fw_scope
            )
        with vs.variable_scope("bw") as bw_scope:
            reversed_inputs = _reverse_seq(inputs, sequence_length)
            tmp, state_bw = static_rnn(
                cell_bw, reversed_inputs, initial_state_bw, dtype, sequence_length, scope=bw_scope
            )
    output_bw = _reverse_seq(tmp, sequence_length)
    outputs = []
    for fw, bw in zip(output_fw, output_bw):
        flat = [array_ops.concat([f, b], 1) for f, b in zip(nest.flatten(fw), nest.flatten(bw))]
        outputs.append(nest.pack_sequence_as(fw, flat))
    return outputs, state_fw, state_bw

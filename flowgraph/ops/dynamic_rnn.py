"""Recurrent networks as a loop over time: `dynamic_rnn`, `bidirectional_dynamic_rnn` and
`raw_rnn` (TF1's tf.nn), built on `while_loop` and TensorArrays (whitepaper §4.4).

Unlike `static_rnn`, the graph holds the cell once, whatever the number of time steps: the
inputs are unstacked (time-major) into one TensorArray per input tensor, and each iteration
reads step `time`, calls the cell and writes its output to an output TensorArray; the state
travels as loop variables. With `sequence_length`, each example stops at its own length (past
it the output is zero and the state is copied through, the per-example select of
`static_rnn`), and the loop itself stops at max(sequence_length); the steps the loop never ran
are filled with zeros. `raw_rnn` is the same loop with the input of each step and the
stopping rule left to a user function.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape, as_shape
from flowgraph.framework import default_graph, nest
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import logging as logging_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import reduction as reduction_ops
from flowgraph.ops import rnn_cell
from flowgraph.ops import variable_scope as vs
from flowgraph.ops.control_flow.while_loop import while_loop
from flowgraph.ops.rnn import _rnn_step, _zero_output
from flowgraph.ops.tensor_array import TensorArray

__all__ = ["bidirectional_dynamic_rnn", "dynamic_rnn", "raw_rnn"]


def _transpose_batch_time(x):
    """Swaps dimensions 0 and 1 (batch-major <-> time-major); a tensor of rank < 2 is kept."""
    shape = x.get_shape()
    if shape.ndims is not None and shape.ndims < 2:
        return x
    if shape.ndims is not None:
        perm = [1, 0] + list(range(2, shape.ndims))
    else:
        perm = array_ops.concat([[1, 0], array_ops.range_(2, array_ops.rank(x))], 0)
    x_t = array_ops.transpose(x, perm)
    if shape.ndims is not None:
        x_t.set_shape(TensorShape([shape[1].value, shape[0].value]).concatenate(shape[2:]))
    return x_t


def _best_effort_batch_size(flat_input):
    """The static batch size (dimension 1 of time-major inputs) if any input knows it, else a
    scalar tensor read from the first input."""
    for x in flat_input:
        shape = x.get_shape()
        if shape.ndims is None:
            continue
        if shape.ndims < 2:
            raise ValueError(f"Expected input tensor {x.name} to have rank at least 2")
        if shape[1].value is not None:
            return shape[1].value
    return array_ops.shape(flat_input[0])[1]


def _infer_state_dtype(explicit_dtype, state):
    """`explicit_dtype` if given, else the one dtype all state tensors share."""
    if explicit_dtype is not None:
        return dtypes.as_dtype(explicit_dtype).base_dtype
    inferred = [s.dtype.base_dtype for s in nest.flatten(state)]
    if not inferred:
        raise ValueError("Unable to infer dtype from empty state.")
    if any(d != inferred[0] for d in inferred):
        raise ValueError(
            "State has tensors of different inferred_dtypes. Unable to infer a single "
            "representative dtype."
        )
    return inferred[0]


def _check_sequence_length(sequence_length, batch_size):
    """int32 vector [batch]: checked statically when both sizes are known, else by an Assert
    that runs before the loop (TF1's CheckSeqLen)."""
    sequence_length = math_ops.cast(convert_to_tensor(sequence_length), dtypes.int32)
    shape = sequence_length.get_shape()
    if shape.ndims not in (None, 1):
        raise ValueError(
            f"sequence_length must be a vector of length batch_size, but saw shape: {shape}"
        )
    static_len = shape[0].value if shape.ndims == 1 else None
    if isinstance(batch_size, int) and static_len is not None and static_len != batch_size:
        raise ValueError(
            f"sequence_length has length {shape[0].value} but the inputs have batch size "
            f"{batch_size}"
        )
    sequence_length = array_ops.identity(sequence_length, name="sequence_length")
    seq_shape = array_ops.shape(sequence_length)
    expected = array_ops.stack([batch_size])
    check = logging_ops.Assert(
        reduction_ops.reduce_all(math_ops.equal(seq_shape, expected)),
        [
            f"Expected shape for Tensor {sequence_length.name} is ",
            expected,
            " but saw shape: ",
            seq_shape,
        ],
    )
    with default_graph.get().control_dependencies([check]):
        return array_ops.identity(sequence_length, name="CheckSeqLen")


def dynamic_rnn(
    cell,
    inputs,
    sequence_length=None,
    initial_state=None,
    dtype=None,
    parallel_iterations=None,
    swap_memory=False,
    time_major=False,
    scope=None,
):
    """Runs `cell` over every time step of `inputs` in a while loop.

    `inputs` is a tensor (or nested structure of tensors) of shape [batch, time, ...], or
    [time, batch, ...] with `time_major`. Returns (outputs, final_state): outputs shaped like
    the inputs' leading dims plus `cell.output_size`, and the state after each example's last
    step (its `sequence_length`, when given).

    Example:
        cell = tf.nn.rnn_cell.BasicLSTMCell(64)
        outputs, state = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
    """
    rnn_cell.assert_like_rnncell("cell", cell)
    with vs.variable_scope(scope or "rnn"):
        flat_input = [convert_to_tensor(x) for x in nest.flatten(inputs)]
        if not flat_input:
            raise ValueError("inputs must not be empty")
        if not time_major:
            flat_input = [_transpose_batch_time(x) for x in flat_input]
        if parallel_iterations is None:
            parallel_iterations = 32
        batch_size = _best_effort_batch_size(flat_input)
        if initial_state is not None:
            state = initial_state
        else:
            if not dtype:
                raise ValueError("If there is no initial_state, you must give a dtype.")
            state = cell.zero_state(batch_size, dtype)
        if sequence_length is not None:
            sequence_length = _check_sequence_length(sequence_length, batch_size)
        time_major_inputs = nest.pack_sequence_as(inputs, flat_input)
        outputs, final_state = _dynamic_rnn_loop(
            cell, time_major_inputs, state, parallel_iterations, swap_memory, sequence_length, dtype
        )
        if not time_major:
            outputs = nest.map_structure(_transpose_batch_time, outputs)
        return outputs, final_state


def _static_time_and_batch(flat_input):
    """(time steps, batch size) as known statically (None where unknown), after checking that
    every input is [time, batch, depth...] with known depth and agrees on time and batch."""
    shapes = [x.get_shape().with_rank_at_least(3) for x in flat_input]
    if any(shape.ndims is None for shape in shapes):
        raise ValueError(
            "Input size (depth of inputs) must be accessible via shape inference, but the rank "
            "of an input is unknown."
        )
    const_time, const_batch = shapes[0].as_list()[:2]
    for shape in shapes:
        if not shape[2:].is_fully_defined():
            raise ValueError(
                "Input size (depth of inputs) must be accessible via shape inference, but saw "
                f"value None (input shape {shape})."
            )
        if shape[0].value != const_time:
            raise ValueError(
                "Time steps is not the same for all the elements in the input in a batch."
            )
        if shape[1].value != const_batch:
            raise ValueError("Batch_size is not the same for all the elements in the input.")
    return shapes, const_time, const_batch


def _dynamic_rnn_loop(
    cell, inputs, initial_state, parallel_iterations, swap_memory, sequence_length, dtype
):
    """The while loop over time on time-major `inputs`; returns (time-major outputs, state)."""
    graph = default_graph.get()
    flat_input = nest.flatten(inputs)
    flat_output_size = nest.flatten(cell.output_size)
    shapes, const_time, const_batch = _static_time_and_batch(flat_input)
    time_steps = const_time if const_time is not None else array_ops.shape(flat_input[0])[0]
    batch_size = _best_effort_batch_size(flat_input)
    out_dtype = _infer_state_dtype(dtype, initial_state)
    if sequence_length is not None:
        zero_output = _zero_output(cell, batch_size, out_dtype)
        max_len = reduction_ops.reduce_max(sequence_length)
        loop_bound = math_ops.minimum(time_steps, math_ops.maximum(1, max_len))
    else:
        zero_output = None
        loop_bound = time_steps
    time = convert_to_tensor(0, dtype=dtypes.int32, name="time")
    with graph.name_scope("dynamic_rnn") as base_name:
        pass  # only reserves a unique prefix for the arrays' names, as TF1 does
    output_tas = tuple(
        TensorArray(
            out_dtype,
            size=time_steps,
            tensor_array_name=f"{base_name}output_{i}",
            element_shape=TensorShape([const_batch]).concatenate(as_shape(size)),
        )
        for i, size in enumerate(flat_output_size)
    )
    input_tas = tuple(
        TensorArray(
            x.dtype,
            size=time_steps,
            tensor_array_name=f"{base_name}input_{i}",
            element_shape=x.get_shape()[1:],
        ).unstack(x)
        for i, x in enumerate(flat_input)
    )

    def time_step(time, output_tas, state):
        flat_x = [ta.read(time) for ta in input_tas]
        for x, shape in zip(flat_x, shapes):
            x.set_shape(shape[1:])
        x_t = nest.pack_sequence_as(inputs, flat_x)

        def call_cell():
            return cell(x_t, state)

        if sequence_length is not None:
            output, new_state = _rnn_step(time, sequence_length, zero_output, state, call_cell)
        else:
            output, new_state = call_cell()
        nest.assert_same_structure(state, new_state, "state and new_state")
        for old, new in zip(nest.flatten(state), nest.flatten(new_state)):
            new.set_shape(old.get_shape())  # the state keeps its shape from step to step
        output_tas = tuple(ta.write(time, out) for ta, out in zip(output_tas, nest.flatten(output)))
        return time + 1, output_tas, new_state

    _, output_tas, final_state = while_loop(
        lambda time, *_: time < loop_bound,
        time_step,
        (time, output_tas, initial_state),
        parallel_iterations=parallel_iterations,
        swap_memory=swap_memory,
    )
    outputs = []
    for ta, size in zip(output_tas, flat_output_size):
        shape = TensorShape([const_time, const_batch]).concatenate(as_shape(size))
        out = _stack_outputs(ta, shape.ndims, loop_bound, time_steps, sequence_length is not None)
        out.set_shape(shape)
        outputs.append(out)
    return nest.pack_sequence_as(cell.output_size, outputs), final_state


def _stack_outputs(ta, rank, loop_bound, time_steps, stopped_early):
    """[time, batch, ...] (of `rank` dims) from the output TensorArray. When the loop stopped
    at max(sequence_length), the steps it never wrote are zeros (every example is past its end)."""
    if not stopped_early:
        return ta.stack()
    written = ta.gather(array_ops.range_(0, loop_bound))
    missing = array_ops.reshape(array_ops.stack([0, time_steps - loop_bound]), [1, 2])
    rest = array_ops.zeros([rank - 1, 2], dtype=dtypes.int32)
    return array_ops.pad(written, array_ops.concat([missing, rest], 0))


def bidirectional_dynamic_rnn(
    cell_fw,
    cell_bw,
    inputs,
    sequence_length=None,
    initial_state_fw=None,
    initial_state_bw=None,
    dtype=None,
    parallel_iterations=None,
    swap_memory=False,
    time_major=False,
    scope=None,
):
    """A forward and a backward `dynamic_rnn` over `inputs`.

    The backward cell sees each example reversed in time (only its first sequence_length steps,
    via reverse_sequence), and its outputs are reversed back so step t of both directions lines
    up. Returns ((output_fw, output_bw), (output_state_fw, output_state_bw)); variables live
    under `bidirectional_rnn/fw/` and `bidirectional_rnn/bw/`.

    Example:
        (out_fw, out_bw), _ = tf.nn.bidirectional_dynamic_rnn(fw, bw, x, dtype=tf.float32)
        outputs = tf.concat([out_fw, out_bw], axis=2)
    """
    rnn_cell.assert_like_rnncell("cell_fw", cell_fw)
    rnn_cell.assert_like_rnncell("cell_bw", cell_bw)
    time_axis, batch_axis = (0, 1) if time_major else (1, 0)

    def reverse(x):
        if sequence_length is None:
            return array_ops.reverse(x, axis=[time_axis])
        return array_ops.reverse_sequence(
            x, sequence_length, seq_axis=time_axis, batch_axis=batch_axis
        )

    with vs.variable_scope(scope or "bidirectional_rnn"):
        with vs.variable_scope("fw") as fw_scope:
            output_fw, state_fw = dynamic_rnn(
                cell_fw,
                inputs,
                sequence_length=sequence_length,
                initial_state=initial_state_fw,
                dtype=dtype,
                parallel_iterations=parallel_iterations,
                swap_memory=swap_memory,
                time_major=time_major,
                scope=fw_scope,
            )
        with vs.variable_scope("bw") as bw_scope:
            inputs_reversed = nest.map_structure(reverse, inputs)
            tmp, state_bw = dynamic_rnn(
                cell_bw,
                inputs_reversed,
                sequence_length=sequence_length,
                initial_state=initial_state_bw,
                dtype=dtype,
                parallel_iterations=parallel_iterations,
                swap_memory=swap_memory,
                time_major=time_major,
                scope=bw_scope,
            )
    output_bw = nest.map_structure(reverse, tmp)
    return (output_fw, output_bw), (state_fw, state_bw)


def raw_rnn(cell, loop_fn, parallel_iterations=None, swap_memory=False, scope=None):
    """A while loop over time in which `loop_fn` chooses each step's input and when to stop.

    `loop_fn(time, cell_output, cell_state, loop_state)` returns
    `(finished, next_input, next_cell_state, emit_output, next_loop_state)`. It is first called
    with time 0 and None for the rest, returning the first input, the initial state, the
    structure of what to emit (None: like `cell.output_size`) and the initial loop state. The
    loop runs while some example is not `finished` [batch]; a finished example emits zeros and
    keeps its state. Returns (emit_ta, final_state, final_loop_state): `emit_ta` a (nested)
    TensorArray of the per-step emits, indexed by time.

    Example:
        inputs_ta = tf.TensorArray(tf.float32, size=max_time).unstack(inputs)  # time-major
        def loop_fn(time, cell_output, cell_state, loop_state):
            state = cell.zero_state(batch, tf.float32) if cell_output is None else cell_state
            finished = time >= lengths
            x = tf.cond(tf.reduce_all(finished), lambda: tf.zeros([batch, depth]),
                        lambda: inputs_ta.read(time))
            return finished, x, state, cell_output, None
        outputs_ta, final_state, _ = tf.nn.raw_rnn(cell, loop_fn)
    """
    rnn_cell.assert_like_rnncell("cell", cell)
    if not callable(loop_fn):
        raise TypeError("loop_fn must be a callable")
    if parallel_iterations is None:
        parallel_iterations = 32
    with vs.variable_scope(scope or "rnn"):
        time = convert_to_tensor(0, dtype=dtypes.int32, name="time")
        finished, next_input, initial_state, emit_structure, init_loop_state = loop_fn(
            time, None, None, None
        )
        loop_state = init_loop_state
        if loop_state is None:
            loop_state = convert_to_tensor(0, name="initial_loop_state")
        flat_input = [convert_to_tensor(x) for x in nest.flatten(next_input)]
        next_input = nest.pack_sequence_as(next_input, flat_input)
        const_batch, batch_size = _raw_batch_size(flat_input)
        nest.assert_same_structure(initial_state, cell.state_size, "initial_state and state_size")
        state = nest.map_structure(convert_to_tensor, initial_state)
        emit_ta, zero_emit = _emit_arrays(cell, emit_structure, state, const_batch, batch_size)

        def condition(time, finished, *_):
            return math_ops.logical_not(reduction_ops.reduce_all(finished))

        def body(time, finished, current_input, emit_ta, state, loop_state):
            output, cell_state = cell(current_input, state)
            nest.assert_same_structure(state, cell_state, "state and the cell's new state")
            nest.assert_same_structure(cell.output_size, output, "output_size and the cell output")
            next_time = time + 1
            next_finished, next_input, next_state, emit, next_loop_state = loop_fn(
                next_time, output, cell_state, loop_state
            )
            nest.assert_same_structure(state, next_state, "state and loop_fn's next_cell_state")
            nest.assert_same_structure(current_input, next_input, "input and loop_fn's next_input")
            nest.assert_same_structure(emit_ta, emit, "emit structure and loop_fn's emit_output")
            if next_loop_state is None:  # loop_fn may leave the loop state as it is
                next_loop_state = loop_state
            emit = nest.map_structure(lambda z, e: _keep_finished(finished, z, e), zero_emit, emit)
            next_state = nest.map_structure(
                lambda s, n: _keep_finished(finished, s, n), state, next_state
            )
            emit_ta = nest.map_structure(lambda ta, e: ta.write(time, e), emit_ta, emit)
            finished = math_ops.logical_or(finished, next_finished)
            return next_time, finished, next_input, emit_ta, next_state, next_loop_state

        loop_vars = [time, convert_to_tensor(finished), next_input, emit_ta, state, loop_state]
        result = while_loop(
            condition,
            body,
            loop_vars,
            parallel_iterations=parallel_iterations,
            swap_memory=swap_memory,
        )
        emit_ta, final_state, final_loop_state = result[-3:]
        return emit_ta, final_state, (None if init_loop_state is None else final_loop_state)


def _raw_batch_size(flat_input):
    """(static batch size or None, batch size as an int or a scalar tensor) from dimension 0."""
    static = None
    for x in flat_input:
        shape = x.get_shape()
        dim = shape[0].value if shape.ndims else None
        if static is not None and dim is not None and dim != static:
            raise ValueError(f"Batch sizes of the inputs differ: {static} vs {dim}")
        static = static if dim is None else dim
    return static, static if static is not None else array_ops.shape(flat_input[0])[0]


def _emit_arrays(cell, emit_structure, state, const_batch, batch_size):
    """One growing TensorArray per emitted tensor, and the zeros a finished example emits."""
    if emit_structure is not None:
        flat_emit = nest.flatten(emit_structure)
        sizes = [
            e.get_shape()[1:] if e.get_shape()[1:].is_fully_defined() else array_ops.shape(e)[1:]
            for e in flat_emit
        ]
        emit_dtypes = [e.dtype.base_dtype for e in flat_emit]
    else:
        emit_structure = cell.output_size
        sizes = [as_shape(s) for s in nest.flatten(emit_structure)]
        emit_dtypes = [nest.flatten(state)[0].dtype.base_dtype] * len(sizes)
    tas, zeros = [], []
    for i, (size, dtype) in enumerate(zip(sizes, emit_dtypes)):
        static = size if isinstance(size, TensorShape) else TensorShape(None)
        tas.append(
            TensorArray(
                dtype,
                size=0,
                dynamic_size=True,
                name=f"rnn_output_{i}",
                element_shape=TensorShape([const_batch]).concatenate(static),
            )
        )
        if isinstance(size, TensorShape):
            shape = array_ops.stack([batch_size] + size.as_list())
        else:
            shape = array_ops.concat([array_ops.reshape(batch_size, [1]), size], 0)
        zeros.append(array_ops.zeros(shape, dtype=dtype))
    return nest.pack_sequence_as(emit_structure, tas), nest.pack_sequence_as(emit_structure, zeros)


def _keep_finished(finished, current, candidate):
    """Per example: `current` where it has finished, else `candidate` (TF1's copy-through)."""
    if isinstance(current, TensorArray) or current.get_shape().ndims == 0:
        return candidate
    return math_ops.where(finished, current, candidate)

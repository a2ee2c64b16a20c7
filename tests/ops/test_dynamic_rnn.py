"""tf.nn.dynamic_rnn / bidirectional_dynamic_rnn: equal to static_rnn on the same variables,
sequence_length semantics vs NumPy, time-major and nested inputs, TF1 variable names, errors."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.framework import nest
from flowgraph.testing import gradient_checker

rnn_cell = tf.nn.rnn_cell
TOL = {"rtol": 1e-5, "atol": 1e-6}


def _run(fetches, feed=None):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(fetches, feed)


def _rnn_ref(x, lengths, kernel, bias, h0=None):
    """BasicRNNCell over batch-major x [B, T, D]: outputs [B, T, N] (zero past each length) and
    the state at each example's last step."""
    B, T, _ = x.shape
    n = bias.shape[0]
    h = np.zeros((B, n)) if h0 is None else h0
    lengths = np.full(B, T) if lengths is None else np.asarray(lengths)
    outs = np.zeros((B, T, n))
    for t in range(T):
        new = np.tanh(np.concatenate([x[:, t], h], 1) @ kernel + bias)
        live = (t < lengths)[:, None]
        outs[:, t] = np.where(live, new, 0.0)
        h = np.where(live, new, h)
    return outs, h


def _reverse_ref(x, lengths):
    """Each example's first lengths[b] steps reversed along axis 1 (NumPy reverse_sequence)."""
    out = x.copy()
    for b, n in enumerate(lengths):
        out[b, :n] = x[b, :n][::-1]
    return out


CELLS = {
    "basic_rnn": lambda: rnn_cell.BasicRNNCell(4),
    "basic_lstm": lambda: rnn_cell.BasicLSTMCell(4, forget_bias=0.5),
    "gru": lambda: rnn_cell.GRUCell(3),
    "lstm_peephole_proj": lambda: rnn_cell.LSTMCell(4, use_peepholes=True, num_proj=3),
    "multi": lambda: rnn_cell.MultiRNNCell([rnn_cell.BasicLSTMCell(3), rnn_cell.GRUCell(4)]),
}


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_matches_static_rnn_on_same_variables(kind):
    B, T, D = 3, 5, 2
    x = tf.placeholder(tf.float32, [B, T, D])
    lengths = tf.placeholder(tf.int32, [B])
    cell = CELLS[kind]()
    outputs, state = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
    n_vars = len(tf.global_variables())
    with tf.variable_scope("rnn", reuse=True) as scope:
        s_outs, s_state = tf.nn.static_rnn(
            cell, tf.unstack(x, axis=1), sequence_length=lengths, dtype=tf.float32, scope=scope
        )
    assert len(tf.global_variables()) == n_vars  # static_rnn reused dynamic_rnn's variables
    out_size = cell.output_size
    assert outputs.get_shape().as_list() == [B, T, out_size]
    for d, s in zip(nest.flatten(state), nest.flatten(s_state)):
        assert d.get_shape().as_list() == s.get_shape().as_list()
    xv = np.random.RandomState(0).randn(B, T, D).astype(np.float32)
    feed = {x: xv, lengths: [5, 2, 0]}
    dyn, dyn_state, sta, sta_state = _run([outputs, state, s_outs, s_state], feed)
    np.testing.assert_allclose(dyn, np.stack(sta, axis=1), **TOL)
    for d, s in zip(nest.flatten(dyn_state), nest.flatten(sta_state)):
        np.testing.assert_allclose(d, s, **TOL)
    assert np.all(dyn[1, 2:] == 0) and np.all(dyn[2] == 0)


def test_without_sequence_length_matches_static_rnn_float64():
    B, T, D = 2, 4, 3
    xv = np.random.RandomState(1).randn(B, T, D)
    x = tf.constant(xv)
    cell = rnn_cell.BasicLSTMCell(3)
    outputs, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float64)
    assert outputs.dtype == tf.float64 and isinstance(state, rnn_cell.LSTMStateTuple)
    with tf.variable_scope("rnn", reuse=True) as scope:
        s_outs, s_state = tf.nn.static_rnn(
            cell, tf.unstack(x, axis=1), dtype=tf.float64, scope=scope
        )
    dyn, dyn_state, sta, sta_state = _run([outputs, state, s_outs, s_state])
    np.testing.assert_allclose(dyn, np.stack(sta, axis=1), rtol=1e-12)
    np.testing.assert_allclose(dyn_state.c, sta_state.c, rtol=1e-12)
    np.testing.assert_allclose(dyn_state.h, dyn[:, -1], rtol=1e-12)


def test_sequence_length_semantics_with_unknown_batch_and_time():
    D, N = 2, 3
    x = tf.placeholder(tf.float32, [None, None, D])
    lengths = tf.placeholder(tf.int64, [None])
    cell = rnn_cell.BasicRNNCell(N)
    outputs, state = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
    assert outputs.get_shape().as_list() == [None, None, N]
    assert state.get_shape().as_list() == [None, N]
    rng = np.random.RandomState(2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        kernel, bias = sess.run(cell.weights)
        # max(lengths) < T: the loop stops early and the steps after it are zeros.
        for B, T, lv in ((3, 6, [4, 1, 2]), (2, 3, [3, 0]), (1, 2, [0])):
            xv = rng.randn(B, T, D).astype(np.float32)
            outs, final = sess.run([outputs, state], {x: xv, lengths: lv})
            ref_outs, ref_final = _rnn_ref(xv, lv, kernel, bias)
            np.testing.assert_allclose(outs, ref_outs, **TOL)
            np.testing.assert_allclose(final, ref_final, **TOL)


def test_time_major_and_initial_state():
    T, B, D, N = 4, 2, 3, 5
    xv = np.random.RandomState(3).randn(T, B, D).astype(np.float32)
    h0 = np.random.RandomState(4).randn(B, N).astype(np.float32)
    cell = rnn_cell.BasicRNNCell(N)
    outputs, state = tf.nn.dynamic_rnn(
        cell,
        tf.constant(xv),
        sequence_length=[3, 4],
        initial_state=tf.constant(h0),
        time_major=True,
    )
    assert outputs.get_shape().as_list() == [T, B, N]
    kernel, bias, outs, final = _run(cell.weights + [outputs, state])
    ref_outs, ref_final = _rnn_ref(xv.transpose(1, 0, 2), [3, 4], kernel, bias, h0)
    np.testing.assert_allclose(outs, ref_outs.transpose(1, 0, 2), **TOL)
    np.testing.assert_allclose(final, ref_final, **TOL)


class _PairCell(rnn_cell.RNNCell):
    """Nested inputs (a, b) and nested outputs: an RNN over concat(a, b) emitting (h, 2h)."""

    def __init__(self, num_units):
        super().__init__()
        self._cell = rnn_cell.BasicRNNCell(num_units)

    state_size = property(lambda self: self._cell.state_size)
    output_size = property(lambda self: (self._cell.output_size, self._cell.output_size))

    def __call__(self, inputs, state, scope=None):
        a, b = inputs
        h, new_state = self._cell(tf.concat([a, b], 1), state)
        return (h, 2 * h), new_state


def test_nested_inputs_and_outputs():
    B, T, N = 2, 3, 4
    av = np.random.RandomState(5).randn(B, T, 1).astype(np.float32)
    bv = np.random.RandomState(6).randn(B, T, 2).astype(np.float32)
    cell = _PairCell(N)
    (h, h2), state = tf.nn.dynamic_rnn(cell, (tf.constant(av), tf.constant(bv)), dtype=tf.float32)
    assert h.get_shape().as_list() == [B, T, N] and h2.get_shape().as_list() == [B, T, N]
    kernel, bias, hv, h2v, sv = _run(cell._cell.weights + [h, h2, state])
    ref_outs, ref_final = _rnn_ref(np.concatenate([av, bv], 2), None, kernel, bias)
    np.testing.assert_allclose(hv, ref_outs, **TOL)
    np.testing.assert_allclose(h2v, 2 * ref_outs, **TOL)
    np.testing.assert_allclose(sv, ref_final, **TOL)


def test_bidirectional_matches_two_reference_runs():
    B, T, D = 3, 4, 2
    xv = np.random.RandomState(7).randn(B, T, D).astype(np.float32)
    lv = [4, 2, 3]
    x = tf.placeholder(tf.float32, [None, T, D])
    fw, bw = rnn_cell.BasicRNNCell(3), rnn_cell.BasicRNNCell(2)
    (out_fw, out_bw), (st_fw, st_bw) = tf.nn.bidirectional_dynamic_rnn(
        fw, bw, x, sequence_length=lv, dtype=tf.float32
    )
    assert [v.op.name for v in tf.global_variables()] == [
        "bidirectional_rnn/fw/basic_rnn_cell/kernel",
        "bidirectional_rnn/fw/basic_rnn_cell/bias",
        "bidirectional_rnn/bw/basic_rnn_cell/kernel",
        "bidirectional_rnn/bw/basic_rnn_cell/bias",
    ]
    kf, bf, kb, bb, ofw, obw, sfw, sbw = _run(
        tf.global_variables() + [out_fw, out_bw, st_fw, st_bw], {x: xv}
    )
    ref_fw, ref_sfw = _rnn_ref(xv, lv, kf, bf)
    tmp, ref_sbw = _rnn_ref(_reverse_ref(xv, lv), lv, kb, bb)
    np.testing.assert_allclose(ofw, ref_fw, **TOL)
    np.testing.assert_allclose(sfw, ref_sfw, **TOL)
    np.testing.assert_allclose(obw, _reverse_ref(tmp, lv), **TOL)
    np.testing.assert_allclose(sbw, ref_sbw, **TOL)
    # the backward output at step 0 has seen each whole sequence: it equals the final state
    np.testing.assert_allclose(obw[:, 0], sbw, **TOL)


def test_bidirectional_time_major_without_lengths():
    T, B, D = 3, 2, 2
    xv = np.random.RandomState(8).randn(T, B, D).astype(np.float32)
    fw, bw = rnn_cell.GRUCell(2), rnn_cell.GRUCell(2)
    (out_fw, out_bw), _ = tf.nn.bidirectional_dynamic_rnn(
        fw, bw, tf.constant(xv), dtype=tf.float32, time_major=True, scope="birnn"
    )
    with tf.variable_scope("check", reuse=tf.AUTO_REUSE):
        ref_fw, _ = tf.nn.dynamic_rnn(fw, tf.constant(xv), dtype=tf.float32, time_major=True)
        tmp, _ = tf.nn.dynamic_rnn(
            bw, tf.constant(xv[::-1].copy()), dtype=tf.float32, time_major=True
        )
    assert len(tf.global_variables()) == 8  # the second runs reused the cells' variables
    assert tf.global_variables()[0].op.name == "birnn/fw/gru_cell/gates/kernel"
    ofw, obw, rfw, rbw = _run([out_fw, out_bw, ref_fw, tmp])
    np.testing.assert_allclose(ofw, rfw, **TOL)
    np.testing.assert_allclose(obw, rbw[::-1], **TOL)


def test_variable_and_op_names():
    x = tf.placeholder(tf.float32, [2, 3, 4])
    cell = rnn_cell.MultiRNNCell([rnn_cell.BasicLSTMCell(3), rnn_cell.BasicLSTMCell(3)])
    outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    tf.nn.dynamic_rnn(rnn_cell.BasicRNNCell(2), x, dtype=tf.float32, scope="encoder")
    assert [v.op.name for v in tf.global_variables()] == [
        "rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel",
        "rnn/multi_rnn_cell/cell_0/basic_lstm_cell/bias",
        "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/kernel",
        "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/bias",
        "encoder/basic_rnn_cell/kernel",
        "encoder/basic_rnn_cell/bias",
    ]
    ops = {op.name: op.type for op in tf.get_default_graph().get_operations()}
    assert ops["rnn/while/LoopCond"] == "LoopCond" and ops["encoder/while/LoopCond"] == "LoopCond"
    assert ops["rnn/while/multi_rnn_cell/cell_0/basic_lstm_cell/MatMul"] == "MatMul"
    assert outputs.op.name == "rnn/transpose_1"


def test_argument_errors():
    x = tf.placeholder(tf.float32, [2, 3, 4])
    cell = rnn_cell.BasicRNNCell(2)
    with pytest.raises(ValueError, match="If there is no initial_state, you must give a dtype"):
        tf.nn.dynamic_rnn(cell, x)
    with pytest.raises(TypeError, match="not an RNNCell"):
        tf.nn.dynamic_rnn(object(), x, dtype=tf.float32)
    with pytest.raises(ValueError, match="rank"):
        tf.nn.dynamic_rnn(cell, tf.placeholder(tf.float32, [2, 3]), dtype=tf.float32)
    with pytest.raises(ValueError, match="depth of inputs"):
        tf.nn.dynamic_rnn(cell, tf.placeholder(tf.float32, [2, 3, None]), dtype=tf.float32)
    with pytest.raises(ValueError, match="Batch_size is not the same"):
        tf.nn.dynamic_rnn(
            _PairCell(2), (x, tf.placeholder(tf.float32, [3, 3, 1])), dtype=tf.float32
        )
    with pytest.raises(ValueError, match="Time steps is not the same"):
        tf.nn.dynamic_rnn(
            _PairCell(2), (x, tf.placeholder(tf.float32, [2, 4, 1])), dtype=tf.float32
        )
    with pytest.raises(ValueError, match="sequence_length must be a vector"):
        tf.nn.dynamic_rnn(cell, x, sequence_length=[[1, 2]], dtype=tf.float32)
    with pytest.raises(ValueError, match="sequence_length has length 3"):
        tf.nn.dynamic_rnn(cell, x, sequence_length=[1, 2, 3], dtype=tf.float32)
    with pytest.raises(TypeError, match="cell_bw"):
        tf.nn.bidirectional_dynamic_rnn(cell, None, x, dtype=tf.float32)


def test_sequence_length_batch_mismatch_at_run_time():
    x = tf.placeholder(tf.float32, [None, 3, 2])
    lengths = tf.placeholder(tf.int32, [None])
    outputs, _ = tf.nn.dynamic_rnn(
        rnn_cell.BasicRNNCell(2), x, sequence_length=lengths, dtype=tf.float32
    )
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(errors.InvalidArgumentError, match="Expected shape for Tensor"):
            sess.run(outputs, {x: np.zeros((2, 3, 2)), lengths: [1, 2, 3]})


# -- gradients through the loop ---------------------------------------------------------------
def _loss(outputs, state):
    """A loss touching every output step and every state tensor, with unequal weights."""
    weights = np.arange(1, outputs.get_shape()[-1].value + 1, dtype=np.float32)
    loss = tf.reduce_sum(tf.square(outputs) * weights)
    for s in nest.flatten(state):
        loss += tf.reduce_sum(s)
    return loss


@pytest.mark.parametrize("kind", ["basic_lstm", "gru", "multi"])
def test_gradients_match_static_rnn(kind):
    B, T, D = 3, 5, 2
    x = tf.constant(np.random.RandomState(9).randn(B, T, D).astype(np.float32))
    lengths = [4, 1, 2]  # max < T: the loop stops early
    cell = CELLS[kind]()
    h0 = cell.zero_state(B, tf.float32)
    h0 = nest.map_structure(lambda z: z + 0.1, h0)
    outputs, state = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, initial_state=h0)
    with tf.variable_scope("rnn", reuse=True) as scope:
        s_outs, s_state = tf.nn.static_rnn(
            cell, tf.unstack(x, axis=1), sequence_length=lengths, initial_state=h0, scope=scope
        )
    wrt = cell.trainable_variables + [x] + nest.flatten(h0)
    grads = tf.gradients(_loss(outputs, state), wrt)
    s_grads = tf.gradients(_loss(tf.stack(s_outs, axis=1), s_state), wrt)
    assert all(g is not None for g in grads)
    dyn, sta = _run([grads, s_grads])
    for name, d, s in zip([t.name for t in wrt], dyn, sta):
        np.testing.assert_allclose(d, s, rtol=1e-5, atol=1e-5, err_msg=name)
    assert np.all(dyn[-len(nest.flatten(h0)) - 1][:, 4:] == 0)  # no step reads x[:, 4]


def test_gradient_vs_numeric_jacobian_float64():
    B, T, D, N = 2, 3, 2, 2
    x = tf.placeholder(tf.float64, [B, T, D])
    h0 = tf.placeholder(tf.float64, [B, N])
    cell = rnn_cell.BasicRNNCell(N)
    outputs, state = tf.nn.dynamic_rnn(cell, x, sequence_length=[2, 3], initial_state=h0)
    y = tf.concat([tf.reshape(outputs, [B, -1]), state], 1)
    rng = np.random.RandomState(10)
    with tf.Session() as sess, sess.as_default():
        pairs = gradient_checker.compute_gradient(
            [x, h0],
            [[B, T, D], [B, N]],
            y,
            [B, T * N + N],
            x_init_value=[rng.randn(B, T, D), rng.randn(B, N)],
            delta=1e-6,
            init_targets=[tf.global_variables_initializer()],
        )
    for theo, num in pairs:
        assert np.abs(theo).max() > 0.01
        np.testing.assert_allclose(theo, num, rtol=1e-5, atol=1e-6)


def test_bidirectional_gradients_match_static():
    B, T, D = 2, 4, 3
    xv = np.random.RandomState(11).randn(B, T, D).astype(np.float32)
    x = tf.constant(xv)
    lengths = [3, 4]
    fw, bw = rnn_cell.BasicLSTMCell(2), rnn_cell.GRUCell(3)
    (out_fw, out_bw), (st_fw, st_bw) = tf.nn.bidirectional_dynamic_rnn(
        fw, bw, x, sequence_length=lengths, dtype=tf.float32
    )
    with tf.variable_scope("bidirectional_rnn", reuse=True):
        s_outs, s_fw, s_bw = tf.nn.static_bidirectional_rnn(
            fw, bw, tf.unstack(x, axis=1), sequence_length=lengths, dtype=tf.float32
        )
    loss = _loss(tf.concat([out_fw, out_bw], 2), (st_fw, st_bw))
    s_loss = _loss(tf.stack(s_outs, axis=1), (s_fw, s_bw))
    wrt = fw.trainable_variables + bw.trainable_variables + [x]
    dyn, sta = _run([tf.gradients(loss, wrt), tf.gradients(s_loss, wrt)])
    for d, s in zip(dyn, sta):
        np.testing.assert_allclose(d, s, rtol=1e-5, atol=1e-5)


def test_training_through_dynamic_rnn_reduces_loss():
    """Learn to output the running sum of the inputs (a task the RNN state must carry)."""
    rng = np.random.RandomState(12)
    B, T = 16, 6
    xv = rng.uniform(-1, 1, (B, T, 1)).astype(np.float32)
    yv = np.cumsum(xv, axis=1) / 3
    lv = rng.randint(1, T + 1, B)
    x = tf.placeholder(tf.float32, [None, None, 1])
    lengths = tf.placeholder(tf.int32, [None])
    cell = rnn_cell.GRUCell(8, kernel_initializer=tf.glorot_uniform_initializer(seed=1))
    outputs, _ = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
    w = tf.get_variable("w", [8, 1], initializer=tf.glorot_uniform_initializer(seed=2))
    pred = tf.reshape(tf.matmul(tf.reshape(outputs, [-1, 8]), w), tf.shape(x))
    mask = tf.expand_dims(tf.sequence_mask(lengths, tf.shape(x)[1], dtype=tf.float32), 2)
    loss = tf.reduce_sum(tf.square(pred - yv) * mask) / tf.reduce_sum(mask)
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    feed = {x: xv, lengths: lv}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, feed)
        for _ in range(40):
            sess.run(train, feed)
        last = sess.run(loss, feed)
    assert last < 0.3 * first, (first, last)


# -- raw_rnn ----------------------------------------------------------------------------------
def _raw_rnn_over(cell, inputs, lengths, emit_fn=None, count_steps=False):
    """raw_rnn reading time-major `inputs` [T, B, D] until every example passed its length."""
    T, B, D = inputs.get_shape().as_list()
    inputs_ta = tf.TensorArray(tf.float32, size=T).unstack(inputs)

    def loop_fn(time, cell_output, cell_state, loop_state):
        if cell_output is None:
            state, emit, next_loop = cell.zero_state(B, tf.float32), None, None
            if count_steps:
                next_loop = tf.constant(0)
            if emit_fn is not None:
                emit = emit_fn(tf.zeros([B, cell.output_size]))
        else:
            state, emit = cell_state, cell_output if emit_fn is None else emit_fn(cell_output)
            next_loop = loop_state + 1 if count_steps else None
        finished = time >= lengths
        x = tf.cond(tf.reduce_all(finished), lambda: tf.zeros([B, D]), lambda: inputs_ta.read(time))
        return finished, x, state, emit, next_loop

    return tf.nn.raw_rnn(cell, loop_fn)


def test_raw_rnn_matches_dynamic_rnn():
    T, B, D = 5, 3, 2
    xv = np.random.RandomState(13).randn(T, B, D).astype(np.float32)
    lengths = tf.constant([4, 1, 2])
    cell = rnn_cell.BasicLSTMCell(3)
    emit_ta, final_state, loop_state = _raw_rnn_over(cell, tf.constant(xv), lengths)
    assert loop_state is None and isinstance(emit_ta, tf.TensorArray)
    outputs = emit_ta.stack()
    with tf.variable_scope("rnn", reuse=True) as scope:
        ref, ref_state = tf.nn.dynamic_rnn(
            cell,
            tf.constant(xv),
            sequence_length=lengths,
            dtype=tf.float32,
            time_major=True,
            scope=scope,
        )
    assert [v.op.name for v in tf.global_variables()] == [
        "rnn/basic_lstm_cell/kernel",
        "rnn/basic_lstm_cell/bias",
    ]
    out, st, rv, rst = _run([outputs, final_state, ref, ref_state])
    assert out.shape == (4, B, 3)  # the loop ran until the longest example (4 steps) finished
    np.testing.assert_allclose(out, rv[:4], **TOL)
    np.testing.assert_allclose(st.c, rst.c, **TOL)
    np.testing.assert_allclose(st.h, rst.h, **TOL)


def test_raw_rnn_emit_structure_loop_state_and_gradient():
    T, B, D = 3, 2, 2
    x = tf.constant(np.random.RandomState(14).randn(T, B, D).astype(np.float32))
    cell = rnn_cell.GRUCell(2)
    (emit_a, emit_b), final_state, steps = _raw_rnn_over(
        cell, x, tf.constant([3, 2]), emit_fn=lambda h: (h, tf.reduce_sum(h, 1)), count_steps=True
    )
    a, b = emit_a.stack(), emit_b.stack()
    grad = tf.gradients(tf.reduce_sum(a) + tf.reduce_sum(final_state), x)[0]
    av, bv, n, gv = _run([a, b, steps, grad])
    assert n == 3 and av.shape == (3, B, 2) and bv.shape == (3, B)
    np.testing.assert_allclose(bv, av.sum(2), **TOL)
    assert np.all(av[2, 1] == 0) and np.all(av[:2] != 0)  # example 1 finished after 2 steps
    assert np.all(gv[2, 1] == 0) and np.abs(gv[2, 0]).max() > 0


def test_raw_rnn_errors():
    cell = rnn_cell.BasicRNNCell(2)
    with pytest.raises(TypeError, match="loop_fn must be a callable"):
        tf.nn.raw_rnn(cell, None)

    def bad_state(time, cell_output, cell_state, loop_state):
        return (
            tf.constant([False]),
            tf.zeros([1, 2]),
            (tf.zeros([1, 2]), tf.zeros([1, 2])),
            None,
            None,
        )

    with pytest.raises(ValueError, match="initial_state and state_size"):
        tf.nn.raw_rnn(cell, bad_state)


def test_dropout_wrapper_draws_a_new_mask_each_step():
    x = tf.constant(np.ones((2, 4, 2), np.float32))
    inner = rnn_cell.BasicRNNCell(64)
    cell = rnn_cell.DropoutWrapper(inner, output_keep_prob=0.5, seed=3)
    outputs, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    assert [v.op.name for v in tf.global_variables()] == [
        "rnn/basic_rnn_cell/kernel",
        "rnn/basic_rnn_cell/bias",
    ]
    out, st = _run([outputs, state])
    dropped = out == 0
    assert 0.3 < dropped.mean() < 0.7
    assert np.any(dropped[:, 0] != dropped[:, 1])  # each iteration runs its own RandomUniform
    np.testing.assert_allclose(out[:, -1][~dropped[:, -1]], 2 * st[~dropped[:, -1]], **TOL)

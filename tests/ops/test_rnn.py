"""RNN cells and static_rnn: TF1 variable names, one step vs NumPy from the variables' values,
sequence_length masking, bidirectional."""

import numpy as np
import pytest

import flowgraph as tf

rnn_cell = tf.nn.rnn_cell


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _lstm_ref(x, c, h, kernel, bias, forget_bias=1.0):
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ kernel + bias, 4, axis=1)
    new_c = c * _sig(f + forget_bias) + _sig(i) * np.tanh(j)
    return np.tanh(new_c) * _sig(o), new_c


def _run(fetches, feed=None):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(fetches, feed)


def test_basic_lstm_static_rnn_names_and_values():
    T, B, D, N = 3, 2, 4, 5
    xs = [tf.placeholder(tf.float32, [B, D]) for _ in range(T)]
    cell = rnn_cell.BasicLSTMCell(N, forget_bias=0.5)
    outputs, state = tf.nn.static_rnn(cell, xs, dtype=tf.float32)
    assert [v.op.name for v in tf.global_variables()] == [
        "rnn/basic_lstm_cell/kernel",
        "rnn/basic_lstm_cell/bias",
    ]
    assert isinstance(state, rnn_cell.LSTMStateTuple) and cell.state_size == (N, N)
    xv = np.random.RandomState(0).randn(T, B, D).astype(np.float32)
    feed = {x: v for x, v in zip(xs, xv)}
    kernel, bias, outs, (c, h) = _run([cell.weights[0], cell.weights[1], outputs, state], feed)
    rc, rh = np.zeros((B, N)), np.zeros((B, N))
    for t in range(T):
        rh, rc = _lstm_ref(xv[t], rc, rh, kernel, bias, 0.5)
        np.testing.assert_allclose(outs[t], rh, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c, rc, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(h, rh, rtol=1e-5, atol=1e-5)


def test_basic_rnn_and_gru_step():
    x = tf.constant(np.random.RandomState(1).randn(2, 3).astype(np.float32))
    s = tf.constant(np.random.RandomState(2).randn(2, 4).astype(np.float32))
    rnn_out, _ = rnn_cell.BasicRNNCell(4)(x, s)
    gru_out, _ = rnn_cell.GRUCell(4)(x, s)
    names = [v.op.name for v in tf.global_variables()]
    assert names == [
        "basic_rnn_cell/kernel",
        "basic_rnn_cell/bias",
        "gru_cell/gates/kernel",
        "gru_cell/gates/bias",
        "gru_cell/candidate/kernel",
        "gru_cell/candidate/bias",
    ]
    vals = _run(tf.global_variables() + [x, s, rnn_out, gru_out])
    k, b, gk, gb, ck, cb, xv, sv, ro, go = vals
    np.testing.assert_allclose(
        ro, np.tanh(np.concatenate([xv, sv], 1) @ k + b), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_array_equal(gb, np.ones(8, np.float32))
    r, u = np.split(_sig(np.concatenate([xv, sv], 1) @ gk + gb), 2, axis=1)
    cand = np.tanh(np.concatenate([xv, r * sv], 1) @ ck + cb)
    np.testing.assert_allclose(go, u * sv + (1 - u) * cand, rtol=1e-5, atol=1e-6)


def test_lstm_cell_peepholes_projection_clip():
    x = tf.constant(np.random.RandomState(3).randn(2, 3).astype(np.float32))
    cell = rnn_cell.LSTMCell(
        4,
        use_peepholes=True,
        num_proj=2,
        cell_clip=0.3,
        initializer=tf.random_normal_initializer(seed=1),
    )
    state = cell.zero_state(2, tf.float32)
    assert cell.state_size == (4, 2) and cell.output_size == 2
    out, (c, _m) = cell(x, state)
    names = [v.op.name for v in tf.global_variables()]
    assert names == [
        "lstm_cell/kernel",
        "lstm_cell/bias",
        "lstm_cell/w_f_diag",
        "lstm_cell/w_i_diag",
        "lstm_cell/w_o_diag",
        "lstm_cell/projection/kernel",
    ]
    k, b, _wf, _wi, wo, p, xv, ov, cv = _run(tf.global_variables() + [x, out, c])
    i, j, _f, o = np.split(np.concatenate([xv, np.zeros((2, 2))], 1) @ k + b, 4, axis=1)
    ref_c = np.clip(_sig(i) * np.tanh(j), -0.3, 0.3)  # c_prev = 0
    ref_m = (_sig(o + wo * ref_c) * np.tanh(ref_c)) @ p
    np.testing.assert_allclose(cv, ref_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ov, ref_m, rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError, match="num_unit_shards"):
        rnn_cell.LSTMCell(4, num_unit_shards=2)


def test_multi_rnn_cell_names_and_state_structure():
    xs = [tf.placeholder(tf.float32, [2, 3]) for _ in range(2)]
    cell = rnn_cell.MultiRNNCell([rnn_cell.BasicLSTMCell(4), rnn_cell.GRUCell(5)])
    outputs, state = tf.nn.static_rnn(cell, xs, dtype=tf.float32)
    names = [v.op.name for v in tf.global_variables()]
    assert names[:2] == [
        "rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel",
        "rnn/multi_rnn_cell/cell_0/basic_lstm_cell/bias",
    ]
    assert names[2] == "rnn/multi_rnn_cell/cell_1/gru_cell/gates/kernel" and len(names) == 6
    assert isinstance(state[0], rnn_cell.LSTMStateTuple) and state[1].get_shape().as_list() == [
        2,
        5,
    ]
    assert outputs[1].get_shape().as_list() == [2, 5]
    with pytest.raises(ValueError, match="at least one cell"):
        rnn_cell.MultiRNNCell([])


def test_sequence_length_zeroes_outputs_and_copies_state():
    T, B, D, N = 4, 3, 2, 3
    xs = [tf.placeholder(tf.float32, [None, D]) for _ in range(T)]
    cell = rnn_cell.BasicRNNCell(N)
    lengths = tf.placeholder(tf.int32, [None])
    outputs, state = tf.nn.static_rnn(cell, xs, dtype=tf.float32, sequence_length=lengths)
    xv = np.random.RandomState(4).randn(T, B, D).astype(np.float32)
    lv = np.array([4, 1, 2], np.int32)
    feed = {**{x: v for x, v in zip(xs, xv)}, lengths: lv}
    k, b, outs, final = _run(tf.global_variables() + [outputs, state], feed)
    h = np.zeros((B, N))
    for t in range(T):
        new = np.tanh(np.concatenate([xv[t], h], 1) @ k + b)
        live = (t < lv)[:, None]
        np.testing.assert_allclose(outs[t], np.where(live, new, 0.0), rtol=1e-5, atol=1e-6)
        h = np.where(live, new, h)
    np.testing.assert_allclose(final, h, rtol=1e-5, atol=1e-6)


def test_bidirectional_static_rnn():
    T, B, D = 3, 2, 2
    xs = [tf.placeholder(tf.float32, [B, D]) for _ in range(T)]
    fw, bw = rnn_cell.BasicRNNCell(3), rnn_cell.BasicRNNCell(2)
    outputs, _sf, sb = tf.nn.static_bidirectional_rnn(fw, bw, xs, dtype=tf.float32)
    names = [v.op.name for v in tf.global_variables()]
    assert names == [
        "bidirectional_rnn/fw/basic_rnn_cell/kernel",
        "bidirectional_rnn/fw/basic_rnn_cell/bias",
        "bidirectional_rnn/bw/basic_rnn_cell/kernel",
        "bidirectional_rnn/bw/basic_rnn_cell/bias",
    ]
    xv = np.random.RandomState(5).randn(T, B, D).astype(np.float32)
    _kf, _bf, kb, bb, outs, sbv = _run(
        tf.global_variables() + [outputs, sb], {x: v for x, v in zip(xs, xv)}
    )
    hb, back = np.zeros((B, 2)), []
    for t in reversed(range(T)):
        hb = np.tanh(np.concatenate([xv[t], hb], 1) @ kb + bb)
        back.insert(0, hb)
    for t in range(T):
        assert outs[t].shape == (B, 5)
        np.testing.assert_allclose(outs[t][:, 3:], back[t], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sbv, back[0], rtol=1e-5, atol=1e-6)


def test_dropout_wrapper_keeps_names_and_drops():
    x = tf.constant(np.ones((200, 3), np.float32))
    cell = rnn_cell.DropoutWrapper(rnn_cell.BasicLSTMCell(4), output_keep_prob=0.5, seed=3)
    out, state = cell(x, cell.zero_state(200, tf.float32))
    assert [v.op.name for v in tf.global_variables()] == [
        "basic_lstm_cell/kernel",
        "basic_lstm_cell/bias",
    ]
    rnn_cell.BasicRNNCell(2)(
        x, tf.zeros([200, 2]), scope="explicit"
    )  # TF1: an explicit scope is the cell's scope
    assert tf.global_variables()[-1].op.name == "explicit/bias"
    ov, hv = _run([out, state.h])
    np.testing.assert_allclose(ov[ov != 0], 2 * hv[ov != 0], rtol=1e-5)
    assert 0.35 < (ov == 0).mean() < 0.65
    with pytest.raises(ValueError, match="between 0 and 1"):
        rnn_cell.DropoutWrapper(rnn_cell.BasicRNNCell(2), input_keep_prob=1.5)


def test_static_rnn_argument_errors_and_contrib_alias():
    cell = rnn_cell.BasicRNNCell(2)
    with pytest.raises(TypeError):
        tf.nn.static_rnn(cell, tf.constant([[1.0]]), dtype=tf.float32)
    with pytest.raises(ValueError, match="dtype must be specified"):
        tf.nn.static_rnn(cell, [tf.constant([[1.0]])])
    assert tf.contrib.rnn.BasicLSTMCell is rnn_cell.BasicLSTMCell
    assert tf.contrib.rnn.static_rnn is tf.nn.static_rnn

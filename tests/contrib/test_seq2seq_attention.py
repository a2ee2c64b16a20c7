"""Attention mechanisms and AttentionWrapper against NumPy: Luong (scale), Bahdanau
(normalize), masking by memory_sequence_length and score_mask_value, probability_fn, the
monotonic variants, hardmax and safe_cumprod; the wrapper's step math, its options and its
state; gradients against numeric Jacobians."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.testing import gradient_checker

seq2seq = tf.contrib.seq2seq
B, S, M, Q, U = 3, 5, 4, 6, 6  # batch, memory steps, memory depth, query depth, num_units
LENGTHS = np.array([5, 2, 3], np.int32)


def _softmax(x):
    z = np.exp(x - x.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def _mask(lengths, n=S):
    return np.arange(n)[None, :] < np.asarray(lengths)[:, None]


def _luong_ref(query, memory, lengths, w, scale, mask_value=-np.inf, prob=_softmax):
    keys = (memory * _mask(lengths)[..., None]) @ w["memory_layer"]
    score = np.einsum("bu,bsu->bs", query, keys)
    if scale:
        score = w["attention_g"] * score
    return prob(np.where(_mask(lengths), score, mask_value))


def _bahdanau_ref(query, memory, lengths, w, normalize, mask_value=-np.inf, prob=_softmax):
    keys = (memory * _mask(lengths)[..., None]) @ w["memory_layer"]
    pq = (query @ w["query_layer"])[:, None, :]
    v = w["attention_v"]
    if normalize:
        v = w["attention_g"] * v / np.sqrt((v * v).sum())
        pq = pq + w["attention_b"]
    score = (v * np.tanh(keys + pq)).sum(-1)
    return prob(np.where(_mask(lengths), score, mask_value))


def _variables(sess, scope=""):
    """{short name: value} of the trainable variables (the last part of the name)."""
    out = {}
    for v in tf.trainable_variables(scope):
        parts = v.op.name.split("/")
        key = parts[-2] if parts[-1] == "kernel" else parts[-1]
        out[key] = sess.run(v)
    return out


def _data(seed=0, dtype=np.float64):
    rng = np.random.RandomState(seed)
    return rng.randn(B, S, M).astype(dtype), rng.randn(B, U).astype(dtype)


MECHANISMS = {
    "luong": (seq2seq.LuongAttention, {}, _luong_ref, {"scale": False}),
    "luong_scale": (seq2seq.LuongAttention, {"scale": True}, _luong_ref, {"scale": True}),
    "bahdanau": (seq2seq.BahdanauAttention, {}, _bahdanau_ref, {"normalize": False}),
    "bahdanau_norm": (
        seq2seq.BahdanauAttention,
        {"normalize": True},
        _bahdanau_ref,
        {"normalize": True},
    ),
}


@pytest.mark.parametrize("kind", sorted(MECHANISMS))
@pytest.mark.parametrize("with_lengths", [True, False])
def test_mechanism_alignments_match_numpy(kind, with_lengths):
    cls, kw, ref, ref_kw = MECHANISMS[kind]
    memory, query = _data()
    lengths = LENGTHS if with_lengths else np.full(B, S, np.int32)
    mech = cls(
        U,
        tf.constant(memory),
        memory_sequence_length=LENGTHS if with_lengths else None,
        dtype=tf.float64,
        **kw,
    )
    assert mech.alignments_size == S and mech.batch_size == B and mech.state_size == S
    alignments, next_state = mech(tf.constant(query), mech.initial_state(B, tf.float64))
    assert next_state is alignments
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, values = sess.run([alignments, mech.values])
        w = _variables(sess)
    np.testing.assert_allclose(got, ref(query, memory, lengths, w, **ref_kw), rtol=1e-10)
    np.testing.assert_allclose(values, memory * _mask(lengths)[..., None])
    np.testing.assert_allclose(got.sum(-1), 1.0)
    assert (got[~_mask(lengths)] == 0).all()


def test_score_mask_value_and_probability_fn():
    memory, query = _data(1)
    mech = seq2seq.BahdanauAttention(
        U,
        memory,
        memory_sequence_length=LENGTHS,
        probability_fn=seq2seq.hardmax,
        score_mask_value=-1e4,
        dtype=tf.float64,
    )
    probs = seq2seq.LuongAttention(
        U, memory, LENGTHS, probability_fn=tf.sigmoid, score_mask_value=0.0, dtype=tf.float64
    )
    a, _ = mech(tf.constant(query), None)
    b, _ = probs(tf.constant(query), None)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_a, got_b = sess.run([a, b])
        w = _variables(sess)
    onehot = np.eye(S)[
        _bahdanau_ref(query, memory, LENGTHS, w, False, -1e4, lambda s: s).argmax(-1)
    ]
    np.testing.assert_array_equal(got_a, onehot)
    sig = lambda s: 1 / (1 + np.exp(-s))
    w_luong = {"memory_layer": w["memory_layer_1"]}
    want_b = _luong_ref(query, memory, LENGTHS, w_luong, False, 0.0, sig)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-10)
    assert np.allclose(got_b[~_mask(LENGTHS)], 0.5)  # sigmoid(0) past the lengths


def test_hardmax_and_safe_cumprod():
    x = np.array([[1.0, 3.0, 3.0, -1.0], [0.0, -2.0, 5.0, 4.0]], np.float32)
    p = np.array([[0.5, 1e-30, 0.9, 1.0]], np.float32)
    with tf.Session() as sess:
        h = sess.run(seq2seq.hardmax(x))
        c = sess.run(seq2seq.safe_cumprod(p, axis=1))
        ce = sess.run(seq2seq.safe_cumprod(p, axis=1, exclusive=True))
    np.testing.assert_array_equal(h, [[0, 1, 0, 0], [0, 0, 1, 0]])
    assert h.dtype == np.float32
    np.testing.assert_allclose(c, np.cumprod(p, 1), rtol=1e-5)
    np.testing.assert_allclose(
        ce, np.cumprod(np.concatenate([[[1.0]], p[:, :-1]], 1), 1), rtol=1e-5
    )


def _monotonic_ref(p, prev):
    """The recurrence q[i] = (1 - p[i-1]) q[i-1] + prev[i]; attention[i] = p[i] q[i]."""
    q = np.zeros_like(p)
    for i in range(p.shape[1]):
        q[:, i] = (q[:, i - 1] * (1 - p[:, i - 1]) if i else 0) + prev[:, i]
    return p * q


@pytest.mark.parametrize("mode", ["recursive", "parallel"])
def test_monotonic_attention_soft_modes(mode):
    rng = np.random.RandomState(2)
    p = rng.uniform(0.05, 0.95, (B, S))
    prev = _softmax(rng.randn(B, S))
    with tf.Session() as sess:
        got = sess.run(seq2seq.monotonic_attention(p, prev, mode))
    np.testing.assert_allclose(got, _monotonic_ref(p, prev), rtol=1e-6, atol=1e-9)


def test_monotonic_attention_hard_mode_and_errors():
    p = np.array([[0, 1, 0, 1, 1], [1, 0, 0, 0, 1]], np.float32)
    prev = np.array([[0, 0, 1, 0, 0], [1, 0, 0, 0, 0]], np.float32)
    with tf.Session() as sess:
        got = sess.run(seq2seq.monotonic_attention(p, prev, "hard"))
    np.testing.assert_array_equal(got, [[0, 0, 0, 1, 0], [1, 0, 0, 0, 0]])
    with pytest.raises(ValueError, match="mode must be"):
        seq2seq.monotonic_attention(p, prev, "soft")
    with pytest.raises(ValueError, match="mode must be"):
        seq2seq.LuongMonotonicAttention(U, np.zeros((B, S, M), np.float32), mode="soft")


@pytest.mark.parametrize(
    "cls", [seq2seq.BahdanauMonotonicAttention, seq2seq.LuongMonotonicAttention]
)
def test_monotonic_mechanisms(cls):
    memory, query = _data(3)
    mech = cls(U, memory, LENGTHS, score_bias_init=-0.5, mode="parallel", dtype=tf.float64)
    init = mech.initial_alignments(B, tf.float64)
    alignments, _ = mech(tf.constant(query), init)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_init, got = sess.run([init, alignments])
        w = _variables(sess)
    np.testing.assert_array_equal(got_init, np.eye(S)[[0, 0, 0]])
    assert w["attention_score_bias"] == -0.5
    ident = lambda s: s
    if cls is seq2seq.LuongMonotonicAttention:
        score = _luong_ref(query, memory, LENGTHS, w, False, -np.inf, ident)
    else:
        score = _bahdanau_ref(query, memory, LENGTHS, w, False, -np.inf, ident)
    p = 1 / (1 + np.exp(-(score - 0.5)))
    np.testing.assert_allclose(got, _monotonic_ref(p, got_init), rtol=1e-8, atol=1e-12)


def _wrapper_step_ref(x, h, attention, memory, lengths, w, layer=True):
    """One AttentionWrapper step with a BasicRNNCell and Luong attention."""
    cell_in = np.concatenate([x, attention], -1)
    out = np.tanh(np.concatenate([cell_in, h], 1) @ w["basic_rnn_cell"] + w["bias"])
    align = _luong_ref(out, memory, lengths, w, False)
    context = np.einsum("bs,bsm->bm", align, memory * _mask(lengths)[..., None])
    att = np.concatenate([out, context], 1) @ w["attention_layer"] if layer else context
    return out, att, align


def test_wrapper_steps_match_numpy_with_alignment_history():
    memory, _ = _data(4)
    x_val = np.random.RandomState(5).randn(B, 3, 2)
    mech = seq2seq.LuongAttention(U, memory, LENGTHS, dtype=tf.float64)
    cell = seq2seq.AttentionWrapper(
        tf.nn.rnn_cell.BasicRNNCell(U, dtype=tf.float64),
        mech,
        attention_layer_size=4,
        alignment_history=True,
    )
    assert cell.output_size == 4
    assert cell.state_size.attention == 4 and cell.state_size.alignments == S
    state = cell.zero_state(B, tf.float64)
    outs = []
    for t in range(3):
        out, state = cell(tf.constant(x_val[:, t]), state)
        outs.append(out)
    assert isinstance(state, seq2seq.AttentionWrapperState)
    history = state.alignment_history.stack()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, got_state, got_hist = sess.run([outs, state[:4], history])
        w = _variables(sess)
    h, att = np.zeros((B, U)), np.zeros((B, 4))
    for t in range(3):
        h, att, align = _wrapper_step_ref(x_val[:, t], h, att, memory, LENGTHS, w)
        np.testing.assert_allclose(got[t], att, rtol=1e-10)
        np.testing.assert_allclose(got_hist[t], align, rtol=1e-10)
    np.testing.assert_allclose(got_state[0], h, rtol=1e-10)  # cell_state
    assert got_state[2] == 3  # time


def test_wrapper_options():
    """No attention layer (the context is the attention), output_attention=False, a custom
    cell_input_fn and initial_cell_state."""
    memory, _ = _data(6)
    x_val = np.random.RandomState(7).randn(B, 2)
    h0 = np.random.RandomState(8).randn(B, U)
    mech = seq2seq.LuongAttention(U, memory, LENGTHS, dtype=tf.float64)
    seen = []

    def cell_input_fn(inputs, attention):
        seen.append(attention.shape.as_list())
        return tf.concat([inputs, attention], -1)

    cell = seq2seq.AttentionWrapper(
        tf.nn.rnn_cell.BasicRNNCell(U, dtype=tf.float64),
        mech,
        cell_input_fn=cell_input_fn,
        output_attention=False,
        initial_cell_state=tf.constant(h0),
    )
    assert cell.output_size == U and cell.state_size.alignment_history == ()
    state = cell.zero_state(B, tf.float64)
    out, state = cell(tf.constant(x_val), state)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_out, got_att = sess.run([out, state.attention])
        w = _variables(sess)
    assert seen == [[B, M]]
    h, att, _ = _wrapper_step_ref(x_val, h0, np.zeros((B, M)), memory, LENGTHS, w, layer=False)
    np.testing.assert_allclose(got_out, h, rtol=1e-10)
    np.testing.assert_allclose(got_att, att, rtol=1e-10)


def test_multiple_mechanisms_and_attention_layer():
    memory, _ = _data(9)
    mechs = [
        seq2seq.LuongAttention(U, memory, LENGTHS, dtype=tf.float64),
        seq2seq.BahdanauAttention(U, memory, dtype=tf.float64),
    ]
    cell = seq2seq.AttentionWrapper(
        tf.nn.rnn_cell.BasicRNNCell(U, dtype=tf.float64),
        mechs,
        attention_layer=[
            tf.layers.Dense(2, dtype=tf.float64),
            tf.layers.Dense(3, dtype=tf.float64),
        ],
        alignment_history=True,
    )
    assert cell.output_size == 5
    assert cell.state_size.alignments == (S, S)
    state = cell.zero_state(B, tf.float64)
    out, state = cell(tf.ones([B, 2], tf.float64), state)
    assert out.shape.as_list() == [B, 5]
    assert isinstance(state.alignments, tuple) and len(state.alignment_history) == 2
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a0, a1 = sess.run(state.alignments)
    np.testing.assert_allclose(a0.sum(-1), 1.0)
    assert (a0[~_mask(LENGTHS)] == 0).all() and (a1 > 0).all()


def test_clone_keeps_shapes_and_replaces_fields():
    memory, _ = _data(10)
    mech = seq2seq.BahdanauAttention(U, memory, dtype=tf.float64)
    cell = seq2seq.AttentionWrapper(tf.nn.rnn_cell.BasicRNNCell(U, dtype=tf.float64), mech)
    state = cell.zero_state(B, tf.float64)
    new_h = tf.placeholder(tf.float64, [None, None])
    cloned = state.clone(cell_state=new_h)
    assert cloned.cell_state is new_h and new_h.shape.as_list() == [B, U]
    assert cloned.attention is state.attention


def test_wrapper_errors():
    memory, _ = _data(11)
    mech = seq2seq.LuongAttention(U, memory, dtype=tf.float64)
    cell = tf.nn.rnn_cell.BasicRNNCell(U, dtype=tf.float64)
    with pytest.raises(TypeError, match="attention_mechanism must be"):
        seq2seq.AttentionWrapper(cell, object())
    with pytest.raises(TypeError, match="cell_input_fn must be callable"):
        seq2seq.AttentionWrapper(cell, mech, cell_input_fn=3)
    with pytest.raises(ValueError, match="Only one of attention_layer_size"):
        seq2seq.AttentionWrapper(
            cell, mech, attention_layer_size=3, attention_layer=tf.layers.Dense(3)
        )
    with pytest.raises(ValueError, match="exactly one integer per"):
        seq2seq.AttentionWrapper(cell, mech, attention_layer_size=[3, 4])
    with pytest.raises(ValueError, match="tile_batch"):  # static batch mismatch
        seq2seq.AttentionWrapper(cell, mech).zero_state(B * 2, tf.float64)
    wrapper = seq2seq.AttentionWrapper(cell, mech)
    with pytest.raises(TypeError, match="AttentionWrapperState"):
        wrapper(tf.ones([B, 2], tf.float64), tf.zeros([B, U], tf.float64))
    with pytest.raises(ValueError, match="Incompatible or unknown inner dimensions"):
        seq2seq.LuongAttention(U + 1, memory, dtype=tf.float64)(tf.ones([B, U], tf.float64), None)
    with pytest.raises(TypeError, match="probability_fn must be callable"):
        seq2seq.LuongAttention(U, memory, probability_fn=1)


def test_dynamic_batch_mismatch_is_a_run_time_error():
    memory = tf.placeholder(tf.float64, [None, S, M])
    mech = seq2seq.LuongAttention(U, memory, dtype=tf.float64)
    cell = seq2seq.AttentionWrapper(tf.nn.rnn_cell.BasicRNNCell(U, dtype=tf.float64), mech)
    batch = tf.placeholder(tf.int32, [])
    state = cell.zero_state(batch, tf.float64)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(tf.errors.InvalidArgumentError, match="tile_batch"):
            sess.run(state.cell_state, {memory: np.zeros((2, S, M)), batch: 3})


@pytest.mark.parametrize("kind", sorted(MECHANISMS))
def test_mechanism_gradients_match_numeric_jacobian(kind):
    cls, kw, _, _ = MECHANISMS[kind]
    memory, query = _data(12)

    def fn(mem, q):
        mech = cls(U, mem, memory_sequence_length=LENGTHS, dtype=tf.float64, **kw)
        return mech(q, None)[0]

    graph = tf.Graph()
    with graph.as_default():
        mem = tf.placeholder(tf.float64, memory.shape)
        q = tf.placeholder(tf.float64, query.shape)
        y = fn(mem, q)
        with tf.Session() as sess, sess.as_default():
            sess.run(tf.global_variables_initializer())
            err = gradient_checker.compute_gradient_error(
                [mem, q],
                [memory.shape, query.shape],
                y,
                [B, S],
                x_init_value=[memory, query],
                delta=1e-6,
            )
    assert err < 1e-7


def test_wrapper_in_decode_loop_gradients_match_numeric_jacobian():
    """d(outputs)/d(memory, decoder inputs) through AttentionWrapper inside dynamic_decode."""
    rng = np.random.RandomState(13)
    memory = rng.randn(2, 3, 2)
    x_val = rng.randn(2, 3, 2)
    mem = tf.placeholder(tf.float64, memory.shape)
    x = tf.placeholder(tf.float64, x_val.shape)
    mech = seq2seq.BahdanauAttention(3, mem, memory_sequence_length=[3, 2], dtype=tf.float64)
    cell = seq2seq.AttentionWrapper(
        tf.nn.rnn_cell.GRUCell(3, dtype=tf.float64), mech, attention_layer_size=2
    )
    decoder = seq2seq.BasicDecoder(
        cell, seq2seq.TrainingHelper(x, [3, 3]), cell.zero_state(2, tf.float64)
    )
    outputs, _, _ = seq2seq.dynamic_decode(decoder)
    y = tf.reshape(outputs.rnn_output, [2, 3, 2])
    with tf.Session() as sess, sess.as_default():
        sess.run(tf.global_variables_initializer())
        err = gradient_checker.compute_gradient_error(
            [mem, x],
            [memory.shape, x_val.shape],
            y,
            [2, 3, 2],
            x_init_value=[memory, x_val],
            delta=1e-6,
        )
    assert err < 1e-7


def test_impute_finished_freezes_attention_state_and_keeps_history():
    """With impute_finished, an example's final AttentionWrapperState is the one at its own
    last step (the time counter and the history TensorArray pass through)."""
    memory, _ = _data(14)
    x_val = np.random.RandomState(15).randn(B, 4, 2)
    mech = seq2seq.BahdanauAttention(U, memory, LENGTHS, dtype=tf.float64)
    cell = seq2seq.AttentionWrapper(
        tf.nn.rnn_cell.GRUCell(U, dtype=tf.float64), mech, alignment_history=True
    )

    def decode(lengths):
        helper = seq2seq.TrainingHelper(tf.constant(x_val), lengths)
        decoder = seq2seq.BasicDecoder(cell, helper, cell.zero_state(B, tf.float64))
        with tf.variable_scope("", reuse=tf.AUTO_REUSE):
            return seq2seq.dynamic_decode(decoder, impute_finished=True)

    _, full, _ = decode([4, 2, 3])
    _, short, _ = decode([2, 2, 2])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        f, s, f_hist = sess.run([full[:4], short[:4], full.alignment_history.stack()])
    for got, want in zip(f[:2], s[:2]):  # cell_state, attention of example 1
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    assert f[2] == 4 and s[2] == 2  # time counts the loop's steps
    np.testing.assert_allclose(f[3][1], s[3][1], rtol=1e-12)  # alignments
    assert f_hist.shape == (4, B, S)

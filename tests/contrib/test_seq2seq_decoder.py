"""BasicDecoder + dynamic_decode with the training, greedy, sampling and scheduled helpers,
against a NumPy decoder (a BasicRNNCell and a Dense projection); impute_finished,
output_time_major and maximum_iterations; errors; gradients against numeric Jacobians."""

import numpy as np
import pytest

import flowgraph as tf

seq2seq = tf.contrib.seq2seq
B, T, D, H, V = 3, 5, 4, 6, 7


def _cell_step(x, h, w):
    return np.tanh(np.concatenate([x, h], 1) @ w["kernel"] + w["bias"])


def _teacher_forced_ref(x, lengths, h0, w, impute=False):
    """NumPy TrainingHelper decoding of batch-major x [B, T', D]: logits [B, T', V], sample ids,
    final state; with `impute`, zeros and a frozen state past each length."""
    steps = int(max(lengths))
    h = h0.copy()
    logits = np.zeros((B, steps, V))
    for t in range(steps):
        new = _cell_step(x[:, t], h, w)
        out = new @ w["proj"]
        live = (t < np.asarray(lengths))[:, None]
        logits[:, t] = np.where(live, out, 0.0) if impute else out
        h = np.where(live, new, h) if impute else new
    return logits, logits.argmax(-1), h


class _Model:
    """A BasicRNNCell + bias-free Dense projection whose weights are read back for NumPy."""

    def __init__(self, embedding_size=D, scope="model"):
        self.cell = tf.nn.rnn_cell.BasicRNNCell(H)
        self.proj = tf.layers.Dense(V, use_bias=False, name="proj")
        self.embedding = tf.get_variable(
            "embedding", [V, embedding_size], initializer=tf.random_normal_initializer(seed=1)
        )

    def weights(self, sess):
        kernel, bias = self.cell.weights
        k, b, p, e = sess.run([kernel, bias, self.proj.kernel, self.embedding])
        return {"kernel": k, "bias": b, "proj": p, "embedding": e}


def _decode(model, helper, **kw):
    decoder = seq2seq.BasicDecoder(
        model.cell, helper, model.cell.zero_state(B, tf.float32), output_layer=model.proj
    )
    return seq2seq.dynamic_decode(decoder, **kw)


@pytest.mark.parametrize("impute", [False, True])
def test_training_helper_matches_numpy(impute):
    rng = np.random.RandomState(0)
    x_val = rng.randn(B, T, D).astype(np.float32)
    lengths = np.array([5, 2, 3], np.int32)
    x = tf.placeholder(tf.float32, [B, None, D])
    seq_len = tf.placeholder(tf.int32, [B])
    model = _Model()
    outputs, state, out_lengths = _decode(
        model, seq2seq.TrainingHelper(x, seq_len), impute_finished=impute
    )
    assert isinstance(outputs, seq2seq.BasicDecoderOutput)
    assert outputs.rnn_output.shape.as_list() == [B, None, V]
    assert outputs.sample_id.dtype == tf.int32
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, got_state, got_len = sess.run(
            [outputs, state, out_lengths], {x: x_val, seq_len: lengths}
        )
        w = model.weights(sess)
    logits, ids, h = _teacher_forced_ref(x_val, lengths, np.zeros((B, H)), w, impute)
    np.testing.assert_allclose(got.rnn_output, logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got.sample_id, ids)
    np.testing.assert_array_equal(got_len, lengths)
    if impute:  # the state at each example's own last step
        np.testing.assert_allclose(got_state, h, rtol=1e-5, atol=1e-5)


def test_output_time_major_and_time_major_inputs():
    rng = np.random.RandomState(1)
    x_val = rng.randn(T, B, D).astype(np.float32)
    lengths = np.array([4, 5, 1], np.int32)
    model = _Model()
    helper = seq2seq.TrainingHelper(tf.constant(x_val), lengths, time_major=True)
    outputs, _, _ = _decode(model, helper, output_time_major=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(outputs.rnn_output)
        w = model.weights(sess)
    logits, _, _ = _teacher_forced_ref(x_val.transpose(1, 0, 2), lengths, np.zeros((B, H)), w)
    np.testing.assert_allclose(got, logits.transpose(1, 0, 2), rtol=1e-5, atol=1e-5)


def test_maximum_iterations_truncates():
    x_val = np.random.RandomState(2).randn(B, T, D).astype(np.float32)
    model = _Model()
    outputs, _, lengths = _decode(
        model, seq2seq.TrainingHelper(x_val, [5, 5, 2]), maximum_iterations=3
    )
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, got_len = sess.run([outputs.rnn_output, lengths])
        w = model.weights(sess)
    assert got.shape == (B, 3, V)
    np.testing.assert_array_equal(got_len, [3, 3, 2])
    logits, _, _ = _teacher_forced_ref(x_val, [5, 5, 2], np.zeros((B, H)), w)
    np.testing.assert_allclose(got, logits[:, :3], rtol=1e-5, atol=1e-5)


def _greedy_ref(w, start, end_token, max_steps, sample=None):
    """NumPy greedy (or, with `sample` ids given per step, forced) embedding decoding: ids
    [B, steps] and lengths (the step that emitted end_token counts)."""
    h = np.zeros((B, H))
    x = w["embedding"][start]
    finished = np.zeros(B, bool)
    lengths = np.zeros(B, np.int32)
    ids = []
    for t in range(max_steps):
        h = _cell_step(x, h, w)
        step_ids = (h @ w["proj"]).argmax(-1) if sample is None else sample[:, t]
        ids.append(step_ids)
        lengths = np.where(finished, lengths, t + 1)
        finished |= step_ids == end_token
        x = w["embedding"][step_ids]
        if finished.all():
            break
    return np.stack(ids, 1), lengths


def test_greedy_embedding_helper_matches_numpy():
    model = _Model()
    start = np.array([1, 2, 3], np.int32)
    end_token = tf.placeholder(tf.int32, [])
    helper = seq2seq.GreedyEmbeddingHelper(model.embedding, start, end_token)
    outputs, _, lengths = _decode(model, helper, maximum_iterations=8)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        w = model.weights(sess)
        # end_token: an id the untrained model emits early for some example
        end = int(_greedy_ref(w, start, -1, 8)[0][0, 2])
        got, got_len = sess.run([outputs.sample_id, lengths], {end_token: end})
        never, never_len = sess.run([outputs.sample_id, lengths], {end_token: -1})
    want, want_len = _greedy_ref(w, start, end, 8)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_len, want_len)
    assert want_len[0] <= 3
    np.testing.assert_array_equal(never, _greedy_ref(w, start, -1, 8)[0])
    np.testing.assert_array_equal(never_len, [8, 8, 8])


def test_greedy_helper_with_callable_embedding_and_errors():
    calls = []

    def embed(ids):
        calls.append(ids)
        return tf.one_hot(ids, D)

    helper = seq2seq.GreedyEmbeddingHelper(embed, [0, 1, 2], 3)
    assert calls and helper.sample_ids_dtype == tf.int32
    with pytest.raises(ValueError, match="start_tokens must be a vector"):
        seq2seq.GreedyEmbeddingHelper(embed, 1, 3)
    with pytest.raises(ValueError, match="end_token must be a scalar"):
        seq2seq.GreedyEmbeddingHelper(embed, [1], [3])


def test_sample_embedding_helper_follows_its_samples():
    model = _Model()
    helper = seq2seq.SampleEmbeddingHelper(
        model.embedding, [0, 1, 2], end_token=-1, softmax_temperature=0.5, seed=7
    )
    outputs, _, lengths = _decode(model, helper, maximum_iterations=6)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_ids, got_logits, got_len = sess.run([outputs.sample_id, outputs.rnn_output, lengths])
        w = model.weights(sess)
    assert got_ids.shape == (B, 6) and ((got_ids >= 0) & (got_ids < V)).all()
    np.testing.assert_array_equal(got_len, [6, 6, 6])
    # the logits are those of a decoder fed the embeddings of the sampled ids
    h = np.zeros((B, H))
    x = w["embedding"][[0, 1, 2]]
    for t in range(6):
        h = _cell_step(x, h, w)
        np.testing.assert_allclose(got_logits[:, t], h @ w["proj"], rtol=1e-4, atol=1e-5)
        x = w["embedding"][got_ids[:, t]]


def test_scheduled_embedding_helper_probability_zero_and_one():
    rng = np.random.RandomState(3)
    ids_val = rng.randint(0, V, (B, T)).astype(np.int32)
    lengths = np.array([5, 5, 3], np.int32)
    model = _Model()
    x = tf.nn.embedding_lookup(model.embedding, ids_val)
    never = seq2seq.ScheduledEmbeddingTrainingHelper(x, lengths, model.embedding, 0.0, seed=1)
    always = seq2seq.ScheduledEmbeddingTrainingHelper(x, lengths, model.embedding, 1.0, seed=2)
    with tf.variable_scope("", reuse=tf.AUTO_REUSE):
        out_never, _, _ = _decode(model, never)
        out_always, _, _ = _decode(model, always)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        never_v, always_v = sess.run([out_never, out_always])
        w = model.weights(sess)
    np.testing.assert_array_equal(never_v.sample_id, -1)
    logits, _, _ = _teacher_forced_ref(w["embedding"][ids_val], lengths, np.zeros((B, H)), w)
    np.testing.assert_allclose(never_v.rnn_output, logits, rtol=1e-5, atol=1e-5)
    sampled = always_v.sample_id
    assert ((sampled >= 0) & (sampled < V)).all()
    # with probability 1, step t + 1 reads the embedding of step t's sample
    inputs = w["embedding"][ids_val].copy()
    inputs[:, 1:] = w["embedding"][sampled[:, :-1]]
    logits, _, _ = _teacher_forced_ref(inputs, lengths, np.zeros((B, H)), w)
    np.testing.assert_allclose(always_v.rnn_output, logits, rtol=1e-5, atol=1e-5)


def test_scheduled_output_helper_feeds_outputs_back():
    rng = np.random.RandomState(4)
    x_val = rng.randn(B, T, V).astype(np.float32)  # inputs as wide as the outputs
    lengths = np.array([5, 4, 5], np.int32)
    model = _Model(embedding_size=V)
    helper = seq2seq.ScheduledOutputTrainingHelper(x_val, lengths, 1.0, seed=3)
    outputs, _, _ = _decode(model, helper)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(outputs)
        w = model.weights(sess)
    assert got.sample_id.dtype == np.bool_ and got.sample_id.all()
    h = np.zeros((B, H))
    x = x_val[:, 0]
    for t in range(T):
        h = _cell_step(x, h, w)
        np.testing.assert_allclose(got.rnn_output[:, t], h @ w["proj"], rtol=1e-4, atol=1e-5)
        x = h @ w["proj"]


def test_custom_and_inference_helpers():
    model = _Model(embedding_size=V)
    start = np.zeros((B, V), np.float32)
    helper = seq2seq.InferenceHelper(
        sample_fn=lambda outputs: tf.argmax(outputs, -1, output_type=tf.int32),
        sample_shape=[],
        sample_dtype=tf.int32,
        start_inputs=start,
        end_fn=lambda ids: tf.equal(ids, -1),
        next_inputs_fn=tf.nn.softmax,
    )
    outputs, _, lengths = _decode(model, helper, maximum_iterations=4)
    custom = seq2seq.CustomHelper(
        initialize_fn=lambda: (tf.zeros([B], tf.bool), tf.constant(start)),
        sample_fn=lambda time, outputs, state: tf.argmax(outputs, -1, output_type=tf.int32),
        next_inputs_fn=lambda time, outputs, state, sample_ids: (
            tf.equal(sample_ids, -1),
            tf.nn.softmax(outputs),
            state,
        ),
    )
    with pytest.raises(ValueError, match="before initialize"):
        _ = custom.batch_size
    with tf.variable_scope("", reuse=True):
        outputs2, _, _ = _decode(model, custom, maximum_iterations=4)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a, b, n = sess.run([outputs, outputs2, lengths])
        w = model.weights(sess)
    np.testing.assert_array_equal(n, [4, 4, 4])
    np.testing.assert_allclose(a.rnn_output, b.rnn_output, rtol=1e-6)
    h, x = np.zeros((B, H)), start
    for t in range(4):
        h = _cell_step(x, h, w)
        out = h @ w["proj"]
        np.testing.assert_allclose(a.rnn_output[:, t], out, rtol=1e-4, atol=1e-5)
        x = np.exp(out - out.max(-1, keepdims=True))
        x /= x.sum(-1, keepdims=True)


def test_errors():
    model = _Model()
    helper = seq2seq.TrainingHelper(np.zeros((B, T, D), np.float32), [1, 2, 3])
    with pytest.raises(TypeError, match="Expected decoder to be type Decoder"):
        seq2seq.dynamic_decode(object())
    with pytest.raises(TypeError, match="helper must be a Helper"):
        seq2seq.BasicDecoder(model.cell, object(), model.cell.zero_state(B, tf.float32))
    with pytest.raises(TypeError, match="output_layer must be a Layer"):
        seq2seq.BasicDecoder(model.cell, helper, None, output_layer=lambda x: x)
    with pytest.raises(ValueError, match="sequence_length to be a vector"):
        seq2seq.TrainingHelper(np.zeros((B, T, D), np.float32), 3)
    decoder = seq2seq.BasicDecoder(model.cell, helper, model.cell.zero_state(B, tf.float32))
    with pytest.raises(ValueError, match="maximum_iterations must be a scalar"):
        seq2seq.dynamic_decode(decoder, maximum_iterations=[3])
    with pytest.raises(ValueError, match="sampling_probability must be either"):
        seq2seq.ScheduledEmbeddingTrainingHelper(
            np.zeros((B, T, D), np.float32), [1, 2, 3], model.embedding, [[0.5]]
        )


def test_gradients_through_training_decoder_match_numeric_jacobian():
    """d(rnn_output)/d(inputs) and d(rnn_output)/d(initial state) through the decode loop."""
    rng = np.random.RandomState(5)
    x_val = rng.randn(2, 3, 2)
    h_val = rng.randn(2, 3) * 0.5
    x = tf.placeholder(tf.float64, [2, 3, 2])
    h0 = tf.placeholder(tf.float64, [2, 3])
    cell = tf.nn.rnn_cell.BasicRNNCell(3, dtype=tf.float64)
    helper = seq2seq.TrainingHelper(x, [3, 3])
    decoder = seq2seq.BasicDecoder(cell, helper, h0, tf.layers.Dense(2, dtype=tf.float64))
    outputs, _, _ = seq2seq.dynamic_decode(decoder)
    y = tf.reshape(outputs.rnn_output, [2, 3, 2])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with sess.as_default():
            err = tf.test.compute_gradient_error(
                [x, h0], [[2, 3, 2], [2, 3]], y, [2, 3, 2], x_init_value=[x_val, h_val], delta=1e-6
            )
    assert err < 1e-6


def test_scope_parallel_iterations_and_swap_memory():
    x_val = np.random.RandomState(9).randn(B, T, D).astype(np.float32)
    model = _Model()
    helper = seq2seq.TrainingHelper(x_val, [5, 3, 4])
    decoder = seq2seq.BasicDecoder(
        model.cell, helper, model.cell.zero_state(B, tf.float32), output_layer=model.proj
    )
    outputs, _, _ = seq2seq.dynamic_decode(
        decoder, parallel_iterations=1, swap_memory=True, scope="my_decoder"
    )
    names = sorted(v.op.name for v in tf.trainable_variables())
    assert names == [
        "embedding",
        "my_decoder/basic_rnn_cell/bias",
        "my_decoder/basic_rnn_cell/kernel",
        "my_decoder/proj/kernel",
    ]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(outputs.rnn_output)
        w = model.weights(sess)
    logits, _, _ = _teacher_forced_ref(x_val, [5, 3, 4], np.zeros((B, H)), w)
    np.testing.assert_allclose(got, logits, rtol=1e-5, atol=1e-5)


def test_zero_steps():
    """maximum_iterations=0, or every sequence_length 0: empty [batch, 0, ...] outputs."""
    model = _Model()
    x_val = np.zeros((B, T, D), np.float32)
    out, _, lengths = _decode(model, seq2seq.TrainingHelper(x_val, [3, 3, 3]), maximum_iterations=0)
    out2, _, lengths2 = _decode(model, seq2seq.TrainingHelper(x_val, [0, 0, 0]))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, n, got2, n2 = sess.run([out, lengths, out2, lengths2])
    for o, k in ((got, n), (got2, n2)):
        assert o.rnn_output.shape == (B, 0, V) and o.sample_id.shape == (B, 0)
        np.testing.assert_array_equal(k, [0, 0, 0])

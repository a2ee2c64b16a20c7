"""Issue 7 defect 16, the mechanism: a gradient TensorArray starts with the element shapes of
its forward array (TF's CopyShapesFrom), so an element no gradient reached reads as zeros of
its own shape, whatever the array's declared element_shape. Expected values are TensorFlow's
(recorded from TF 2.x, tf.compat.v1) or the same model unrolled by static_rnn."""

import numpy as np

import flowgraph as tf


def _run(fetches):
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        return s.run(fetches)


def test_reading_some_elements_gives_zero_gradients_to_the_others():
    v = tf.Variable([1.0, 2.0, 3.0])
    written = tf.TensorArray(tf.float32, 3).write(0, v * 2.0).write(1, v * 3.0).write(2, v * 4.0)
    (one,) = tf.gradients(tf.reduce_sum(written.read(1)), v)
    rows = tf.TensorArray(tf.float32, 3).unstack(tf.reshape(v, [3, 1]))
    (last,) = tf.gradients(tf.reduce_sum(rows.read(2)), v)
    rows2 = tf.TensorArray(tf.float32, 3).unstack(tf.reshape(v, [3, 1]))
    (gathered,) = tf.gradients(tf.reduce_sum(rows2.gather([0, 2])), v)
    got = _run([one, last, gathered])
    for g, want in zip(got, [[3, 3, 3], [0, 0, 1], [1, 0, 1]]):
        np.testing.assert_array_equal(g, want)


def test_elements_of_different_shapes_get_zeros_of_their_own_shape():
    """infer_shape=False: no element_shape at all, yet each unread element's zero gradient has
    the shape that was written there."""
    v = tf.Variable([1.0, 2.0, 3.0])
    ta = tf.TensorArray(tf.float32, 3, infer_shape=False).write(0, v).write(1, v[:2])
    (g,) = tf.gradients(tf.reduce_sum(ta.read(1)), v)
    np.testing.assert_array_equal(_run(g), [1, 1, 0])


def _encoder_decoder(rnn, x, steps):
    init = tf.constant_initializer(0.1)
    with tf.variable_scope("enc", initializer=init, reuse=tf.AUTO_REUSE):
        enc = tf.nn.rnn_cell.GRUCell(4)
        if rnn == "dynamic":
            _, state = tf.nn.dynamic_rnn(enc, x, dtype=tf.float64)
        else:
            _, state = tf.nn.static_rnn(enc, tf.unstack(x, axis=1), dtype=tf.float64)
    with tf.variable_scope("dec", initializer=init, reuse=tf.AUTO_REUSE):
        dec = tf.nn.rnn_cell.GRUCell(4)
        if rnn == "dynamic":
            out, _ = tf.nn.dynamic_rnn(dec, x[:, :steps], initial_state=state)
        else:
            out, _ = tf.nn.static_rnn(dec, tf.unstack(x[:, :steps], axis=1), initial_state=state)
            out = tf.stack(out, axis=1)
    return tf.reduce_sum(out * out)


def test_encoder_state_into_a_decoder_matches_static_rnn():
    """The encoder's outputs unused, its final state the decoder's initial state."""
    x = tf.constant(np.random.RandomState(0).rand(2, 5, 3))
    dynamic = _encoder_decoder("dynamic", x, 3)
    static = _encoder_decoder("static", x, 3)
    params = tf.trainable_variables()
    assert len(params) == 8
    got, want = _run([tf.gradients(dynamic, [x] + params), tf.gradients(static, [x] + params)])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)

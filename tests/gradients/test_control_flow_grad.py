"""Gradients through cond and while_loop (whitepaper §4.4), checked against closed forms,
numeric differences and TensorFlow's own values for the gradients_while fixture."""

import numpy as np
import pytest

import flowgraph as tf
from tests.helpers import TF_FIXTURES

FIXTURES = TF_FIXTURES / "graphs"


def numeric(fn, x, eps=1e-6):
    return (fn(x + eps) - fn(x - eps)) / (2 * eps)


def test_power_by_loop_matches_n_x_to_the_n_minus_1():
    x = tf.placeholder(tf.float64, [])
    n = tf.placeholder(tf.int32, [])
    _, y = tf.while_loop(
        lambda i, p: i < n,
        lambda i, p: (i + 1, p * x),
        [tf.constant(0), tf.constant(1.0, tf.float64)],
    )
    (g,) = tf.gradients(y, x)
    with tf.Session() as s:
        for nv in (0, 1, 2, 5, 9):
            val, grad = s.run([y, g], {x: 1.5, n: nv})
            assert val == pytest.approx(1.5**nv)
            assert grad == pytest.approx(nv * 1.5 ** (nv - 1) if nv else 0.0)


def test_cond_gradient_takes_the_taken_branch():
    x = tf.placeholder(tf.float64, [])
    p = tf.placeholder(tf.bool, [])
    y = tf.cond(p, lambda: x * x * 3.0, lambda: tf.sin(x))
    (g,) = tf.gradients(y, x)
    with tf.Session() as s:
        assert s.run(g, {x: 2.0, p: True}) == pytest.approx(12.0)
        assert s.run(g, {x: 2.0, p: False}) == pytest.approx(np.cos(2.0))


def test_loop_invariant_gradient_and_second_loop_var():
    x = tf.placeholder(tf.float64, [])
    w = tf.placeholder(tf.float64, [])
    _, z = tf.while_loop(
        lambda i, a: i < 4, lambda i, a: (i + 1, tf.tanh(a * w) + 0.5 * a), [tf.constant(0), x]
    )
    gx, gw = tf.gradients(z, [x, w])
    with tf.Session() as s:
        got = s.run([gx, gw], {x: 0.3, w: 0.7})
        assert got[0] == pytest.approx(numeric(lambda v: s.run(z, {x: v, w: 0.7}), 0.3), rel=1e-6)
        assert got[1] == pytest.approx(numeric(lambda v: s.run(z, {x: 0.3, w: v}), 0.7), rel=1e-6)


def test_cond_inside_loop_and_nested_loops():
    x = tf.placeholder(tf.float64, [])
    _, c = tf.while_loop(
        lambda i, a: i < 5,
        lambda i, a: (i + 1, tf.cond(tf.equal(i % 2, 0), lambda: a * x, lambda: a + x)),
        [tf.constant(0), tf.constant(1.0, tf.float64)],
    )

    def outer(i, a):
        _, a2 = tf.while_loop(lambda j, b: j < i, lambda j, b: (j + 1, b * x), [tf.constant(0), a])
        return i + 1, a2

    _, nz = tf.while_loop(lambda i, a: i < 3, outer, [tf.constant(0), tf.constant(1.0, tf.float64)])
    gc, gn = tf.gradients(c, x)[0], tf.gradients(nz, x)[0]
    with tf.Session() as s:
        assert s.run(gc, {x: 1.3}) == pytest.approx(
            numeric(lambda v: s.run(c, {x: v}), 1.3), rel=1e-6
        )
        assert s.run(gn, {x: 1.3}) == pytest.approx(3 * 1.3**2)  # x^(0+1+2)


def test_tensor_array_gradient_through_loop():
    x = tf.placeholder(tf.float64, [])
    ta = tf.TensorArray(tf.float64, size=3)
    _, ta = tf.while_loop(
        lambda i, t: i < 3,
        lambda i, t: (i + 1, t.write(i, x * tf.cast(i + 1, tf.float64))),
        [tf.constant(0), ta],
    )
    loss = tf.reduce_sum(ta.stack() ** 2)
    (g,) = tf.gradients(loss, x)
    with tf.Session() as s:
        assert s.run(g, {x: 1.3}) == pytest.approx(2 * 1.3 * (1 + 4 + 9))


def test_map_fn_gradient():
    x = tf.placeholder(tf.float64, [3])
    y = tf.reduce_sum(tf.map_fn(lambda v: v * v * v, x))
    (g,) = tf.gradients(y, x)
    with tf.Session() as s:
        np.testing.assert_allclose(s.run(g, {x: [1.0, 2.0, -1.0]}), [3.0, 12.0, 3.0])


def test_training_through_a_loop_reduces_the_loss():
    w = tf.Variable(0.5, dtype=tf.float64)
    x = tf.constant([1.0, 2.0, 3.0], tf.float64)
    _, h = tf.while_loop(
        lambda i, h: i < 3,
        lambda i, h: (i + 1, tf.tanh(h * w + x)),
        [tf.constant(0), tf.zeros([3], tf.float64)],
    )
    loss = tf.reduce_sum((h - 0.25) ** 2)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        first = s.run(loss)
        for _ in range(20):
            s.run(train)
        assert s.run(loss) < first


def test_gradient_of_a_value_inside_a_loop_body_is_refused():
    inside = []

    def body(i, a):
        t = a * 2.0
        inside.append(t)
        return i + 1, t

    tf.while_loop(lambda i, a: i < 3, body, [tf.constant(0), tf.constant(1.0)])
    with pytest.raises(ValueError, match="inside the body of a while_loop"):
        tf.gradients(inside[0], tf.get_default_graph().get_tensor_by_name("Const_1:0"))


@pytest.mark.skipif(not FIXTURES.exists(), reason="shared fixtures not found")
def test_gradients_while_fixture_rebuilt_with_our_api():
    """The model of TF's gradients_while fixture, differentiated by our tf.gradients."""
    data = np.load(FIXTURES / "gradients_while.npz")
    x0 = tf.placeholder(tf.float32, [3], name="x0")
    w = tf.placeholder(tf.float32, [3], name="w")
    n = tf.placeholder(tf.int32, [], name="n")
    _, xf = tf.while_loop(
        lambda i, x: i < n, lambda i, x: (i + 1, tf.tanh(x * w) + 0.1 * x), [tf.constant(0), x0]
    )
    y = tf.reduce_sum(tf.square(xf))
    gw, gx = tf.gradients(y, [w, x0])
    with tf.Session() as s:
        got = s.run(
            [xf, y, gw, gx], {x0: data["feed_x0_0"], w: data["feed_w_0"], n: data["feed_n_0"]}
        )
    np.testing.assert_allclose(got[0], data["fetch_while.Exit_1_0"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], data["fetch_y_0"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        got[2], data["fetch_gradients.while.mul.Enter_grad.b_acc_3_0"], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        got[3], data["fetch_gradients.while.Enter_1_grad.Exit_0"], rtol=1e-5, atol=1e-6
    )
    names = {op.name for op in tf.get_default_graph().get_operations()}
    assert {
        "gradients/while/Exit_1_grad/b_exit",
        "gradients/while/Enter_1_grad/Exit",
        "gradients/while/mul/Enter_grad/b_acc_3",
    } <= names

"""Learning-rate schedules, the global step and ExponentialMovingAverage against NumPy."""

import math

import numpy as np
import pytest

import flowgraph as tf


def _values(rate_fn, steps, dtype=tf.int64):
    step = tf.placeholder(dtype, [])
    rate = rate_fn(step)
    with tf.Session() as sess:
        return rate, [sess.run(rate, {step: s}) for s in steps]


STEPS = [0, 1, 5, 10, 13, 20, 25]


@pytest.mark.parametrize("staircase", [False, True])
def test_exponential_decay(staircase):
    rate, got = _values(
        lambda s: tf.train.exponential_decay(0.1, s, 10, 0.5, staircase=staircase), STEPS
    )
    assert rate.dtype == tf.float32 and rate.op.name == "ExponentialDecay"
    p = lambda s: math.floor(s / 10) if staircase else s / 10
    np.testing.assert_allclose(got, [0.1 * 0.5 ** p(s) for s in STEPS], rtol=1e-6)


@pytest.mark.parametrize("staircase", [False, True])
def test_natural_exp_and_inverse_time_decay(staircase):
    _, got = _values(
        lambda s: tf.train.natural_exp_decay(0.2, s, 4, 0.3, staircase=staircase), STEPS
    )
    p = lambda s: math.floor(s / 4) if staircase else s / 4
    np.testing.assert_allclose(got, [0.2 * math.exp(-0.3 * p(s)) for s in STEPS], rtol=1e-6)
    _, got = _values(
        lambda s: tf.train.inverse_time_decay(0.2, s, 4, 0.3, staircase=staircase), STEPS
    )
    np.testing.assert_allclose(got, [0.2 / (1 + 0.3 * p(s)) for s in STEPS], rtol=1e-6)


@pytest.mark.parametrize("cycle", [False, True])
def test_polynomial_decay(cycle):
    _, got = _values(
        lambda s: tf.train.polynomial_decay(0.1, s, 10, 0.01, power=0.5, cycle=cycle), STEPS
    )

    def want(s):
        decay_steps = 10 * max(1, math.ceil(s / 10)) if cycle else 10
        s = s if cycle else min(s, 10)
        return (0.1 - 0.01) * (1 - s / decay_steps) ** 0.5 + 0.01

    np.testing.assert_allclose(got, [want(s) for s in STEPS], rtol=1e-5)


def test_cosine_decay():
    _, got = _values(lambda s: tf.train.cosine_decay(0.1, s, 20, alpha=0.1), STEPS)
    want = [0.1 * (0.9 * 0.5 * (1 + math.cos(math.pi * min(s, 20) / 20)) + 0.1) for s in STEPS]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_float64_rate_keeps_its_dtype():
    rate, got = _values(lambda s: tf.train.exponential_decay(np.float64(0.1), s, 3, 0.9), [7])
    assert rate.dtype == tf.float64
    # As in TF, a Python float constant is a float32 tensor before the cast to the rate's type.
    np.testing.assert_allclose(got, [0.1 * float(np.float32(0.9)) ** (7 / 3)], rtol=1e-14)


def test_piecewise_constant():
    rate, got = _values(
        lambda s: tf.train.piecewise_constant(s, [5, 13], [1.0, 0.5, 0.1]), STEPS, tf.int32
    )
    assert rate.dtype == tf.float32
    np.testing.assert_allclose(got, [1.0, 1.0, 1.0, 0.5, 0.5, 0.1, 0.1])


def test_schedule_errors():
    with pytest.raises(ValueError, match="global_step is required"):
        tf.train.exponential_decay(0.1, None, 10, 0.5)
    with pytest.raises(ValueError, match="1 less than"):
        tf.train.piecewise_constant(tf.constant(1), [1, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match="same dtype"):
        tf.train.piecewise_constant(tf.constant(1), [1], [1.0, np.float64(2.0)])


# -- global step ------------------------------------------------------------------------------
def test_global_step_lifecycle():
    assert tf.train.get_global_step() is None
    step = tf.train.get_or_create_global_step()
    assert step.op.name == "global_step" and step.dtype.base_dtype == tf.int64
    assert step.get_shape() == tf.TensorShape([])
    assert step in tf.get_collection(tf.GraphKeys.GLOBAL_STEP)
    assert step in tf.global_variables() and step not in tf.trainable_variables()
    assert tf.train.get_global_step() is step and tf.train.get_or_create_global_step() is step
    with pytest.raises(ValueError, match="already exists"):
        tf.train.create_global_step()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert tf.train.global_step(sess, step) == 0


def test_global_step_found_by_name_and_checked():
    g = tf.Graph()
    with g.as_default():
        tf.Variable(0, name="global_step", trainable=False)  # int32, not in the collection
        assert tf.train.get_global_step().name == "global_step:0"
    g = tf.Graph()
    with g.as_default():
        tf.Variable(0.0, name="global_step")
        with pytest.raises(TypeError, match="integer type"):
            tf.train.get_global_step()
    g = tf.Graph()
    with g.as_default():
        tf.Variable([1, 2], name="global_step")
        with pytest.raises(TypeError, match="not scalar"):
            tf.train.get_global_step()


# -- moving averages --------------------------------------------------------------------------
def test_exponential_moving_average_of_variables():
    v = tf.Variable([1.0, 2.0], name="v")
    w = tf.Variable(5.0, name="w")
    ema = tf.train.ExponentialMovingAverage(decay=0.9)
    update = ema.apply([v, w])
    avg = ema.average(v)
    assert avg.op.name == "v/ExponentialMovingAverage" and ema.average_name(v) == avg.op.name
    assert not avg.trainable and v in tf.moving_average_variables()
    assert update.type == "NoOp" and update.name == "ExponentialMovingAverage"
    restore = ema.variables_to_restore()
    assert restore["v/ExponentialMovingAverage"] is v and restore["w/ExponentialMovingAverage"] is w
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(avg), [1.0, 2.0])  # starts at the initial value
        sess.run(tf.assign(v, [3.0, 0.0]))
        sess.run(update)
        sess.run(update)
        want = np.array([1.0, 2.0])
        for _ in range(2):
            want = want - (1 - np.float32(0.9)) * (want - [3.0, 0.0])
        np.testing.assert_allclose(sess.run(avg), want, rtol=1e-6)
        np.testing.assert_allclose(sess.run(ema.average(w)), 5.0)


def test_num_updates_caps_the_decay():
    v = tf.Variable(0.0, name="v")
    ema = tf.train.ExponentialMovingAverage(decay=0.999, num_updates=tf.constant(2))
    update = ema.apply([v])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(tf.assign(v, 10.0))
        sess.run(update)
        decay = min(0.999, 3.0 / 12.0)
        np.testing.assert_allclose(sess.run(ema.average(v)), 10.0 * (1 - decay), rtol=1e-6)


def test_zero_debiased_average_of_a_tensor():
    x = tf.placeholder(tf.float32, [2])
    value = tf.identity(x, name="value")
    ema = tf.train.ExponentialMovingAverage(decay=0.8, zero_debias=True)
    update = ema.apply([value])
    avg = ema.average(value)
    names = {v.op.name for v in tf.global_variables()}
    assert {
        "value/ExponentialMovingAverage",
        "value/ExponentialMovingAverage/biased",
        "value/ExponentialMovingAverage/local_step",
    } <= names
    batches = [np.array([1.0, 2.0]), np.array([3.0, -1.0]), np.array([0.5, 0.5])]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        biased = np.zeros(2)
        for t, b in enumerate(batches, start=1):
            sess.run(update, {x: b})
            biased = biased - 0.2 * (biased - b)
            np.testing.assert_allclose(sess.run(avg), biased / (1 - 0.8**t), rtol=1e-5)


def test_moving_average_rejects_integers():
    with pytest.raises(TypeError, match="half, float, or double"):
        tf.train.ExponentialMovingAverage(0.9).apply([tf.Variable(1, name="i")])


# TensorFlow 2.21's tf.compat.v1 values of the newer schedules at steps 0, 9, 17, 45 and 100
_NEWER = {
    "sgdr": [0.1, 0.0024471699725836515, 0.07269952446222305, 0.0691341683268547, 0.0691341683],
    "sgdr1": [0.1, 0.01220245286822319, 0.01927482895553112, 0.012812499888, 0.010087891481816],
    "lin": [0.111, 0.01767848990857601, 0.022820398211479187, 0.014090177603, 0.010999999940395],
    "pcd": [1.0, 0.5, 0.5, 0.1, 0.1],
}


def test_cosine_restarts_linear_cosine_and_piecewise_decay_match_tensorflow():
    step = tf.placeholder(tf.int64, [])
    schedules = {
        "sgdr": tf.train.cosine_decay_restarts(0.1, step, 10),
        "sgdr1": tf.train.cosine_decay_restarts(0.1, step, 10, t_mul=1.0, m_mul=0.5, alpha=0.1),
        "lin": tf.train.linear_cosine_decay(0.1, step, 50, num_periods=2.0, alpha=0.1, beta=0.01),
        "pcd": tf.train.piecewise_constant_decay(step, [5, 20], [1.0, 0.5, 0.1]),
    }
    noisy = tf.train.noisy_linear_cosine_decay(0.1, step, 50)
    with tf.Session() as sess:
        for i, at in enumerate([0, 9, 17, 45, 100]):
            got = sess.run(schedules, {step: at})
            for name, values in _NEWER.items():
                np.testing.assert_allclose(got[name], values[i], rtol=1e-5, err_msg=name)
        draws = [sess.run(noisy, {step: 10}) for _ in range(20)]
    assert np.std(draws) > 0  # fresh noise each run, around the noiseless value
    assert abs(np.mean(draws) - 0.1 * (0.8 * 0.5 * (1 + np.cos(np.pi * 0.2)) + 0.001)) < 0.05
    with pytest.raises(ValueError, match="global_step is required"):
        tf.train.cosine_decay_restarts(0.1, None, 10)

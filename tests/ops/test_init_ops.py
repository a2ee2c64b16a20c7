"""Initializers: values, statistics with fixed seeds, argument checks, configs."""

import math

import numpy as np
import pytest

import flowgraph as tf


def _value(init, shape, dtype=tf.float32):
    with tf.Graph().as_default():
        t = init(shape, dtype=dtype)
        with tf.Session() as sess:
            return sess.run(t)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64, tf.int32, tf.int64, tf.bool])
def test_zeros_ones(dtype):
    z = _value(tf.zeros_initializer(), [2, 3], dtype)
    o = _value(tf.ones_initializer(), [2, 3], dtype)
    assert z.dtype == dtype.as_numpy_dtype and z.shape == (2, 3)
    np.testing.assert_array_equal(z, np.zeros((2, 3), dtype.as_numpy_dtype))
    np.testing.assert_array_equal(o, np.ones((2, 3), dtype.as_numpy_dtype))


def test_constant_initializer_scalar_list_padding_and_verify_shape():
    np.testing.assert_array_equal(
        _value(tf.constant_initializer(7), [2, 2]), np.full((2, 2), 7, np.float32)
    )
    np.testing.assert_array_equal(_value(tf.constant_initializer([1, 2, 3]), [3]), [1, 2, 3])
    np.testing.assert_array_equal(_value(tf.constant_initializer([1, 2]), [4]), [1, 2, 2, 2])
    np.testing.assert_array_equal(
        _value(tf.constant_initializer([1, 2]), [2], tf.int64), np.array([1, 2], np.int64)
    )
    with pytest.raises(TypeError):
        _value(tf.constant_initializer([1, 2], verify_shape=True), [4])
    with pytest.raises(TypeError, match="Invalid type for initial value"):
        tf.constant_initializer({"a": 1})
    assert tf.constant_initializer(3.0).get_config() == {"value": 3.0, "dtype": "float32"}


def test_random_initializers_statistics_and_seed():
    n = [200, 300]
    u = _value(tf.random_uniform_initializer(-2.0, 3.0, seed=1), n)
    assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.05
    g = _value(tf.random_normal_initializer(1.0, 2.0, seed=1), n)
    assert abs(g.mean() - 1.0) < 0.05 and abs(g.std() - 2.0) < 0.05
    t = _value(tf.truncated_normal_initializer(0.0, 1.0, seed=1), n)
    assert np.abs(t).max() <= 2.0 and abs(t.std() - 0.87962566) < 0.02
    again = _value(tf.random_normal_initializer(1.0, 2.0, seed=1), n)
    np.testing.assert_array_equal(g, again)
    i = _value(tf.random_uniform_initializer(0, 5, seed=3), [1000], tf.int32)
    assert i.dtype == np.int32 and set(np.unique(i)) == {0, 1, 2, 3, 4}


def test_variance_scaling_modes_and_distributions():
    shape = [3, 3, 40, 60]  # fan_in = 360, fan_out = 540
    fans = {"fan_in": 360, "fan_out": 540, "fan_avg": 450}
    for mode, n in fans.items():
        v = _value(tf.variance_scaling_initializer(2.0, mode, "untruncated_normal", seed=4), shape)
        assert abs(v.std() - math.sqrt(2.0 / n)) < 0.03 * math.sqrt(2.0 / n)
    v = _value(tf.variance_scaling_initializer(1.0, "fan_in", "truncated_normal", seed=5), shape)
    assert abs(v.std() - math.sqrt(1.0 / 360)) < 0.03 * math.sqrt(1.0 / 360)
    assert np.abs(v).max() <= 2 * math.sqrt(1.0 / 360) / 0.87962566103423978 + 1e-6
    v = _value(tf.variance_scaling_initializer(3.0, "fan_out", "uniform", seed=6), shape)
    assert np.abs(v).max() <= math.sqrt(9.0 / 540)
    for bad in ({"scale": 0.0}, {"mode": "fan"}, {"distribution": "cauchy"}):
        with pytest.raises(ValueError):
            tf.variance_scaling_initializer(**bad)
    with pytest.raises(ValueError):
        tf.random_normal_initializer(dtype=tf.int32)


def test_glorot_initializers():
    shape = [100, 300]
    u = _value(tf.glorot_uniform_initializer(seed=2), shape)
    limit = math.sqrt(6.0 / 400)
    assert np.abs(u).max() <= limit and abs(u.std() - limit / math.sqrt(3)) < 0.02 * limit
    g = _value(tf.glorot_normal_initializer(seed=2), shape)
    assert abs(g.std() - math.sqrt(2.0 / 400)) < 0.03 * math.sqrt(2.0 / 400)
    assert tf.glorot_uniform_initializer(seed=2).get_config() == {"seed": 2, "dtype": "float32"}


def test_uniform_unit_scaling():
    v = _value(tf.uniform_unit_scaling_initializer(factor=1.5, seed=3), [50, 20])
    limit = math.sqrt(3.0 / 50) * 1.5
    assert np.abs(v).max() <= limit and np.abs(v).max() > 0.95 * limit


def test_identity_initializer():
    np.testing.assert_array_equal(
        _value(tf.initializers.identity(gain=2.0), [2, 3]), 2.0 * np.eye(2, 3, dtype=np.float32)
    )
    with pytest.raises(ValueError, match="2D"):
        _value(tf.initializers.identity(), [2, 2, 2])


def test_orthogonal_initializer():
    for shape in ([6, 4], [4, 6], [2, 3, 5]):
        v = _value(tf.orthogonal_initializer(gain=1.5, seed=7), shape)
        flat = v.reshape(-1, shape[-1])
        small = flat.T @ flat if flat.shape[0] >= flat.shape[1] else flat @ flat.T
        np.testing.assert_allclose(small, 2.25 * np.eye(small.shape[0]), atol=1e-5)
    with pytest.raises(ValueError, match="at least two-dimensional"):
        _value(tf.orthogonal_initializer(), [3])


def test_namespace_aliases():
    assert tf.initializers.glorot_uniform is tf.glorot_uniform_initializer
    assert tf.initializers.zeros is tf.zeros_initializer
    he = tf.initializers.he_normal(seed=1)
    assert (he.scale, he.mode, he.distribution) == (2.0, "fan_in", "truncated_normal")
    assert callable(tf.initializers.global_variables)
    assert tf.zeros is not tf.zeros_initializer

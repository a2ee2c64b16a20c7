"""tf.nn.log_poisson_loss against NumPy (and TensorFlow's values, which are the same) and a
numeric gradient."""

import math

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.testing import gradient_checker


def _reference(t, x, full):
    loss = np.exp(x) - x * t
    if full:
        with np.errstate(divide="ignore", invalid="ignore"):
            stirling = t * np.log(t) - t + 0.5 * np.log(2 * math.pi * t)
        loss = loss + np.where((t >= 0) & (t <= 1), 0.0, stirling)
    return loss


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_poisson_loss_matches_numpy(full, dtype):
    t = np.array([0.0, 0.5, 1.0, 2.0, 5.0], dtype)
    x = np.array([0.1, -1.0, 2.0, 0.3, 1.5], dtype)
    loss = tf.nn.log_poisson_loss(t, x, compute_full_loss=full)
    assert loss.dtype.as_numpy_dtype == dtype and loss.op.name.startswith("log_poisson_loss")
    with tf.Session() as s:
        got = s.run(loss)
    np.testing.assert_allclose(got, _reference(t, x, full), rtol=1e-6)
    np.testing.assert_allclose(
        got[3:], [0.74985881, -3.01831093] if not full else [1.40166529, 1.75253612], rtol=1e-6
    )


def test_log_poisson_loss_gradient_and_shape_check():
    x = tf.constant(np.array([[0.1, -1.0], [2.0, 0.3]]))
    loss = tf.nn.log_poisson_loss(tf.constant([[0.0, 3.0], [1.0, 2.0]], tf.float64), x, True)
    with tf.Session():
        err = gradient_checker.compute_gradient_error(x, [2, 2], loss, [2, 2])
    assert err < 1e-6
    with pytest.raises(ValueError, match="same shape"):
        tf.nn.log_poisson_loss(tf.zeros([2]), tf.zeros([3]))

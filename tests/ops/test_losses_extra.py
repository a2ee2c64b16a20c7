"""tf.losses.cosine_distance and mean_pairwise_squared_error against TensorFlow 2.21's
tf.compat.v1 values and NumPy references."""

import numpy as np
import pytest

import flowgraph as tf

LABELS = np.random.RandomState(0).randn(4, 3).astype(np.float32)
PREDS = np.random.RandomState(1).randn(4, 3).astype(np.float32)
WEIGHTS = np.array([[1.0], [0.0], [2.0], [0.5]], np.float32)


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_cosine_distance():
    plain = tf.losses.cosine_distance(_unit(LABELS), _unit(PREDS), axis=1)
    weighted = tf.losses.cosine_distance(_unit(LABELS), _unit(PREDS), dim=1, weights=WEIGHTS)
    with tf.Session() as sess:
        got = sess.run([plain, weighted])
    per_example = 1 - (_unit(LABELS) * _unit(PREDS)).sum(1)
    np.testing.assert_allclose(got, [0.7692358493804932, 0.4825302064418793], rtol=1e-6)
    np.testing.assert_allclose(got[0], per_example.mean(), rtol=1e-6)
    assert tf.get_collection(tf.GraphKeys.LOSSES) == [plain, weighted]
    with pytest.raises(ValueError, match="You must specify 'axis'"):
        tf.losses.cosine_distance(LABELS, PREDS)


def test_mean_pairwise_squared_error():
    plain = tf.losses.mean_pairwise_squared_error(LABELS, PREDS)
    weighted = tf.losses.mean_pairwise_squared_error(LABELS, PREDS, weights=WEIGHTS)
    with tf.Session() as sess:
        got = sess.run([plain, weighted])
    np.testing.assert_allclose(got, [16.957136154174805, 8.978425025939941], rtol=1e-6)
    d = PREDS - LABELS
    pairs = (d[:, :, None] - d[:, None, :]) ** 2  # every ordered pair, i == j contributing 0
    per_example = pairs.sum((1, 2)) / (3 * 2)
    np.testing.assert_allclose(got[0], per_example.sum(), rtol=1e-5)
    np.testing.assert_allclose(got[1], (per_example * WEIGHTS[:, 0]).sum(), rtol=1e-5)

"""tf.losses against NumPy: each loss, each reduction, weights, collections."""

import numpy as np
import pytest

import flowgraph as tf

R = np.random.RandomState(0)
LABELS = R.rand(4, 3).astype(np.float32)
PREDS = R.rand(4, 3).astype(np.float32)
WEIGHTS = np.array([[1.0], [0.0], [2.0], [0.5]], np.float32)


def _run(t, feed=None):
    with tf.Session() as sess:
        return sess.run(t, feed)


def _reduce(losses, weights, reduction):
    w = np.broadcast_to(weights, losses.shape)
    weighted = losses * w
    if reduction == tf.losses.Reduction.NONE:
        return weighted
    total = weighted.sum()
    if reduction == tf.losses.Reduction.SUM:
        return total
    if reduction == tf.losses.Reduction.MEAN:
        return total / w.sum()
    if reduction == tf.losses.Reduction.SUM_OVER_BATCH_SIZE:
        return total / losses.size
    return total / np.count_nonzero(w)


def _ref(name, y, p):
    d = p - y
    return {
        "mean_squared_error": d**2,
        "absolute_difference": np.abs(d),
        "huber_loss": np.where(np.abs(d) <= 1.0, 0.5 * d**2, np.abs(d) - 0.5),
        "log_loss": -y * np.log(p + 1e-7) - (1 - y) * np.log(1 - p + 1e-7),
        "hinge_loss": np.maximum(0, 1 - (2 * y - 1) * p),
    }[name]


@pytest.mark.parametrize(
    "name", ["mean_squared_error", "absolute_difference", "huber_loss", "log_loss", "hinge_loss"]
)
@pytest.mark.parametrize(
    "reduction", ["weighted_sum", "weighted_mean", "weighted_sum_by_nonzero_weights", "none"]
)
def test_pointwise_losses(name, reduction):
    y, p = tf.placeholder(tf.float32, [4, 3]), tf.placeholder(tf.float32, [4, 3])
    fn = getattr(tf.losses, name)
    args = {"labels": y, "logits": p} if name == "hinge_loss" else {"labels": y, "predictions": p}
    loss = fn(weights=WEIGHTS, reduction=reduction, **args)
    got = _run(loss, {y: LABELS, p: PREDS})
    np.testing.assert_allclose(
        got, _reduce(_ref(name, LABELS, PREDS), WEIGHTS, reduction), rtol=1e-5, atol=1e-6
    )
    assert tf.losses.get_losses() == [loss]


def test_default_reduction_and_scalar_weight():
    loss = tf.losses.mean_squared_error(LABELS, PREDS)
    np.testing.assert_allclose(_run(loss), np.mean((PREDS - LABELS) ** 2), rtol=1e-5)
    loss = tf.losses.absolute_difference(
        LABELS, PREDS, weights=2.0, reduction=tf.losses.Reduction.SUM_OVER_BATCH_SIZE
    )
    np.testing.assert_allclose(_run(loss), 2 * np.abs(PREDS - LABELS).mean(), rtol=1e-5)
    zero = tf.losses.absolute_difference(LABELS, PREDS, weights=0.0)
    assert _run(zero) == 0.0


def _softmax_xent(labels, logits):
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -(labels * logp).sum(-1)


def test_softmax_cross_entropy_with_label_smoothing():
    logits = R.randn(4, 5).astype(np.float32)
    onehot = np.eye(5, dtype=np.float32)[[0, 3, 1, 4]]
    loss = tf.losses.softmax_cross_entropy(
        onehot, logits, weights=[1.0, 2.0, 0.0, 1.0], label_smoothing=0.1
    )
    smooth = onehot * 0.9 + 0.1 / 5
    w = np.array([1.0, 2.0, 0.0, 1.0])
    np.testing.assert_allclose(_run(loss), (_softmax_xent(smooth, logits) * w).sum() / 3, rtol=1e-5)
    assert loss.op.name.startswith("softmax_cross_entropy_loss/")


def test_sparse_softmax_and_sigmoid_cross_entropy():
    logits = R.randn(4, 5).astype(np.float32)
    ids = np.array([[0], [3], [1], [4]], np.int32)
    loss = tf.losses.sparse_softmax_cross_entropy(ids, logits)
    np.testing.assert_allclose(
        _run(loss), _softmax_xent(np.eye(5)[ids[:, 0]], logits).mean(), rtol=1e-5
    )
    y = (R.rand(4, 5) > 0.5).astype(np.float32)
    sig = tf.losses.sigmoid_cross_entropy(y, logits, label_smoothing=0.2)
    ys = y * 0.8 + 0.1
    ref = np.maximum(logits, 0) - logits * ys + np.log1p(np.exp(-np.abs(logits)))
    np.testing.assert_allclose(_run(sig), ref.mean(), rtol=1e-5)


def test_total_loss_and_regularization_and_errors():
    l1 = tf.losses.mean_squared_error(LABELS, PREDS)
    with tf.variable_scope("m", regularizer=lambda w: tf.reduce_sum(w)):
        tf.get_variable("w", initializer=np.array([1.0, 2.0], np.float32))
    extra = tf.constant(5.0)
    tf.losses.add_loss(extra)
    total = tf.losses.get_total_loss()
    no_reg = tf.losses.get_total_loss(add_regularization_losses=False)
    reg = tf.losses.get_regularization_loss()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        t, n, r, l = sess.run([total, no_reg, reg, l1])
    np.testing.assert_allclose([t, n, r], [l + 5 + 3, l + 5, 3.0], rtol=1e-6)
    with pytest.raises(ValueError, match="Invalid Reduction Key"):
        tf.losses.compute_weighted_loss(l1, reduction="avg")
    with pytest.raises(ValueError, match="weights can not be broadcast"):
        tf.losses.compute_weighted_loss(np.ones((2, 3), np.float32), weights=np.ones(3, np.float32))
    with pytest.raises(ValueError, match="must not be None"):
        tf.losses.mean_squared_error(None, PREDS)
    with pytest.raises(ValueError):
        tf.losses.mean_squared_error(LABELS, PREDS[:, :2])
    assert (
        tf.losses.Reduction.SUM_OVER_NONZERO_WEIGHTS == tf.losses.Reduction.SUM_BY_NONZERO_WEIGHTS
    )


def test_loss_collection_none_and_float64_input():
    loss = tf.losses.compute_weighted_loss(np.array([1.0, 3.0]), loss_collection=None)
    assert tf.losses.get_losses() == [] and loss.dtype == tf.float64
    assert _run(loss) == 2.0

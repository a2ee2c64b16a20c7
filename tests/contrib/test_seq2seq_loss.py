"""tf.contrib.seq2seq.sequence_loss against NumPy for every reduction flag, custom loss
functions, errors, and its gradients against numeric Jacobians."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.testing import gradient_checker

seq2seq = tf.contrib.seq2seq
B, T, C = 3, 4, 5


def _crossent(logits, targets):
    """Per-step softmax cross-entropy [B, T] in float64."""
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, targets[..., None], -1)[..., 0]


def _div_no_nan(a, b):
    b = np.asarray(b, np.float64)
    return np.where(b == 0, 0.0, a / np.where(b == 0, 1.0, b))


def _reference(logits, targets, weights, avg_t, avg_b, sum_t, sum_b):
    """TF 1.15's documented reductions: average divides by the weights' sum, sum by the count
    of non-zero weights."""
    ce = _crossent(logits.astype(np.float64), targets) * weights
    if avg_t and avg_b:
        return _div_no_nan(ce.sum(), weights.sum())
    if sum_t and sum_b:
        return _div_no_nan(ce.sum(), np.count_nonzero(weights))
    if avg_t or avg_b:
        axis = 0 if avg_b else 1
        return _div_no_nan(ce.sum(axis), weights.sum(axis))
    if sum_t or sum_b:
        axis = 0 if sum_b else 1
        return _div_no_nan(ce.sum(axis), np.count_nonzero(weights, axis=axis))
    return ce


def _data(dtype, seed=0):
    rng = np.random.RandomState(seed)
    logits = rng.randn(B, T, C).astype(dtype)
    targets = rng.randint(0, C, (B, T)).astype(np.int32)
    weights = (np.arange(T)[None, :] < np.array([4, 2, 0])[:, None]).astype(dtype)
    weights[0, 1] = 0.5  # a non-binary weight: averages and sums differ
    return logits, targets, weights


FLAGS = [  # (average_across_timesteps, average_across_batch, sum_over_timesteps, sum_over_batch)
    (True, True, False, False),
    (True, False, False, False),
    (False, True, False, False),
    (False, False, False, False),
    (False, False, True, True),
    (False, False, True, False),
    (False, False, False, True),
    (True, False, False, True),
    (False, True, True, False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("flags", FLAGS)
def test_matches_numpy(flags, dtype):
    logits, targets, weights = _data(dtype)
    avg_t, avg_b, sum_t, sum_b = flags
    loss = seq2seq.sequence_loss(
        tf.constant(logits),
        tf.constant(targets),
        tf.constant(weights),
        average_across_timesteps=avg_t,
        average_across_batch=avg_b,
        sum_over_timesteps=sum_t,
        sum_over_batch=sum_b,
    )
    want = _reference(logits, targets, weights, *flags)
    assert loss.dtype == tf.as_dtype(dtype)
    with tf.Session() as sess:
        got = sess.run(loss)
    assert got.shape == np.shape(want)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_all_zero_weights_give_zero_not_nan():
    logits, targets, _ = _data(np.float32)
    zeros = np.zeros((B, T), np.float32)
    with tf.Session() as sess:
        for kw in (
            {},
            {
                "average_across_timesteps": False,
                "average_across_batch": False,
                "sum_over_timesteps": True,
                "sum_over_batch": True,
            },
        ):
            got = sess.run(seq2seq.sequence_loss(logits, targets, zeros, **kw))
            assert got == 0.0


def test_softmax_loss_function_gets_flat_labels_and_logits():
    logits, targets, weights = _data(np.float32)
    seen = {}

    def loss_fn(labels, logits):
        seen["shapes"] = (labels.shape.as_list(), logits.shape.as_list())
        return 2.0 * tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)

    loss = seq2seq.sequence_loss(
        tf.constant(logits),
        tf.constant(targets),
        tf.constant(weights),
        average_across_timesteps=False,
        softmax_loss_function=loss_fn,
    )
    assert seen["shapes"] == ([B * T], [B * T, C])
    want = 2.0 * _reference(logits, targets, weights, False, True, False, False)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(loss), want, rtol=1e-5)


def test_unknown_batch_and_time_at_graph_construction():
    logits, targets, weights = _data(np.float32)
    lp = tf.placeholder(tf.float32, [None, None, C])
    tp = tf.placeholder(tf.int32, [None, None])
    wp = tf.placeholder(tf.float32, [None, None])
    loss = seq2seq.sequence_loss(lp, tp, wp, average_across_batch=False)
    assert loss.shape.as_list() == [None]
    with tf.Session() as sess:
        got = sess.run(loss, {lp: logits, tp: targets, wp: weights})
    np.testing.assert_allclose(
        got, _reference(logits, targets, weights, True, False, False, False), rtol=1e-5
    )


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"average_across_timesteps": True, "sum_over_timesteps": True}, "average_across_time"),
        ({"average_across_batch": True, "sum_over_batch": True}, "average_across_batch"),
    ],
)
def test_conflicting_flags_raise(kw, match):
    logits, targets, weights = _data(np.float32)
    with pytest.raises(ValueError, match=match):
        seq2seq.sequence_loss(logits, targets, weights, **kw)


def test_wrong_ranks_raise():
    logits, targets, weights = _data(np.float32)
    with pytest.raises(ValueError, match="Logits must be a"):
        seq2seq.sequence_loss(logits[0], targets, weights)
    with pytest.raises(ValueError, match="Targets must be a"):
        seq2seq.sequence_loss(logits, targets[0], weights)
    with pytest.raises(ValueError, match="Weights must be a"):
        seq2seq.sequence_loss(logits, targets, weights[..., None])


@pytest.mark.parametrize("flags", [FLAGS[0], FLAGS[1], FLAGS[3], FLAGS[4]])
def test_gradients_match_numeric_jacobian(flags):
    logits, targets, weights = _data(np.float64, seed=3)
    avg_t, avg_b, sum_t, sum_b = flags

    def fn(lg, w):
        return seq2seq.sequence_loss(
            lg,
            tf.constant(targets),
            w,
            average_across_timesteps=avg_t,
            average_across_batch=avg_b,
            sum_over_timesteps=sum_t,
            sum_over_batch=sum_b,
        )

    gradient_checker.check_gradients(fn, [logits, weights + 0.25])


def test_sequence_loss_object():
    logits, targets, weights = _data(np.float64)
    with tf.Session() as sess:
        got = sess.run(seq2seq.SequenceLoss()(targets, logits, sample_weight=weights))
        ones = sess.run(
            seq2seq.SequenceLoss(average_across_batch=True, sum_over_batch=False)(targets, logits)
        )
    np.testing.assert_allclose(got, _reference(logits, targets, weights, False, False, True, True))
    want = _reference(logits, targets, np.ones((B, T)), False, True, True, False)
    np.testing.assert_allclose(ones, want)


def test_keras_decoders_raise_not_implemented():
    for name in ("BasicDecoderV2", "BeamSearchDecoderV2", "BaseDecoder"):
        with pytest.raises(NotImplementedError, match=name):
            getattr(seq2seq, name)
    with pytest.raises(AttributeError):
        seq2seq.NoSuchThing  # noqa: B018

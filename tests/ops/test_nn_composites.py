"""Composite tf.nn functions (softmax on other axes, l2_normalize, moments, batch_normalization,
sigmoid/weighted/multi-dim cross-entropies, dropout, embedding_lookup) and candidate sampling."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.testing.op_test import check_op, run


def _rand(shape, dtype=np.float32, seed=0, low=-2.0, high=2.0):
    return np.random.RandomState(seed).uniform(low, high, shape).astype(dtype)


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_other_axis_and_dim_alias(dtype):
    x = _rand((2, 3, 4), dtype)
    check_op(
        lambda a: tf.nn.softmax(a, axis=1), [x], lambda a: _softmax(a, 1).astype(dtype), rtol=1e-6
    )
    check_op(
        lambda a: tf.nn.log_softmax(a, dim=0),
        [x],
        lambda a: np.log(_softmax(a, 0)).astype(dtype),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_l2_normalize_moments_batch_normalization(dtype):
    x = _rand((3, 4), dtype)
    norm = np.sqrt(np.maximum((x.astype(np.float64) ** 2).sum(1, keepdims=True), 1e-12))
    check_op(
        lambda a: tf.nn.l2_normalize(a, axis=1), [x], lambda a: (a / norm).astype(dtype), rtol=1e-5
    )
    check_op(
        lambda a: list(tf.nn.moments(a, [0])),
        [x],
        lambda a: [a.mean(0), a.var(0)],
        rtol=1e-5,
        atol=1e-6,
    )
    check_op(
        lambda a: list(tf.nn.moments(a, [0, 1], keep_dims=True)),
        [x],
        lambda a: [a.mean(keepdims=True), a.var(keepdims=True)],
        rtol=1e-5,
        atol=1e-6,
    )
    mean, var, offset, scale = x.mean(0), x.var(0), _rand((4,), dtype, 1), _rand((4,), dtype, 2)
    want = (x - mean) / np.sqrt(var + 1e-3) * scale + offset
    check_op(
        lambda a, m, v, o, s: tf.nn.batch_normalization(a, m, v, o, s, 1e-3),
        [x, mean, var, offset, scale],
        lambda *_: want.astype(dtype),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_and_weighted_cross_entropy(dtype):
    logits, labels = _rand((3, 4), dtype) * 4, _rand((3, 4), dtype, 1, 0, 1)
    x, z = logits.astype(np.float64), labels.astype(np.float64)
    sig = 1 / (1 + np.exp(-x))
    want = -(z * np.log(sig) + (1 - z) * np.log(1 - sig))
    check_op(
        lambda a, b: tf.nn.sigmoid_cross_entropy_with_logits(labels=b, logits=a),
        [logits, labels],
        lambda *_: want.astype(dtype),
        rtol=1e-4,
        atol=1e-5,
    )
    weighted = -(3.0 * z * np.log(sig) + (1 - z) * np.log(1 - sig))
    check_op(
        lambda a, b: tf.nn.weighted_cross_entropy_with_logits(labels=b, logits=a, pos_weight=3.0),
        [logits, labels],
        lambda *_: weighted.astype(dtype),
        rtol=1e-4,
        atol=1e-5,
    )
    extreme = np.array([100.0, -100.0, 100.0], dtype)  # stable where exp(-x) would overflow
    got = run(
        lambda a: tf.nn.sigmoid_cross_entropy_with_logits(
            labels=np.array([1, 0, 0], dtype), logits=a
        ),
        [extreme],
    )
    np.testing.assert_allclose(got, [0, 0, 100], atol=1e-6)
    with pytest.raises(ValueError, match="same shape"):
        tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.zeros([2]), logits=tf.zeros([3]))


def test_softmax_cross_entropy_ranks_and_axes():
    logits, labels = _rand((2, 3, 5)), _softmax(_rand((2, 3, 5), seed=1))
    want = -(labels * np.log(_softmax(logits))).sum(-1)
    check_op(
        lambda a, b: tf.nn.softmax_cross_entropy_with_logits_v2(labels=b, logits=a),
        [logits, labels],
        lambda *_: want,
        rtol=1e-5,
    )
    moved = lambda t: np.ascontiguousarray(np.moveaxis(t, -1, 1))
    check_op(
        lambda a, b: tf.nn.softmax_cross_entropy_with_logits(labels=b, logits=a, dim=1),
        [moved(logits), moved(labels)],
        lambda *_: want,
        rtol=1e-5,
    )
    sparse = np.array([[0, 4, 2], [1, 1, 3]])
    want = -np.log(np.take_along_axis(_softmax(logits), sparse[..., None], -1))[..., 0]
    check_op(
        lambda a, b: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=b, logits=a),
        [logits, sparse],
        lambda *_: want,
        rtol=1e-5,
    )


def test_dropout_statistics_scale_and_argument_rules():
    x = np.ones((200, 50), np.float32)
    for kwargs in ({"rate": 0.25}, {"keep_prob": 0.75}):
        out = run(lambda a, kw=kwargs: tf.nn.dropout(a, seed=7, **kw), [x])
        assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.75)}
        assert abs((out == 0).mean() - 0.25) < 0.02
    out = run(lambda a: tf.nn.dropout(a, rate=0.5, noise_shape=[200, 1], seed=3), [x])
    assert np.all(out == out[:, :1])  # one draw per row
    with pytest.raises(ValueError):
        tf.nn.dropout(tf.ones([2]), keep_prob=0.5, rate=0.5)
    with pytest.raises(ValueError):
        tf.nn.dropout(tf.ones([2]))
    with pytest.raises(ValueError, match="range"):
        tf.nn.dropout(tf.ones([2]), rate=1.0)
    with pytest.raises(ValueError, match="floating"):
        tf.nn.dropout(tf.ones([2], tf.int32), rate=0.5)


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_embedding_lookup_shards(strategy):
    table = _rand((7, 3))
    ids = np.array([[6, 0, 3], [2, 2, 5]])
    shards = (
        [table[i::3] for i in range(3)] if strategy == "mod" else [table[:3], table[3:5], table[5:]]
    )
    got = run(
        lambda *s: tf.nn.embedding_lookup(list(s), tf.constant(ids), partition_strategy=strategy),
        shards,
    )
    np.testing.assert_array_equal(got, table[ids])
    single = run(lambda t: tf.nn.embedding_lookup(t, tf.constant(ids)), [table])
    np.testing.assert_array_equal(single, table[ids])
    with pytest.raises(ValueError, match="partition strategy"):
        tf.nn.embedding_lookup(table, [0], partition_strategy="range")


def test_embedding_lookup_max_norm_and_sparse_gradient():
    table = _rand((5, 4))
    got = run(lambda t: tf.nn.embedding_lookup(t, tf.constant([1, 3]), max_norm=0.5), [table])
    rows = table[[1, 3]]
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    np.testing.assert_allclose(got, rows * 0.5 / np.maximum(norms, 0.5), rtol=1e-6)
    params = tf.placeholder(tf.float32, [5, 4])
    (grad,) = tf.gradients(tf.reduce_sum(tf.nn.embedding_lookup(params, [1, 3, 1])), [params])
    assert isinstance(grad, tf.IndexedSlices)
    with tf.Session() as sess:
        values, indices = sess.run([grad.values, grad.indices], {params: table})
    np.testing.assert_array_equal(indices, [1, 3, 1])
    np.testing.assert_array_equal(values, np.ones((3, 4)))


@pytest.mark.parametrize("sampler", ["uniform", "log_uniform"])
@pytest.mark.parametrize("unique", [True, False])
def test_candidate_samplers(sampler, unique):
    fn = (
        tf.nn.uniform_candidate_sampler
        if sampler == "uniform"
        else tf.nn.log_uniform_candidate_sampler
    )
    true = np.array([[0, 3], [7, 9]], np.int64)
    sampled, true_exp, sampled_exp = run(lambda t: list(fn(t, 2, 6, unique, 10, seed=5)), [true])
    assert (
        sampled.dtype == np.int64
        and sampled.shape == (6,)
        and np.all((sampled >= 0) & (sampled < 10))
    )
    if unique:
        assert len(set(sampled)) == 6
    p = (
        (lambda k: np.full(np.shape(k), 0.1))
        if sampler == "uniform"
        else (lambda k: np.log((np.asarray(k) + 2.0) / (np.asarray(k) + 1.0)) / np.log(11.0))
    )
    if not unique:
        np.testing.assert_allclose(true_exp, 6 * p(true), rtol=1e-6)
        np.testing.assert_allclose(sampled_exp, 6 * p(sampled), rtol=1e-6)
    else:
        # 1 - (1 - p)^tries for one number of tries >= 6 shared by every id.
        tries = np.log1p(-true_exp.astype(np.float64)) / np.log1p(-p(true))
        assert np.all(tries >= 6 - 1e-3) and np.allclose(tries, tries.flat[0], rtol=1e-4)
    again = run(lambda t: fn(t, 2, 6, unique, 10, seed=5)[0], [true])
    np.testing.assert_array_equal(sampled, again)  # op seeds make it repeatable
    with pytest.raises(tf.errors.InvalidArgumentError, match="too small"):
        run(lambda t: fn(t, 2, 11, True, 10)[0], [true])


def test_compute_accidental_hits():
    true = np.array([[1, 2], [3, 1]], np.int64)
    sampled = np.array([1, 5, 3, 1], np.int64)
    idx, ids, w = run(
        lambda t, s: list(tf.nn.compute_accidental_hits(t, s, num_true=2)), [true, sampled]
    )
    np.testing.assert_array_equal(idx, [0, 0, 1, 1, 1])
    np.testing.assert_array_equal(ids, [0, 3, 2, 0, 3])
    assert np.all(w == -np.finfo(np.float32).max)


def test_nce_and_sampled_softmax_losses_with_given_samples():
    """With fixed sampled values the losses have a closed form we can compute in NumPy."""
    w, b, x = _rand((10, 3), seed=1), _rand((10,), seed=2), _rand((2, 3), seed=3)
    labels = np.array([[2], [7]], np.int64)
    sampled = np.array([0, 7, 4], np.int64)
    true_exp, sampled_exp = (
        np.array([[0.5], [0.25]], np.float32),
        np.array([0.5, 0.25, 0.125], np.float32),
    )
    true_logits = (x * w[labels[:, 0]]).sum(1, keepdims=True) + b[labels] - np.log(true_exp)
    samp_logits = x @ w[sampled].T + b[sampled] - np.log(sampled_exp)
    logits = np.concatenate([true_logits, samp_logits], 1)
    target = np.concatenate([np.ones((2, 1)), np.zeros((2, 3))], 1)
    sig = 1 / (1 + np.exp(-logits))
    nce = -(target * np.log(sig) + (1 - target) * np.log(1 - sig)).sum(1)
    fixed = (sampled, true_exp, sampled_exp)
    got = run(
        lambda *a: tf.nn.nce_loss(
            *a[:2], inputs=a[2], labels=labels, num_sampled=3, num_classes=10, sampled_values=a[3:]
        ),
        [w, b, x, *fixed],
    )
    np.testing.assert_allclose(got, nce, rtol=1e-5)
    masked = logits.copy()
    masked[1, 2] += -np.finfo(np.float32).max  # sampled id 7 is row 1's true class
    softmax_loss = -np.log(_softmax(masked)[:, 0])
    got = run(
        lambda *a: tf.nn.sampled_softmax_loss(
            *a[:2], inputs=a[2], labels=labels, num_sampled=3, num_classes=10, sampled_values=a[3:]
        ),
        [w, b, x, *fixed],
    )
    np.testing.assert_allclose(got, softmax_loss, rtol=1e-5)

"""tf.nn.embedding_lookup_sparse and safe_embedding_lookup_sparse against values recorded from
TensorFlow 2.21 (tf.compat.v1) for every combiner, with and without weights, default ids and
rank-3 ids; the gradient against a numeric Jacobian."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.testing.gradient_checker import compute_gradient_error

TF_VALUES = [
    [[8.0, 10.0], [0.0, 0.0], [14.0, 17.0]],
    [[14.0, 17.0], [0.0, 0.0], [6.0, 7.0]],
    [[4.0, 5.0], [0.0, 0.0], [4.666669845581055, 5.666669845581055]],
    [[4.666669845581055, 5.666669845581055], [0.0, 0.0], [6.0, 7.0]],
    [[5.6568498611450195, 7.071070194244385], [0.0, 0.0], [8.082900047302246, 9.814959526062012]],
    [[6.260990142822266, 7.602630138397217], [0.0, 0.0], [3.207129955291748, 3.7416601181030273]],
    [[4.666669845581055, 5.666669845581055], [0.0, 0.0], [4.0, 5.0]],
    [[4.0, 5.0], [4.0, 5.0], [4.666669845581055, 5.666669845581055]],
    [[[2.0, 3.0], [0.0, 0.0]], [[8.0, 9.0], [0.0, 0.0]]],
    [
        [0.0, 0.0],
        [9.111109733581543, 10.777779579162598],
        [0.0, 0.0],
        [6.222219944000244, 7.555560111999512],
        [0.0, 0.0],
        [6.0, 7.0],
    ],
]


def _inputs(dtype=tf.float32):
    params = tf.constant(np.arange(12.0).reshape(6, 2), dtype)
    where = [[0, 0], [0, 1], [2, 0], [2, 1], [2, 2]]
    sp = tf.SparseTensor(where, tf.constant([1, 3, 5, 1, 1], tf.int64), [3, 3])
    w = tf.SparseTensor(where, tf.constant([1.0, 2.0, 0.5, 1.5, -1.0], dtype), [3, 3])
    return params, sp, w


def test_matches_tensorflow():
    params, sp, w = _inputs()
    sp3 = tf.SparseTensor(
        [[0, 0, 0], [0, 1, 1], [1, 0, 0]], tf.constant([1, -1, 4], tf.int64), [2, 2, 2]
    )
    outs = []
    for c in ("sum", "mean", "sqrtn"):
        outs += [
            tf.nn.embedding_lookup_sparse(params, sp, None, combiner=c),
            tf.nn.embedding_lookup_sparse(params, sp, w, combiner=c),
        ]
    outs += [
        tf.nn.safe_embedding_lookup_sparse(params, sp, w),
        tf.nn.safe_embedding_lookup_sparse(params, sp, None, default_id=2),
        tf.nn.safe_embedding_lookup_sparse(params, sp3, None),
    ]
    assert outs[-1].shape.as_list() == [2, 2, 2]  # as TF infers, evaluating the constant shape
    grad = tf.gradients(tf.reduce_sum(outs[3] * outs[3]), params)[0]
    with tf.Session() as sess:
        got = sess.run(outs + [tf.convert_to_tensor(grad)])
    for g, want in zip(got, TF_VALUES):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("weighted", [False, True])
def test_gradient(combiner, weighted):
    _, sp, w = _inputs(tf.float64)
    p = tf.placeholder(tf.float64, [6, 2])
    y = tf.nn.embedding_lookup_sparse(p, sp, w if weighted else None, combiner=combiner)
    assert compute_gradient_error(p, [6, 2], y, [3, 2]) < 1e-6


def test_argument_checks():
    params, sp, _ = _inputs()
    with pytest.raises(ValueError, match="combiner"):
        tf.nn.embedding_lookup_sparse(params, sp, None, combiner="max")
    with pytest.raises(TypeError, match="sp_ids"):
        tf.nn.embedding_lookup_sparse(params, sp.values, None)

"""tf.metrics at k (precision, recall, average precision of the top k classes), against values
and names recorded from TensorFlow 2.21's tf.compat.v1 on the same three batches."""

import numpy as np
import pytest

import flowgraph as tf

# name -> (builder over (scores S, labels L [5, 2], labels L1 [5], weights W, sparse labels SL,
# top-3 indices idx), TensorFlow's final value, TensorFlow's op name of the value)
_CASES = {
    "p2": (lambda a: tf.metrics.precision_at_k(a[1], a[0], 2), 0.23333333333333334),
    "p3c": (lambda a: tf.metrics.precision_at_k(a[1], a[0], 3, class_id=2), 1 / 3),
    "p1": (lambda a: tf.metrics.precision_at_k(a[2], a[0], 1), 0.13333333333333333),
    "p3w": (lambda a: tf.metrics.precision_at_k(a[1], a[0], 3, weights=a[3]), 0.2553752733417227),
    "r2": (lambda a: tf.metrics.recall_at_k(a[1], a[0], 2), 0.23333333333333334),
    "r3c": (lambda a: tf.metrics.recall_at_k(a[1], a[0], 3, class_id=1), 2 / 3),
    "rs": (lambda a: tf.metrics.recall_at_k(a[4], a[0], 2), 0.4666666666666667),
    "ps": (lambda a: tf.metrics.precision_at_k(a[4], a[0], 2, class_id=2), 0.0),
    "ptop": (lambda a: tf.metrics.precision_at_top_k(a[1], a[5]), 0.24444444444444444),
    "rtop": (lambda a: tf.metrics.recall_at_top_k(a[1], a[5], k=3), 0.36666666666666664),
    "ap3": (lambda a: tf.metrics.average_precision_at_k(a[1], a[0], 3), 0.23333333333333334),
    "ap2w": (
        lambda a: tf.metrics.average_precision_at_k(a[2], a[0], 2, weights=a[3]),
        0.10883539289898966,
    ),
    # a row without labels has no defined average precision: TensorFlow's NaN
    "aps": (lambda a: tf.metrics.sparse_average_precision_at_k(a[4], a[0], 4), np.nan),
}


def _batches():
    rng = np.random.RandomState(3)
    batches = []
    for _ in range(3):
        scores = rng.rand(5, 6).astype(np.float32)
        labels = rng.randint(0, 6, size=(5, 2)).astype(np.int64)
        labels1 = rng.randint(0, 6, size=(5,)).astype(np.int64)
        batches.append((scores, labels, labels1, rng.rand(5).astype(np.float32)))
    return batches


def _inputs():
    scores = tf.placeholder(tf.float32, [5, 6])
    labels, labels1 = tf.placeholder(tf.int64, [5, 2]), tf.placeholder(tf.int64, [5])
    weights = tf.placeholder(tf.float32, [5])
    sparse = tf.SparseTensor(
        tf.constant([[0, 0], [1, 0], [1, 1], [3, 0], [4, 2]], tf.int64),
        tf.constant([1, 2, 5, 0, 3], tf.int64),
        [5, 3],
    )
    _, top3 = tf.nn.top_k(scores, 3)
    return [scores, labels, labels1, weights, sparse, top3]


def test_at_k_metrics_stream_tensorflows_values():
    args = _inputs()
    metrics = {name: build(args) for name, (build, _) in _CASES.items()}
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        for batch in _batches():
            updates = sess.run({k: m[1] for k, m in metrics.items()}, dict(zip(args, batch)))
        values = sess.run({k: m[0] for k, m in metrics.items()})
    for name, (_, expected) in _CASES.items():
        np.testing.assert_allclose(values[name], expected, rtol=1e-9, err_msg=name)
        np.testing.assert_allclose(updates[name], expected, rtol=1e-9, err_msg=name)
        assert values[name].dtype == np.float64


def test_names_are_tensorflows():
    args = _inputs()
    value, update = tf.metrics.precision_at_k(args[1], args[0], 2)
    assert (value.op.name, update.op.name) == ("precision_at_2", "precision_at_2/update")
    value, update = tf.metrics.recall_at_k(args[1], args[0], 3, class_id=1)
    assert (value.op.name, update.op.name) == ("recall_at_3_class1", "recall_at_3_class1/update")
    value, update = tf.metrics.average_precision_at_k(args[1], args[0], 3)
    assert (value.op.name, update.op.name) == (
        "average_precision_at_3/mean",
        "average_precision_at_3",
    )
    names = {v.op.name for v in tf.local_variables()}
    assert {
        "precision_at_2/true_positive_at_2",
        "precision_at_2/false_positive_at_2",
        "recall_at_3_class1/false_negative_at_3_class1",
        "average_precision_at_3/total",
    } <= names


def test_precision_without_predictions_of_the_class_is_nan_and_errors():
    scores = tf.constant([[0.9, 0.1, 0.0]])
    _, update = tf.metrics.precision_at_k(tf.constant([[1]], tf.int64), scores, 1, class_id=2)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        assert np.isnan(sess.run(update))
    with pytest.raises(ValueError, match="Invalid k"):
        tf.metrics.average_precision_at_k(tf.constant([[1]], tf.int64), scores, 0)
    with pytest.raises(ValueError, match="Unexpected labels shape"):
        tf.metrics.precision_at_k(tf.constant([[[1]]], tf.int64), scores, 1)
    with pytest.raises(TypeError, match="Types don't match"):
        tf.metrics.recall_at_k(tf.constant([[1]], tf.int32), scores, 1)

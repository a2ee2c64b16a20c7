"""tf.metrics over thresholds and tf.confusion_matrix, against values recorded from TensorFlow
2.21's tf.compat.v1 on the same inputs (three update runs of 50 examples each)."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors

# name -> (metric builder over labels L, predictions P, weights W; TensorFlow's final value)
_CASES = {
    "auc_roc": (lambda L, P, W: tf.metrics.auc(L, P), 0.7932308912277222),
    "auc_roc_w": (lambda L, P, W: tf.metrics.auc(L, P, weights=W, num_thresholds=50), 0.83210659),
    "auc_pr": (lambda L, P, W: tf.metrics.auc(L, P, curve="PR"), 0.8824353814125061),
    "auc_pr_ci": (
        lambda L, P, W: tf.metrics.auc(L, P, curve="PR", summation_method="careful_interpolation"),
        0.8824365735054016,
    ),
    "auc_min": (lambda L, P, W: tf.metrics.auc(L, P, summation_method="minoring"), 0.79225826),
    "auc_maj": (
        lambda L, P, W: tf.metrics.auc(
            L, P, summation_method="majoring", thresholds=[0.2, 0.5, 0.7]
        ),
        0.8673409223556519,
    ),
    "tp": (lambda L, P, W: tf.metrics.true_positives(L, P > 0.5), 66.0),
    "fp_w": (lambda L, P, W: tf.metrics.false_positives(L, P > 0.5, weights=W), 9.862174987),
    "tn": (lambda L, P, W: tf.metrics.true_negatives(L, P > 0.5), 31.0),
    "fn": (lambda L, P, W: tf.metrics.false_negatives(L, P > 0.5), 31.0),
    "tp_t": (
        lambda L, P, W: tf.metrics.true_positives_at_thresholds(L, P, [0.1, 0.5, 0.9]),
        [97.0, 66.0, 12.0],
    ),
    "fn_t": (
        lambda L, P, W: tf.metrics.false_negatives_at_thresholds(L, P, [0.1, 0.5, 0.9], weights=W),
        [0.0, 12.491809844970703, 35.967830657958984],
    ),
    "tn_t": (lambda L, P, W: tf.metrics.true_negatives_at_thresholds(L, P, [0.3]), [23.0]),
    "fp_t": (
        lambda L, P, W: tf.metrics.false_positives_at_thresholds(L, P, [0.3, 0.6]),
        [30.0, 14.0],
    ),
    "prec_t": (
        lambda L, P, W: tf.metrics.precision_at_thresholds(L, P, [0.2, 0.5]),
        [0.7348484992980957, 0.75],
    ),
    "rec_t": (
        lambda L, P, W: tf.metrics.recall_at_thresholds(L, P, [0.2, 0.5], weights=W),
        [1.0, 0.7153629064559937],
    ),
    "sens": (lambda L, P, W: tf.metrics.sensitivity_at_specificity(L, P, 0.7), 0.56701028),
    "spec": (
        lambda L, P, W: tf.metrics.specificity_at_sensitivity(L, P, 0.8, num_thresholds=30),
        0.5660377144813538,
    ),
}


def _batches():
    rng = np.random.RandomState(0)
    labels = [rng.rand(50) > 0.4 for _ in range(3)]
    preds = [np.clip(lb * 0.3 + rng.rand(50) * 0.7, 0, 1).astype(np.float32) for lb in labels]
    weights = [rng.rand(50).astype(np.float32) for _ in range(3)]
    return list(zip(labels, preds, weights))


def test_threshold_metrics_stream_tensorflows_values():
    L = tf.placeholder(tf.bool, [None])
    P = tf.placeholder(tf.float32, [None])
    W = tf.placeholder(tf.float32, [None])
    metrics = {name: build(L, P, W) for name, (build, _) in _CASES.items()}
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        for labels, preds, weights in _batches():
            updates = sess.run(
                {k: m[1] for k, m in metrics.items()}, {L: labels, P: preds, W: weights}
            )
        values = sess.run({k: m[0] for k, m in metrics.items()})
    for name, (_, expected) in _CASES.items():
        np.testing.assert_allclose(values[name], expected, rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(updates[name], expected, rtol=1e-5, atol=1e-6, err_msg=name)


def test_auc_variables_are_local_metric_variables_and_errors():
    labels = tf.constant([True, False])
    preds = tf.constant([0.8, 0.3])
    tf.metrics.auc(labels, preds, num_thresholds=10)
    names = [v.op.name for v in tf.local_variables()]
    assert names == [
        f"auc/{n}"
        for n in ("true_positives", "false_negatives", "true_negatives", "false_positives")
    ]
    assert tf.global_variables() == []
    with pytest.raises(ValueError, match="summation_method"):
        tf.metrics.auc(labels, preds, summation_method="simpson")
    with pytest.raises(ValueError, match="curve"):
        tf.metrics.auc(labels, preds, curve="XY")
    with pytest.raises(ValueError, match="specificity"):
        tf.metrics.sensitivity_at_specificity(labels, preds, 1.5)


def test_predictions_outside_unit_interval_fail_the_assert():
    _, update = tf.metrics.auc(tf.constant([True]), tf.constant([1.5]))
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        with pytest.raises(errors.InvalidArgumentError, match=r"\[0, 1\]"):
            sess.run(update)


def test_confusion_matrix_matches_tensorflow():
    cm = tf.confusion_matrix(
        [1, 2, 4, 2], [2, 2, 4, 0], weights=[1.0, 2.0, 3.0, 4.0], dtype=tf.float32
    )
    counts = tf.math.confusion_matrix([0, 1, 1], [0, 1, 0], num_classes=3)
    with tf.Session() as sess:
        got, got_counts = sess.run([cm, counts])
    expected = np.zeros((5, 5), np.float32)
    expected[1, 2], expected[2, 0], expected[2, 2], expected[4, 4] = 1, 4, 2, 3
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got_counts, [[1, 0, 0], [1, 1, 0], [0, 0, 0]])
    assert got_counts.dtype == np.int32


def test_confusion_matrix_label_out_of_range_is_an_invalid_argument():
    cm = tf.confusion_matrix([0, 3], [0, 1], num_classes=3)
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="labels"):
        sess.run(cm)
    negative = tf.confusion_matrix([0, -1], [0, 1])
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="negative"):
        sess.run(negative)

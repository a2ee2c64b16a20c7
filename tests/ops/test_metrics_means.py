"""tf.metrics built on means and confusion matrices, against values recorded from TensorFlow
2.21's tf.compat.v1 on the same three batches (and NumPy references where they are simple)."""

import numpy as np

import flowgraph as tf

# name -> (builder over (labels, predictions, y, p, normalizer, w, w2), TensorFlow's final value)
_SCALARS = {
    "mre": (lambda a: tf.metrics.mean_relative_error(a[2], a[3], a[4]), 1.0089887380599976),
    "mre_w": (
        lambda a: tf.metrics.mean_relative_error(a[2], a[3], a[4], weights=a[5]),
        1.0841341018676758,
    ),
    "rmse": (lambda a: tf.metrics.root_mean_squared_error(a[2], a[3]), 1.4903614521026611),
    "rmse_w": (
        lambda a: tf.metrics.root_mean_squared_error(a[2], a[3], weights=a[5]),
        1.6335269212722778,
    ),
    "mcd": (
        lambda a: tf.metrics.mean_cosine_distance(_unit(a[2]), _unit(a[3]), dim=1),
        1.166685700416565,
    ),
    "mcd_w": (
        lambda a: tf.metrics.mean_cosine_distance(_unit(a[2]), _unit(a[3]), 1, weights=a[5]),
        1.317925214767456,
    ),
    "pb": (lambda a: tf.metrics.percentage_below(a[2], 0.3), 0.5),
    "pb_w": (lambda a: tf.metrics.percentage_below(a[2], 0.3, weights=a[5]), 0.5063090920448303),
    "iou": (lambda a: tf.metrics.mean_iou(a[0], a[1], 4), 0.16736388206481934),
    "iou_w": (lambda a: tf.metrics.mean_iou(a[0], a[1], 5, weights=a[6]), 0.18541228771209717),
    "mpca": (lambda a: tf.metrics.mean_per_class_accuracy(a[0], a[1], 4), 0.2777777910232544),
    "mpca_w": (
        lambda a: tf.metrics.mean_per_class_accuracy(a[0], a[1], 5, weights=a[6]),
        0.24791888892650604,
    ),
}


def _unit(x):
    return tf.nn.l2_normalize(x, 1)


def _batches():
    rng = np.random.RandomState(1)
    batches = []
    for _ in range(3):
        lab, pred = rng.randint(0, 4, size=(6, 2)), rng.randint(0, 4, size=(6, 2))
        y, p = rng.randn(6, 3).astype(np.float32), rng.randn(6, 3).astype(np.float32)
        nrm = np.where(rng.rand(6, 3) > 0.3, rng.rand(6, 3) + 0.5, 0).astype(np.float32)
        w, w2 = rng.rand(6, 1).astype(np.float32), rng.rand(6, 2).astype(np.float32)
        batches.append((lab, pred, y, p, nrm, w, w2))
    return batches


def _placeholders():
    shapes = [[6, 2], [6, 2], [6, 3], [6, 3], [6, 3], [6, 1], [6, 2]]
    kinds = [tf.int32, tf.int32] + [tf.float32] * 5
    return [tf.placeholder(k, s) for k, s in zip(kinds, shapes)]


def test_mean_metrics_stream_tensorflows_values():
    args = _placeholders()
    metrics = {name: build(args) for name, (build, _) in _SCALARS.items()}
    metrics["mt"] = tf.metrics.mean_tensor(args[2])
    metrics["mt_w"] = tf.metrics.mean_tensor(args[2], weights=args[5])
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        before = sess.run({k: m[0] for k, m in metrics.items()})
        for batch in _batches():
            updates = sess.run({k: m[1] for k, m in metrics.items()}, dict(zip(args, batch)))
        values = sess.run({k: m[0] for k, m in metrics.items()})
    for name, (_, expected) in _SCALARS.items():
        np.testing.assert_allclose(values[name], expected, rtol=1e-5, err_msg=name)
        assert before[name] == (1.0 if name.startswith("mcd") else 0.0), name
    ys = np.stack([b[2] for b in _batches()])
    ws = np.stack([np.broadcast_to(b[5], (6, 3)) for b in _batches()])
    np.testing.assert_allclose(values["mt"], ys.mean(0), rtol=1e-5)
    np.testing.assert_allclose(values["mt_w"], (ys * ws).sum(0) / ws.sum(0), rtol=1e-5)
    np.testing.assert_allclose(updates["mt"], values["mt"])
    # mean_iou's update is the confusion matrix (float64), mean_per_class_accuracy's the
    # per-class accuracies, as TensorFlow's
    cm = updates["iou"]
    assert cm.dtype == np.float64 and cm.shape == (4, 4)
    labels = np.concatenate([b[0].ravel() for b in _batches()])
    preds = np.concatenate([b[1].ravel() for b in _batches()])
    np.testing.assert_array_equal(cm, np.histogram2d(labels, preds, bins=4, range=[[0, 4]] * 2)[0])
    np.testing.assert_allclose(
        updates["mpca"], [0.2222222238779068, 0.5, 0.1666666716337204, 0.2222222238779068]
    )
    assert updates["mpca_w"].shape == (5,) and updates["mpca_w"][4] == 0.0


def test_variable_names_match_tensorflows():
    args = _placeholders()
    for build, _ in _SCALARS.values():
        build(args)
    tf.metrics.mean_tensor(args[2])
    names = sorted(v.op.name for v in tf.get_collection(tf.GraphKeys.METRIC_VARIABLES))
    assert names[:3] == ["mean/count_tensor", "mean/total_tensor", "mean_accuracy/count"]
    assert "mean_iou_1/total_confusion_matrix" in names
    assert "percentage_below_threshold_1/total" in names
    assert "root_mean_squared_error/count" in names and len(names) == 24

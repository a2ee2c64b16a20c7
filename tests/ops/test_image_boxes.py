"""Non-maximum suppression: indices recorded from TensorFlow 2.21 on random boxes (flipped
corners and tied scores included), and a plain greedy reference in Python."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors


def _data():
    rng = np.random.RandomState(0)
    corner = rng.rand(40, 2).astype(np.float32)
    size = rng.rand(40, 2).astype(np.float32) * 0.4
    boxes = np.concatenate([corner, corner + size], 1)
    boxes[3] = boxes[3][[2, 3, 0, 1]]  # corners given the other way round
    scores = rng.rand(40).astype(np.float32)
    scores[5] = scores[6]
    return boxes, scores, rng.rand(40, 40).astype(np.float32)


def _greedy(boxes, scores, limit, threshold, score_threshold=-np.inf):
    def iou(a, b):
        ya, xa = sorted(a[::2]), sorted(a[1::2])
        yb, xb = sorted(b[::2]), sorted(b[1::2])
        inter = max(0, min(ya[1], yb[1]) - max(ya[0], yb[0])) * max(
            0, min(xa[1], xb[1]) - max(xa[0], xb[0])
        )
        union = (ya[1] - ya[0]) * (xa[1] - xa[0]) + (yb[1] - yb[0]) * (xb[1] - xb[0]) - inter
        return inter / union

    order = sorted(
        (i for i in range(len(scores)) if scores[i] > score_threshold),
        key=lambda i: (-scores[i], i),
    )
    kept = []
    for i in order:
        if len(kept) < limit and all(iou(boxes[i], boxes[j]) <= threshold for j in kept):
            kept.append(i)
    return kept


def test_non_max_suppression_matches_tensorflow_and_a_reference():
    boxes, scores, overlaps = _data()
    ops = {
        "a": tf.image.non_max_suppression(boxes, scores, 10),
        "b": tf.image.non_max_suppression(boxes, scores, 50, 0.2, score_threshold=0.3),
        "p": tf.image.non_max_suppression_padded(
            boxes, scores, 30, 0.1, pad_to_max_output_size=True
        ),
        "w": tf.image.non_max_suppression_with_scores(boxes, scores, 7, 0.3),
        "o": tf.image.non_max_suppression_overlaps(overlaps, scores, 10, 0.6),
    }
    assert ops["p"][0].shape.as_list() == [30] and ops["a"].shape.as_list() == [None]
    with tf.Session() as sess:
        got = sess.run(ops)
    assert got["a"].tolist() == [4, 33, 24, 17, 3, 14, 34, 28, 8, 2]  # TensorFlow's
    assert got["a"].tolist() == _greedy(boxes, scores, 10, 0.5)
    assert got["b"].tolist() == _greedy(boxes, scores, 50, 0.2, 0.3)
    indices, valid = got["p"]
    assert valid == 21 and indices[21:].tolist() == [0] * 9
    assert indices[:21].tolist() == _greedy(boxes, scores, 30, 0.1)
    kept, kept_scores = got["w"]
    assert kept.tolist() == [4, 33, 24, 17, 3, 14, 34]
    np.testing.assert_array_equal(kept_scores, scores[kept])
    assert got["o"].tolist() == [4, 24, 2, 18, 0, 7]  # TensorFlow's (overlaps[candidate, kept])


def test_errors():
    boxes, scores, _ = _data()
    with pytest.raises(ValueError, match="4 coordinates"):
        tf.image.non_max_suppression(boxes[:, :3], scores, 3)
    bad = tf.image.non_max_suppression(boxes, scores, 3, iou_threshold=1.5)
    soft = tf.image.non_max_suppression_with_scores(boxes, scores, 3, soft_nms_sigma=0.5)
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="iou_threshold"):
            sess.run(bad)
        with pytest.raises(errors.UnimplementedError, match="Soft-NMS"):
            sess.run(soft)

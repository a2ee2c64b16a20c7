"""More regression tests for issue 7, defects 14 and 20 (beyond tests/ops/test_wild_defects.py):
broadcast labels and their gradient, static shapes and the moved class axis of the dense
cross-entropy, float16 losses, and TF's error classes for out-of-range axes. Expected values are
NumPy's."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors


def _xent(labels, logits, axis=-1):
    z = logits - logits.max(axis=axis, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=axis, keepdims=True))
    return -(labels * log_p).sum(axis=axis)


def _one_hot(rows, classes=7):
    return np.eye(classes, dtype=np.float32)[rows]


@pytest.mark.parametrize(
    "fn", [tf.nn.softmax_cross_entropy_with_logits, tf.nn.softmax_cross_entropy_with_logits_v2]
)
def test_labels_wrapped_in_a_list_broadcast_against_logits(fn):
    """Defect 14: labels (1, ?, 7) from `tf.stop_gradient([y])` against logits (?, 7)."""
    x = tf.placeholder(tf.float32, [None, 7])
    y = tf.placeholder(tf.float32, [None, 7])
    loss = fn(labels=tf.stop_gradient([y]), logits=x)
    assert loss.shape.as_list() == [None]
    (grad,) = tf.gradients(tf.reduce_sum(loss), [x])
    xv = np.random.RandomState(0).randn(3, 7).astype(np.float32)
    yv = _one_hot([1, 2, 3])
    with tf.Session() as s:
        got, g = s.run([loss, grad], {x: xv, y: yv})
        np.testing.assert_allclose(got, _xent(yv, xv), rtol=1e-5)
        p = np.exp(xv) / np.exp(xv).sum(1, keepdims=True)
        np.testing.assert_allclose(g, p - yv, rtol=1e-5, atol=1e-6)
        # One row of labels broadcasts against every row of logits, as the kernel does.
        got = s.run(loss, {x: xv, y: yv[:1]})
        np.testing.assert_allclose(got, _xent(np.repeat(yv[:1], 3, 0), xv), rtol=1e-5)


def test_dense_xent_keeps_static_outer_dims_and_moves_the_class_axis():
    """Static shapes survive the reshapes; a non-last axis is moved to the end (the other
    dims keep their order, as TF's _move_dim_to_end), with unknown rank too."""
    rng = np.random.RandomState(2)
    xv = rng.randn(2, 5, 3, 4).astype(np.float32)
    yv = rng.rand(2, 5, 3, 4).astype(np.float32)
    x3 = tf.placeholder(tf.float32, [None, None, 7])
    assert tf.nn.softmax_cross_entropy_with_logits_v2(labels=x3, logits=x3).shape.as_list() == [
        None,
        None,
    ]
    static = tf.nn.softmax_cross_entropy_with_logits_v2(labels=yv, logits=xv, axis=1)
    assert static.shape.as_list() == [2, 3, 4]
    x, y = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    dynamic = tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=x, axis=1)
    with tf.Session() as s:
        want = _xent(yv, xv, axis=1)
        np.testing.assert_allclose(s.run(static), want, rtol=1e-5)
        np.testing.assert_allclose(s.run(dynamic, {x: xv, y: yv}), want, rtol=1e-5)


def test_float16_xent_is_computed_in_float32():
    xv = np.array([[10.0, 0.0, -10.0]], np.float16)
    yv = np.array([[0.0, 0.0, 1.0]], np.float16)
    loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=yv, logits=xv)
    assert loss.dtype == tf.float16
    with tf.Session() as s:
        np.testing.assert_allclose(s.run(loss), _xent(yv.astype(np.float32), xv), rtol=1e-3)


def test_softmax_axis_out_of_range_is_invalid_argument():
    """Defect 20: TF1 raises InvalidArgumentError at construction for a known bad axis, and
    when the graph runs for a tensor one."""
    x = tf.placeholder(tf.float32, [2, 3, 4])
    with pytest.raises(errors.InvalidArgumentError, match="must be in the range"):
        tf.nn.softmax(x, axis=5)
    with pytest.raises(errors.InvalidArgumentError, match="must be in the range"):
        tf.nn.log_softmax(x, axis=tf.constant(-4))
    y = tf.nn.softmax(x, axis=tf.placeholder_with_default(3, []))
    with tf.Session() as s, pytest.raises(errors.InvalidArgumentError, match="range"):
        s.run(y, {x: np.ones((2, 3, 4))})


def test_reverse_checks_constant_axes_at_construction():
    p = tf.zeros([2, 3, 4])
    for axes in ([5], [1, -2]):
        with pytest.raises(ValueError):
            tf.reverse(p, axes)
    assert tf.reverse(p, [0, -1]).shape.as_list() == [2, 3, 4]

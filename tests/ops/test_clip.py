"""Clipping ops against NumPy: values, norms over axes, global norms (None entries and
IndexedSlices), average norms, and TF's error cases."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.framework.indexed_slices import IndexedSlices
from flowgraph.testing.op_test import check_op

RNG = np.random.RandomState(0)
FLOATS = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", FLOATS + [np.int32, np.int64])
def test_clip_by_value_scalar_bounds(dtype):
    x = (RNG.randn(3, 4) * 5).astype(dtype)
    check_op(
        lambda t: tf.clip_by_value(t, dtype(-2), dtype(3)),
        [x],
        lambda t: np.clip(t, -2, 3).astype(dtype),
    )


@pytest.mark.parametrize("dtype", FLOATS)
def test_clip_by_value_broadcast_bounds(dtype):
    x = (RNG.randn(3, 4) * 3).astype(dtype)
    lo, hi = np.array([-1, -2, -3, -4], dtype), np.array([[0.5], [1], [2]], dtype)
    check_op(tf.clip_by_value, [x, lo, hi], lambda t, a, b: np.maximum(np.minimum(t, b), a))


def test_clip_by_value_may_not_enlarge_t():
    with pytest.raises(ValueError):
        tf.clip_by_value(tf.constant([1.0, 2.0, 3.0]), tf.zeros([2, 3]), 1.0)


def test_clip_by_value_names_and_indexed_slices():
    out = tf.clip_by_value(tf.constant([1.0, 5.0]), 0.0, 2.0)
    assert out.op.name == "clip_by_value" and out.op.type == "Maximum"
    slices = IndexedSlices(tf.constant([[1.0, -5.0]]), tf.constant([3]), tf.constant([4, 2]))
    clipped = tf.clip_by_value(slices, -1.0, 1.0)
    assert isinstance(clipped, IndexedSlices) and clipped.indices is slices.indices
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(clipped.values), [[1.0, -1.0]])


def _clip_norm_ref(t, clip, axes=None):
    norm = np.sqrt(np.sum(t * t, axis=axes, keepdims=True))
    return (t * clip / np.maximum(norm, clip)).astype(t.dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axes", [None, [1], [0, 1]])
def test_clip_by_norm(dtype, axes):
    x = (RNG.randn(3, 4) * 2).astype(dtype)
    x[1] *= 0.01  # one row under the clip norm, the others above
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    check_op(
        lambda t: tf.clip_by_norm(t, 1.5, axes=axes),
        [x],
        lambda t: _clip_norm_ref(t, dtype(1.5), None if axes is None else tuple(axes)),
        rtol=rtol,
    )


def test_clip_by_norm_of_zero_has_finite_values_and_gradient():
    x = tf.constant([[0.0, 0.0], [3.0, 4.0]])
    clipped = tf.clip_by_norm(x, 1.0, axes=[1])
    (grad,) = tf.gradients(tf.reduce_sum(clipped), [x])
    with tf.Session() as sess:
        value, g = sess.run([clipped, grad])
    np.testing.assert_allclose(value, [[0, 0], [0.6, 0.8]], rtol=1e-6)
    assert np.all(np.isfinite(g))


def test_clip_by_norm_indexed_slices():
    slices = IndexedSlices(tf.constant([[3.0, 4.0]]), tf.constant([1]), tf.constant([3, 2]))
    clipped = tf.clip_by_norm(slices, 2.5)
    assert isinstance(clipped, IndexedSlices)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(clipped.values), [[1.5, 2.0]], rtol=1e-6)


def test_global_norm_skips_none_and_reads_slices():
    a, b = RNG.randn(3, 2).astype(np.float32), RNG.randn(4).astype(np.float32)
    slices = IndexedSlices(tf.constant(b.reshape(2, 2)), tf.constant([0, 2]), tf.constant([5, 2]))
    norm = tf.global_norm([tf.constant(a), None, slices])
    assert norm.op.name == "global_norm/global_norm"
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(norm), np.sqrt(np.sum(a**2) + np.sum(b**2)), rtol=1e-6)
    with pytest.raises(TypeError, match="sequence"):
        tf.global_norm(tf.constant([1.0]))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("clip_norm", [0.5, 100.0])
def test_clip_by_global_norm(dtype, clip_norm):
    a, b = RNG.randn(3, 2).astype(dtype), RNG.randn(4).astype(dtype)
    slices = IndexedSlices(tf.constant(b.reshape(2, 2)), tf.constant([0, 2]), tf.constant([5, 2]))
    clipped, norm = tf.clip_by_global_norm([tf.constant(a), None, slices], clip_norm)
    assert clipped[1] is None and isinstance(clipped[2], IndexedSlices)
    assert clipped[0].op.name == "clip_by_global_norm/clip_by_global_norm/_0"
    want_norm = np.sqrt(np.sum(a.astype(np.float64) ** 2) + np.sum(b.astype(np.float64) ** 2))
    scale = clip_norm / max(want_norm, clip_norm)
    with tf.Session() as sess:
        got_a, got_b, got_norm = sess.run([clipped[0], clipped[2].values, norm])
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    assert got_a.dtype == dtype and got_norm.dtype == dtype
    np.testing.assert_allclose(got_norm, want_norm, rtol=rtol)
    np.testing.assert_allclose(got_a, a * scale, rtol=rtol)
    np.testing.assert_allclose(got_b, b.reshape(2, 2) * scale, rtol=rtol)


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # inf - inf is the intended NaN
def test_clip_by_global_norm_use_norm_and_non_finite():
    t = tf.constant([3.0, 4.0])
    (given,), _norm = tf.clip_by_global_norm([t], 1.0, use_norm=tf.constant(10.0))
    (poisoned,), _ = tf.clip_by_global_norm([t], 1.0, use_norm=tf.constant(np.inf, tf.float32))
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(given), [0.3, 0.4], rtol=1e-6)
        assert np.all(np.isnan(sess.run(poisoned)))
    with pytest.raises(TypeError, match="sequence"):
        tf.clip_by_global_norm("abc", 1.0)


def test_clip_by_average_norm():
    x = RNG.randn(3, 4).astype(np.float32)

    def ref(t):
        l2 = np.sqrt(np.sum(t * t))
        return (t * 0.1 / max(l2 / t.size, 0.1)).astype(np.float32)

    check_op(lambda t: tf.clip_by_average_norm(t, 0.1), [x], ref, rtol=1e-5)
    small = (x * 1e-3).astype(np.float32)
    check_op(lambda t: tf.clip_by_average_norm(t, 0.1), [small], lambda t: t, rtol=1e-5)

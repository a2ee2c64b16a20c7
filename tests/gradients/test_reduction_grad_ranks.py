"""Gradients of every reduction on ranks 0 to 4, with axis=None, negative axes, several axes and
keepdims, against numeric Jacobians; the same graphs with shapes unknown until run time give the
same gradients (the dynamic-shape path); zero-size dimensions give empty gradients."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.testing.gradient_checker import check_gradients

SHAPES = {0: (), 1: (3,), 2: (2, 3), 3: (2, 1, 3), 4: (2, 1, 3, 2)}
REDUCTIONS = {
    "sum": tf.reduce_sum,
    "mean": tf.reduce_mean,
    "max": tf.reduce_max,
    "min": tf.reduce_min,
    "prod": tf.reduce_prod,
    "logsumexp": tf.reduce_logsumexp,
}


def _axes(rank):
    out = [None]
    if rank:
        out += [-1, [0, -1] if rank > 1 else [0]]
    return out


def _input(rank):
    n = int(np.prod(SHAPES[rank], dtype=np.int64))
    # Distinct, non-zero, well separated values: no ties for max/min, no zero for prod.
    vals = 0.5 + np.random.RandomState(rank).permutation(n) * 0.25
    return vals.reshape(SHAPES[rank]).astype(np.float64)


@pytest.mark.parametrize("rank", sorted(SHAPES))
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_gradient_matches_numeric_jacobian(name, rank):
    fn = REDUCTIONS[name]
    x = _input(rank)
    for axis in _axes(rank):
        for keepdims in (False, True):
            check_gradients(lambda t, a=axis, k=keepdims: fn(t, axis=a, keepdims=k), [x])


@pytest.mark.parametrize("rank", sorted(SHAPES))
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_gradient_with_unknown_shape_equals_static(name, rank):
    fn = REDUCTIONS[name]
    x = _input(rank)
    for axis in _axes(rank):
        for keepdims in (False, True):
            tf.reset_default_graph()
            static = tf.placeholder(tf.float64, x.shape)
            dynamic = tf.placeholder(tf.float64, None)
            grads = [
                tf.gradients(fn(p * p, axis=axis, keepdims=keepdims), p)[0]
                for p in (static, dynamic)
            ]
            with tf.Session() as s:
                got = s.run(grads, {static: x, dynamic: x})
            np.testing.assert_allclose(got[1], got[0], rtol=1e-12)


def test_scalar_variable_mean_max_prod_gradients():
    """Issue 7 defect 18: reductions of a rank-0 value (Tshape got float32; prod divided ints)."""
    v = tf.Variable(3.0)
    fns = (tf.reduce_mean, tf.reduce_max, tf.reduce_prod, tf.reduce_sum, tf.reduce_min)
    grads = [tf.gradients(f(v * v), [v])[0] for f in fns]
    with tf.Session() as s:
        s.run(v.initializer)
        assert s.run(grads) == [6.0] * 5


@pytest.mark.parametrize("fn", [tf.reduce_sum, tf.reduce_mean, tf.reduce_prod])
def test_zero_size_dimension_gradients_are_empty(fn):
    x = tf.placeholder_with_default(np.zeros((0, 3), np.float32), [0, 3])
    d = tf.placeholder_with_default(np.zeros((0, 3), np.float32), None)
    with tf.Session() as s:
        for t in (x, d):
            g = s.run(tf.gradients(fn(t, [1]), t)[0])
            assert g.shape == (0, 3) and g.dtype == np.float32


def test_empty_list_takes_the_ops_input_type():
    """Issue 7 defect 22: `tf.reduce_all([], [0])` is an empty bool tensor (True), and the
    gradient of a Tile by an empty multiples list works on a scalar."""
    x = tf.constant(2.0)
    with tf.Session() as s:
        assert s.run(tf.reduce_all([], [0])) is np.True_
        assert s.run(tf.reduce_any([], [0])) is np.False_
        assert s.run(tf.gradients(tf.tile(tf.reshape(x, [1]), [3]), x)[0]) == 3.0
        assert s.run(tf.gradients(tf.tile(x, tf.constant([], tf.int32)), x)[0]) == 1.0
    with pytest.raises(TypeError):
        tf.reduce_all(tf.constant([1.0]))

"""Regression tests for defects TF1 programs from the wild found (issue 7): each case was observed
on the landed code and is checked against what TensorFlow does."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors


@pytest.mark.parametrize("fn", [tf.assign_add, tf.assign_sub])
@pytest.mark.parametrize("use_resource", [False, True])
def test_assign_add_sub_never_broadcast_the_value(fn, use_resource):
    """Defect 4: a [1] value into a [3] variable is an error, at construction when the value's
    shape is known and at run time when it is not (TF: ValueError / InvalidArgumentError)."""
    v = tf.get_variable("v", initializer=tf.constant([1.0, 2.0, 3.0]), use_resource=use_resource)
    with pytest.raises(ValueError):
        fn(v, tf.constant([1.0]))
    p = tf.placeholder(tf.float32)
    update = fn(v, p)
    with tf.Session() as s:
        s.run(v.initializer)
        with pytest.raises(errors.InvalidArgumentError, match="shape"):
            s.run(update, {p: [1.0]})
        s.run(update, {p: [1.0, 1.0, 1.0]})
        want = [2.0, 3.0, 4.0] if fn is tf.assign_add else [0.0, 1.0, 2.0]
        np.testing.assert_array_equal(s.run(v.read_value()), want)


def test_exclusive_case_with_several_predicates():
    """Defect 5: exclusive=True counted the true predicates with a missing math function."""
    x = tf.placeholder(tf.int32, [])
    r = tf.case(
        [(x > 0, lambda: tf.constant(1)), (x < 0, lambda: tf.constant(-1))],
        default=lambda: tf.constant(0),
        exclusive=True,
    )
    both = tf.case(
        [(x > 0, lambda: tf.constant(1)), (x > 1, lambda: tf.constant(2))],
        default=lambda: tf.constant(0),
        exclusive=True,
    )
    with tf.Session() as s:
        assert [s.run(r, {x: v}) for v in (3, -3, 0)] == [1, -1, 0]
        assert s.run(both, {x: 1}) == 1
        with pytest.raises(errors.InvalidArgumentError, match="More than one condition"):
            s.run(both, {x: 2})


def test_float_range_counts_in_its_dtype():
    """Defect 7: float32 (0.3 - 0) / 0.1 is 3.0 in float32, so range(0., .3, .1) has 3 elements,
    statically and at run time (as in TF); float64 endpoints that are float32 values give 4."""
    r = tf.range(0.0, 0.3, 0.1)
    assert r.shape.as_list() == [3]
    p = tf.placeholder(tf.float32, [])
    dynamic = tf.range(0.0, p, 0.1)
    d64 = tf.range(tf.constant(0.0, tf.float64), tf.constant(np.float64(np.float32(0.3))), 0.1)
    with tf.Session() as s:
        np.testing.assert_allclose(s.run(r), [0.0, 0.1, 0.2])
        assert s.run(dynamic, {p: 0.3}).shape == (3,)
        assert s.run(d64).shape == (4,)
        assert d64.shape.as_list() == [4]


def test_arg_reductions_never_pick_nan():
    """Defect 12: TF's ArgMax/ArgMin skip NaN (an all-NaN row gives 0); Max/Min propagate it."""
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, 1.0], [5.0, 4.0, np.nan]])
    rows = np.array([[np.nan, np.nan], [-np.inf, np.nan], [np.nan, 2.0]])
    with tf.Session() as s:
        for dtype in (np.float16, np.float32, np.float64):
            t = tf.constant(x.astype(dtype))
            assert s.run(tf.argmax(t, 1)).tolist() == [2, 2, 0]
            assert s.run(tf.argmin(t, 1)).tolist() == [0, 2, 1]
            assert s.run(tf.argmax(t, 0)).tolist() == [2, 2, 0]
            assert s.run(tf.argmax(tf.constant(rows.astype(dtype)), 1)).tolist() == [0, 0, 1]
            assert s.run(tf.argmin(tf.constant(-rows.astype(dtype)), 1)).tolist() == [0, 0, 1]
            assert np.isnan(s.run(tf.reduce_max(t, 1))).tolist() == [True, True, True]
            assert np.isnan(s.run(tf.reduce_min(t))).item()
            assert np.isnan(s.run(tf.maximum(t, 0.0))).sum() == 4


def test_top_k_ranks_nan_last_and_agrees_with_argmax():
    """Defect 12: TF's top_k has no defined order for NaN (its sort comparator breaks on NaN);
    ours ranks NaN below every number, stable, so top_k(x, 1) is argmax(x)."""
    x = np.array([[1.0, np.nan, 3.0, np.nan, 2.0, -np.inf, 5.0], [np.nan, 1.0, 0.0, 0, 0, 0, 0]])
    values, indices = tf.nn.top_k(tf.constant(x, tf.float32), 7)
    top1 = tf.nn.top_k(tf.constant(x, tf.float32), 1).indices
    with tf.Session() as s:
        v, i = s.run([values, indices])
        assert i.tolist() == [[6, 2, 4, 0, 5, 1, 3], [1, 2, 3, 4, 5, 6, 0]]
        np.testing.assert_array_equal(v, np.take_along_axis(x, i, 1).astype(np.float32))
        assert s.run(top1)[:, 0].tolist() == s.run(tf.argmax(x, 1)).tolist()

"""Reductions that end a fused cluster (whitepaper §10): Sum, Mean, Prod, Max and Min over
constant axes of an element-wise expression are accumulated by the cluster's loop. Every case
runs fused and unfused: the same shapes and dtypes, values within floating-point tolerance
(the fused loop sums floats in float64, the unfused kernel pairwise in their own type), the
same errors."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors

DTYPES = [np.float32, np.float64, np.int32, np.int64]
REDUCE = {
    "Sum": tf.reduce_sum,
    "Mean": tf.reduce_mean,
    "Prod": tf.reduce_prod,
    "Max": tf.reduce_max,
    "Min": tf.reduce_min,
}
AXES = [None, 0, 1, -1, [0, 2], [2, 0, 1]]


def _unjit():
    for op in tf.get_default_graph().get_operations():
        if "_XlaCompile" in op.node_def.attr:
            op._set_attr("_XlaCompile", False)


def _run_both(fetches, feeds):
    """(fused values, unfused values, op types of the fused run)."""
    with tf.Session() as s:
        md = tf.RunMetadata()
        fused = s.run(fetches, feeds, tf.RunOptions(output_partition_graphs=True), md)
    _unjit()
    with tf.Session() as s:
        unfused = s.run(fetches, feeds)
    return fused, unfused, [n.op for g in md.partition_graphs for n in g.node]


def _same(fused, unfused, scale=1.0):
    for a, b in zip(fused, unfused):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * scale, equal_nan=True)
        else:
            np.testing.assert_array_equal(a, b)


def _values(dtype, shape, low=-3, high=3):
    rng = np.random.RandomState(0)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, shape).astype(dtype)
    return rng.randint(low, high + 1, shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(REDUCE))
def test_every_reduction_over_every_axes_matches_unfused(op, dtype):
    x = tf.placeholder(dtype, [3, 4, 5])
    with tf.xla.experimental.jit_scope():
        y = x * tf.constant(2, dtype) - tf.constant(1, dtype)
        outs = [REDUCE[op](y, axis=a, keepdims=k) for a in AXES for k in (False, True)]
    # products of values in [-1, 1] stay in range
    feed = _values(dtype, (3, 4, 5), 0, 1) if op == "Prod" else _values(dtype, (3, 4, 5))
    fused, unfused, ops = _run_both(outs, {x: feed})
    _same(fused, unfused, scale=np.abs(feed).sum() if op != "Prod" else 1.0)
    assert ops.count("_FusedElementwise") == 1 and op not in ops


def test_a_reduction_of_a_broadcast_expression_and_its_input_share_one_loop():
    a = tf.placeholder(tf.float32, [6, 1])
    b = tf.placeholder(tf.float32, [7])
    with tf.xla.experimental.jit_scope():
        y = tf.tanh(a * b + 0.5)
        rows, total = tf.reduce_sum(y, 1), tf.reduce_mean(y)
    feeds = {a: _values(np.float32, (6, 1)), b: _values(np.float32, (7,))}
    fused, unfused, ops = _run_both([y, rows, total], feeds)
    _same(fused, unfused, scale=42.0)
    assert "Sum" not in ops and "Mean" not in ops and "Tanh" not in ops


def test_large_reductions_keeping_or_reducing_the_row_dimension():
    """Rows kept: an accumulator per row; rows reduced: one accumulator (in lanes when the
    loop is flat) or one per column."""
    x = tf.placeholder(tf.float32, [512, 300])
    with tf.xla.experimental.jit_scope():
        y = x * x + 1.0
        outs = [tf.reduce_sum(y, 1), tf.reduce_sum(y, 0), tf.reduce_sum(y), tf.reduce_max(y, 0)]
    feed = _values(np.float32, (512, 300))
    fused, unfused, ops = _run_both(outs, {x: feed})
    _same(fused, unfused, scale=600_000.0)
    assert ops.count("_FusedElementwise") == 1


def test_integer_sums_wrap_and_integer_means_truncate_as_unfused():
    x = tf.placeholder(tf.int32, [2, 3])
    with tf.xla.experimental.jit_scope():
        y = x * 2
        outs = [tf.reduce_sum(y, 1), tf.reduce_mean(y - 7, 1), tf.reduce_prod(y, 0)]
    feed = np.array([[2**30, 2**30, 3], [-1, -2, -4]], np.int32)
    fused, unfused, ops = _run_both(outs, {x: feed})
    _same(fused, unfused)
    assert "Sum" not in ops


def test_nan_wins_max_and_min_as_unfused():
    x = tf.placeholder(tf.float32, [2, 3])
    with tf.xla.experimental.jit_scope():
        y = x * 1.5  # (x + 0.0 would be simplified away)
        outs = [tf.reduce_max(y, 1), tf.reduce_min(y, 1), tf.reduce_sum(y, 1)]
    feed = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, -0.0]], np.float32)
    fused, unfused, ops = _run_both(outs, {x: feed})
    _same(fused, unfused)
    assert "Max" not in ops


@pytest.mark.parametrize("op", ["Max", "Min", "Sum"])
def test_whole_reductions_find_the_extreme_or_nan_in_any_lane(op):
    """A whole reduction of a flat loop runs 8 accumulator lanes and combines them: the
    extreme value (or a NaN) may sit in any lane, or in the rows left over."""
    x = tf.placeholder(tf.float32, [19])
    with tf.xla.experimental.jit_scope():
        out = REDUCE[op](x * 2.0)
    for special in (100.0, -100.0, np.nan):
        for at in range(19):
            feed = np.linspace(-1, 1, 19).astype(np.float32)
            feed[at] = special
            fused, unfused, ops = _run_both(out, {x: feed})
            _same([fused], [unfused])
            for o in tf.get_default_graph().get_operations():  # jit again for the next case
                if "_XlaCompile" in o.node_def.attr:
                    o._set_attr("_XlaCompile", True)
    assert op not in ops


def test_empty_and_one_element_reductions_match_unfused():
    x = tf.placeholder(tf.float32, [None, 3])
    with tf.xla.experimental.jit_scope():
        y = x * 2.0
        outs = [tf.reduce_sum(y, 0), tf.reduce_mean(y, 0), tf.reduce_max(y, 0, keepdims=True)]
        outs.append(tf.reduce_prod(y))
    for rows in (0, 1):
        fused, unfused, _ = _run_both(outs, {x: np.ones((rows, 3), np.float32)})
        _same(fused, unfused)
        for op in tf.get_default_graph().get_operations():  # jit again for the next shape
            if "_XlaCompile" in op.node_def.attr:
                op._set_attr("_XlaCompile", True)


def test_axes_the_kernel_rejects_fail_as_unfused():
    x = tf.placeholder(tf.float32)  # rank unknown until run: the axes are checked then
    with tf.xla.experimental.jit_scope():
        y = tf.exp(x) * 2.0
        bad, dup = tf.reduce_sum(y, 1), tf.reduce_max(y, [0, -1])
    messages = []
    for jit in (True, False):
        if not jit:
            _unjit()
        with tf.Session() as s:
            for out, feed in ((bad, np.ones(3, np.float32)), (dup, np.ones(3, np.float32))):
                with pytest.raises(errors.InvalidArgumentError) as e:
                    s.run(out, {x: feed})
                messages.append(e.value.message.splitlines()[0].split(" (in fused")[0])
    assert messages[:2] == messages[2:]
    assert "Invalid reduction dimension" in messages[0] and "duplicate" in messages[1]


def test_what_reads_a_reduction_is_not_in_its_cluster():
    x = tf.placeholder(tf.float32, [4, 5])
    with tf.xla.experimental.jit_scope():
        y = tf.sqrt(x * x + 1.0)
        norm = tf.reduce_sum(y, 1, keepdims=True)
        z = y / norm  # reads the reduction: a second cluster, after the first
    feeds = {x: _values(np.float32, (4, 5))}
    fused, unfused, ops = _run_both([z, norm], feeds)
    _same(fused, unfused, scale=20.0)
    assert ops.count("_FusedElementwise") == 1 and "RealDiv" in ops

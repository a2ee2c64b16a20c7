"""Constant folding (whitepaper §5.1) as a Session runs it: what folds, what must never fold, the
control dependencies and names it keeps, and the options that switch it (TF's two switches)."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import RewriterConfig

L0 = tf.OptimizerOptions.L0


def _config(opt_level=0, folding=0, disable_meta=False, **optimizer):
    config = tf.ConfigProto()
    config.graph_options.optimizer_options.opt_level = opt_level
    for key, value in optimizer.items():
        setattr(config.graph_options.optimizer_options, key, value)
    config.graph_options.rewrite_options.constant_folding = folding
    config.graph_options.rewrite_options.disable_meta_optimizer = disable_meta
    return config


OFF = _config(L0, RewriterConfig.OFF)


def _run(fetches, feeds=None, config=None, targets=()):
    """Returns (values, {node name: NodeDef} of every node that ran)."""
    with tf.Session(config=config) as s:
        s.run(tf.global_variables_initializer())
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True)
        out = s.run(fetches, feeds, options=opts, run_metadata=md)
        if targets:
            s.run(list(targets))
    return out, {n.name: n for g in md.partition_graphs for n in g.node}


def _ops(nodes):
    return sorted(n.op for n in nodes.values())


def test_a_constant_chain_folds_to_one_const_with_the_fetched_name():
    c = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = tf.reduce_sum(tf.transpose(c * 2.0 + 1.0), axis=1)
    on, nodes = _run(y)
    off, nodes_off = _run(y, config=OFF)
    np.testing.assert_array_equal(on, off)
    assert _ops(nodes) == ["Const", "_Send"]
    assert nodes[y.op.name].op == "Const"  # the fetched node keeps its name
    assert "Sum" in _ops(nodes_off)


def test_folded_const_keeps_control_dependencies():
    v = tf.Variable(0.0)
    with tf.control_dependencies([tf.assign_add(v, 1.0)]):
        c = tf.constant(3.0)
    y = c * 2.0 + 1.0
    with tf.Session() as s:
        s.run(v.initializer)
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True)
        assert s.run(y, options=opts, run_metadata=md) == 7.0
        assert s.run(y) == 7.0
        assert s.run(v) == 2.0  # the update ran in both steps
    (folded,) = [n for g in md.partition_graphs for n in g.node if n.name == y.op.name]
    assert folded.op == "Const" and list(folded.input) == ["^AssignAdd"]


def test_random_stateful_and_ref_reading_nodes_never_fold():
    r = tf.random_uniform([3], seed=4)
    v = tf.Variable([1.0, 2.0])
    y = v * 2.0  # reads the variable's buffer
    q = tf.FIFOQueue(2, tf.float32)
    size = q.size() + 1
    _, nodes = _run([r + 1.0, y, size])
    ops = _ops(nodes)
    assert "RandomUniform" in ops and "Mul" in ops and "QueueSizeV2" in ops


def test_fed_tensors_are_not_folded_away():
    a = tf.constant(2.0)
    b = a * 3.0
    y = b + 1.0
    out, nodes = _run(y, {b: 10.0})
    assert out == 11.0 and "AddV2" in _ops(nodes)


def test_multi_output_nodes_fold_per_output():
    x = tf.placeholder(tf.float32, [2])
    parts = tf.split(tf.constant([1.0, 2.0, 3.0, 4.0]), 2)
    y = parts[0] * x + parts[1]
    feeds = {x: np.array([5.0, 6.0], np.float32)}
    on, nodes = _run(y, feeds)
    off, _ = _run(y, feeds, OFF)
    np.testing.assert_array_equal(on, off)
    assert "Split" not in _ops(nodes)
    assert {"ConstantFolding/split-0", "ConstantFolding/split-1"} <= set(nodes)


def test_shapes_of_fed_placeholders_fold_when_static():
    x = tf.placeholder(tf.float32, [2, 3])
    p = tf.placeholder(tf.float32, [None, 3])
    s1, s2 = tf.shape_n([x, p])
    s3 = tf.shape_n([x])[0] * 2
    feeds = {x: np.zeros((2, 3), np.float32), p: np.zeros((5, 3), np.float32)}
    (v1, v2, v3), nodes = _run([s1, s2, s3], feeds)
    assert v1.tolist() == [2, 3] and v2.tolist() == [5, 3] and v3.tolist() == [4, 6]
    assert "ShapeN" in _ops(nodes)  # the partially known shape is measured at run time
    folded = nodes[s3.op.name]
    assert folded.op == "Const" and list(folded.input) == ["^_recv_Placeholder_0"]


def test_shape_of_an_unfed_loop_variable_is_not_folded():
    i0 = tf.constant(0)
    x0 = tf.zeros([1])
    _, x = tf.while_loop(
        lambda i, x: i < 3,
        lambda i, x: (i + 1, tf.concat([x, x], 0)),
        [i0, x0],
        shape_invariants=[i0.shape, tf.TensorShape([None])],
    )
    n = tf.shape_n([x])[0]
    on, _ = _run(n)
    off, _ = _run(n, config=OFF)
    assert on.tolist() == off.tolist() == [8]


def test_kernel_errors_stay_run_time_errors():
    y = tf.constant(1) // tf.constant(0)
    with pytest.raises(tf.errors.InvalidArgumentError), tf.Session() as s:
        s.run(y)


def test_values_over_the_bound_are_not_folded():
    y = tf.tile(tf.constant([1.0]), [1000]) + 1.0
    _, nodes = _run(y, config=_config(max_folded_constant_in_bytes=1000))
    assert "Tile" in _ops(nodes)
    _, nodes = _run(y)
    assert _ops(nodes) == ["Const", "_Send"]


def test_folding_inside_loops_and_conds_keeps_frames():
    x = tf.placeholder(tf.float32, [])
    y = tf.while_loop(lambda v: v < 100.0, lambda v: v * (tf.constant(1.5) + 0.5), [x])
    z = tf.cond(x > 1.0, lambda: tf.constant(2.0) * 3.0, lambda: tf.constant(4.0) - 1.0)
    for feed in (0.5, 3.0):
        on, _ = _run([y, z], {x: feed})
        off, _ = _run([y, z], {x: feed}, OFF)
        assert on == off


@pytest.mark.parametrize(
    "config, folds",
    [
        (_config(), True),
        (_config(L0), True),  # Grappler's constant folding is still on
        (_config(folding=RewriterConfig.OFF), True),  # the classic optimizer's L1 is
        (OFF, False),
        (_config(L0, disable_meta=True), False),
        (_config(L0, RewriterConfig.OFF, do_constant_folding=True), True),
    ],
)
def test_options_switch_it_as_in_tensorflow(config, folds):
    y = (tf.constant(2.0) + 1.0) * tf.constant(4.0) - 2.0
    out, nodes = _run(y, config=config)
    assert out == 10.0
    assert (_ops(nodes) == ["Const", "_Send"]) == folds


def test_target_nodes_are_kept_and_run():
    v = tf.Variable(0.0)
    with tf.control_dependencies([tf.assign_add(v, 1.0)]):
        t = tf.identity(tf.constant(1.0) + 1.0)
    with tf.Session() as s:
        s.run(v.initializer)
        s.run(t.op)
        s.run([t.op, t])
        assert s.run(v) == 2.0

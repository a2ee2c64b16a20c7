"""Common subexpression elimination (whitepaper §5.1) as a Session runs it: what it merges,
what it must never merge, the options that switch it, and results equal with it off."""

import numpy as np

import flowgraph as tf

OFF = tf.OptimizerOptions(opt_level=tf.OptimizerOptions.L0)


def _run(fetches, feeds=None, optimizer_options=None):
    """Returns (values, op types of every node that ran)."""
    config = tf.ConfigProto()
    if optimizer_options is not None:
        config.graph_options.optimizer_options.CopyFrom(optimizer_options)
    with tf.Session(config=config) as s:
        s.run(tf.global_variables_initializer())
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True)
        out = s.run(fetches, feeds, options=opts, run_metadata=md)
    ops = [n.op for g in md.partition_graphs for n in g.node]
    return out, ops


def test_equal_nodes_merge_and_results_match_unoptimized():
    x = tf.placeholder(tf.float32, [3])
    y = (tf.exp(x) + 1.0) * (tf.exp(x) + 1.0)
    feeds = {x: np.array([1, 2, 3], np.float32)}
    on, ops_on = _run(y, feeds)
    off, ops_off = _run(y, feeds, OFF)
    np.testing.assert_array_equal(on, off)
    assert ops_on.count("Exp") == 1 and ops_off.count("Exp") == 2
    assert ops_on.count("AddV2") == 1 and ops_off.count("AddV2") == 2
    assert ops_on.count("Const") == 1 and ops_off.count("Const") == 2


def test_l0_with_flag_turns_it_back_on():
    x = tf.placeholder(tf.float32, [2])
    y = tf.exp(x) + tf.exp(x)
    flag = tf.OptimizerOptions(opt_level=tf.OptimizerOptions.L0)
    flag.do_common_subexpression_elimination = True
    _, ops = _run(y, {x: np.ones(2, np.float32)}, flag)
    assert ops.count("Exp") == 1


def test_different_attrs_inputs_or_control_inputs_are_not_merged():
    x = tf.placeholder(tf.float32, [2, 3])
    a = tf.reduce_sum(x, 0)
    b = tf.reduce_sum(x, 1)  # different axis constant: a different input
    c = tf.transpose(x, [1, 0])
    with tf.control_dependencies([a]):
        d = tf.transpose(x, [1, 0])  # same as c but with a control input
    (_, _, vc, vd), ops = _run([a, b, c, d], {x: np.ones((2, 3), np.float32)})
    assert ops.count("Sum") == 2 and ops.count("Transpose") == 2
    np.testing.assert_array_equal(vc, vd)


def test_random_and_stateful_ops_are_never_merged():
    r1 = tf.random_uniform([1000], seed=1)
    r2 = tf.random_uniform([1000], seed=1)
    v = tf.Variable(1.0)
    u1 = tf.assign_add(v, 1.0)
    u2 = tf.assign_add(v, 1.0)
    _, ops = _run([r1, r2])
    assert ops.count("RandomUniform") == 2
    _, ops = _run([u1, u2])
    assert ops.count("AssignAdd") == 2


def test_reads_of_a_ref_variable_are_not_merged():
    v = tf.Variable([1.0, 2.0])
    a = tf.identity(v.op.outputs[0])  # both read the variable's buffer (a float32_ref)
    b = tf.identity(v.op.outputs[0])
    assert a.op.inputs[0].dtype.is_ref_dtype
    _, ops = _run([a, b, v.value()])
    assert ops.count("Identity") == 3  # the two reads and the variable's snapshot
    c = tf.identity(v.value())  # reads of the snapshot tensor are plain values: merged
    d = tf.identity(v.value())
    _, ops = _run([c, d])
    assert ops.count("Identity") == 2  # the snapshot and one read


def test_targets_kept_and_run():
    v = tf.Variable(0.0)
    with tf.control_dependencies([tf.assign_add(v, 1.0)]):
        t1 = tf.no_op()
        t2 = tf.no_op()
    with tf.Session() as s:
        s.run(v.initializer)
        s.run([t1, t2])
        s.run(t2)
        assert s.run(v) == 2.0

"""The dependency optimizer (runtime/passes/dependency.py): gradients only a gate reads are not
computed, gates and control-only identities go, and every ordering a program can observe stays:
stateful ops, Asserts, targets and control flow are left alone."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import RewriterConfig


def _config(on: bool) -> tf.ConfigProto:
    config = tf.ConfigProto()
    # op counts below are the dependency optimizer's alone (memory.py fuses weight gradients)
    config.graph_options.rewrite_options.memory_optimization = RewriterConfig.NO_MEM_OPT
    if not on:
        config.graph_options.rewrite_options.dependency_optimization = RewriterConfig.OFF
    return config


def _run(fetches, feeds=None, on=True, init=True):
    """(values, op-type counts of the partition graphs) of one run after initialization."""
    with tf.Session(config=_config(on)) as sess:
        if init:
            sess.run(tf.global_variables_initializer())
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True)
        values = sess.run(fetches, feeds, options=opts, run_metadata=md)
    return values, collections.Counter(n.op for g in md.partition_graphs for n in g.node)


def test_gradient_of_a_fed_input_is_not_computed():
    x = tf.placeholder(tf.float32, [None, 3])
    w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2))
    loss = tf.reduce_sum(tf.matmul(x, w))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    feeds = {x: np.ones((4, 3), np.float32)}
    (_, w_on), on = _run([train, w], feeds, on=True)
    (_, w_off), off = _run([train, w], feeds, on=False)
    np.testing.assert_array_equal(w_on, w_off)
    assert off["MatMul"] == 3 and on["MatMul"] == 2  # forward and d/dw; not d/dx
    assert on["NoOp"] < off["NoOp"] and on["Identity"] < off["Identity"]


def test_pure_control_dependency_is_not_run_but_values_are_unchanged():
    a = tf.placeholder(tf.float32, [])
    with tf.control_dependencies([tf.tanh(a), tf.group(tf.exp(a))]):
        out = tf.identity(a * 2.0)
    value, counts = _run(out, {a: 1.5}, init=False)
    assert value == 3.0
    assert counts["Tanh"] == 0 and counts["Exp"] == 0


def test_stateful_control_dependency_still_runs_first():
    v = tf.Variable(0.0)
    gate = tf.group(v.assign_add(5.0))
    with tf.control_dependencies([gate]):
        out = tf.identity(v)
    for on in (True, False):
        value, _ = _run(out, on=on)
        assert value == 5.0


def test_assert_and_check_numerics_gates_still_run():
    a = tf.placeholder(tf.float32, [])
    with tf.control_dependencies([tf.Assert(a > 0.0, [a])]):
        out = tf.identity(a)
    assert _run(out, {a: 1.0}, init=False)[0] == 1.0
    with pytest.raises(tf.errors.InvalidArgumentError):
        _run(out, {a: -1.0}, init=False)
    with tf.control_dependencies([tf.debugging.check_numerics(a, "bad")]):
        checked = tf.identity(a + 1.0)
    with pytest.raises(tf.errors.InvalidArgumentError):
        _run(checked, {a: np.inf}, init=False)


def test_targets_and_fetched_gates_are_kept():
    v = tf.Variable(1.0)
    step = tf.group(v.assign(v * 3.0), name="step")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(step) is None
        sess.run("step")
        assert sess.run(v) == 9.0


def test_graphs_with_control_flow_are_left_alone():
    x = tf.placeholder(tf.float32, [])
    _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0), [0, x])
    with tf.control_dependencies([tf.tanh(x)]):
        z = tf.identity(y)
    values, counts = _run(z, {x: 1.0}, init=False)
    assert values == 8.0 and counts["Tanh"] == 1

"""Variable updates folded into a fused node (whitepaper §10): an Assign, AssignAdd or AssignSub
of a cluster's value writes the compiled loop's result straight into the variable's buffer.
Every case runs fused and unfused and compares the variables afterwards; the graph shows which
updates folded."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors

DTYPES = [np.float32, np.float64, np.int32, np.int64]


def _ops(sess, fetches, feeds=None):
    """Runs `fetches` once; the op types of every node that ran."""
    md = tf.RunMetadata()
    sess.run(fetches, feeds, tf.RunOptions(output_partition_graphs=True), md)
    return [n.op for g in md.partition_graphs for n in g.node]


def _unjit():
    for op in tf.get_default_graph().get_operations():
        if "_XlaCompile" in op.node_def.attr:
            op._set_attr("_XlaCompile", False)


def _both(build, steps=3, feeds=None):
    """(fused, unfused) results of `build()` -> (update, variables): the variables after
    `steps` runs of the update, and the fused run's op types."""
    out = []
    for jit in (True, False):
        with tf.Graph().as_default():
            update, variables = build()
            if not jit:
                _unjit()
            with tf.Session() as s:
                s.run(tf.global_variables_initializer())
                ops = _ops(s, update, feeds)
                for _ in range(steps - 1):
                    s.run(update, feeds)
                out.append((s.run(variables), ops))
    return out


def _same(a, b):
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_allclose(x, y, rtol=2e-6)


def test_adam_written_with_basic_ops_updates_its_variables_in_place():
    n = 1000
    rng = np.random.RandomState(2)
    init = [rng.randn(n).astype(np.float32) for _ in range(2)]

    def build():
        grad = tf.Variable(init[0])
        var = tf.Variable(init[1])
        m, v = tf.Variable(tf.zeros([n])), tf.Variable(tf.zeros([n]))
        with tf.xla.experimental.jit_scope():
            m_t = 0.9 * m + 0.1 * grad
            v_t = 0.999 * v + 0.001 * grad * grad
            var_t = var - 0.01 * m_t / (tf.sqrt(v_t) + 1e-8)
        update = tf.group(tf.assign(m, m_t), tf.assign(v, v_t), tf.assign(var, var_t))
        return update, [var, m, v]

    (fused, ops), (unfused, ops_off) = _both(build)
    _same(fused, unfused)
    assert ops.count("_FusedElementwise") == 1 and "Assign" not in ops
    assert ops_off.count("Assign") == 3


@pytest.mark.parametrize("dtype", DTYPES)
def test_assign_add_and_sub_fold_on_every_dtype(dtype):
    x0 = np.arange(-6, 6).astype(dtype).reshape(3, 4)
    feed = np.arange(12).astype(dtype).reshape(3, 4) % 5

    def build():
        d = tf.placeholder(dtype, [3, 4], name="d")
        a, b, c = (tf.Variable(x0) for _ in range(3))
        with tf.xla.experimental.jit_scope():
            delta = d * tf.constant(2, dtype) + tf.constant(1, dtype)
            new = tf.maximum(c, delta) - d
        update = tf.group(tf.assign_add(a, delta), tf.assign_sub(b, delta), tf.assign(c, new))
        return update, [a, b, c]

    feeds = {"d:0": feed}
    (fused, ops), (unfused, _) = _both(build, feeds=feeds)
    _same(fused, unfused)
    assert not {"Assign", "AssignAdd", "AssignSub"} & set(ops)
    assert ops.count("_FusedElementwise") == 1


def test_scalar_variables_and_broadcast_values_fold():
    def build():
        step = tf.Variable(0.0)
        w = tf.Variable(np.ones((2, 3), np.float32))
        b = tf.Variable(np.arange(3, dtype=np.float32))
        with tf.xla.experimental.jit_scope():
            w_t = w * 0.5 + b  # b broadcast over w's rows: a strided loop
            s_t = step * 2.0 + 1.0
        return tf.group(tf.assign(w, w_t), tf.assign(step, s_t)), [w, b, step]

    (fused, ops), (unfused, _) = _both(build)
    _same(fused, unfused)
    assert "Assign" not in ops


def test_inputs_that_view_the_buffer_another_way_fall_back_to_the_kernel():
    """v[::-1] and reshape(v) alias v's buffer in another order or shape: writing v in place
    would change what the loops still read, so v's assign runs its own kernel. (One cluster,
    joined by the scalar k: w's loop may run after v's.)"""

    def build():
        v = tf.Variable(np.arange(8, dtype=np.float32))
        w = tf.Variable(np.zeros((2, 4), np.float32))
        kv = tf.Variable(2.0)
        with tf.xla.experimental.jit_scope():
            k = kv * 1.5
            v_t = v[::-1] * k + v
            w_t = w + tf.reshape(v, [2, 4]) * k
        return tf.group(tf.assign(v, v_t), tf.assign(w, w_t)), [v, w]

    (fused, ops), (unfused, _) = _both(build)
    _same(fused, unfused)
    assert ops.count("_FusedElementwise") == 1 and "Assign" not in ops


def test_an_assign_to_an_uninitialized_variable_initializes_it_and_assign_add_fails():
    v = tf.Variable(np.zeros(4, np.float32))
    u = tf.Variable(np.zeros(4, np.float32))
    x = tf.placeholder(tf.float32, [4])
    with tf.xla.experimental.jit_scope():
        y = x * 2.0 + 1.0
    assign, add = tf.group(tf.assign(v, y)), tf.group(tf.assign_add(u, y))
    feeds = {x: np.arange(4, dtype=np.float32)}
    for jit in (True, False):
        if not jit:
            _unjit()
        with tf.Session() as s:
            ops = _ops(s, assign, feeds)
            assert ("Assign" in ops) != jit
            np.testing.assert_array_equal(s.run(v), [1, 3, 5, 7])
            with pytest.raises(errors.FailedPreconditionError, match="uninitialized"):
                s.run(add, feeds)


def test_shape_checks_and_shape_changes_match_the_unfused_kernel():
    x = tf.placeholder(tf.float32, [None])
    v = tf.Variable(np.zeros(3, np.float32))
    w = tf.Variable(np.zeros(3, np.float32), validate_shape=False)
    with tf.xla.experimental.jit_scope():
        y = x * 2.0 + 1.0
        z = x * 3.0 - 1.0
    checked = tf.group(tf.assign(v, y))
    reshaped = tf.group(tf.assign(w, z, validate_shape=False))
    messages = []
    for jit in (True, False):
        if not jit:
            _unjit()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(reshaped, {x: np.ones(5, np.float32)})
            np.testing.assert_array_equal(s.run(w), [2] * 5)
            with pytest.raises(errors.InvalidArgumentError) as e:
                s.run(checked, {x: np.ones(5, np.float32)})
            messages.append(e.value.message.splitlines()[0].split(" (in fused")[0])
    assert messages[0] == messages[1] and "lhs shape= [3] rhs shape= [5]" in messages[0]


def test_control_dependencies_order_the_folded_update():
    """A read the update waits for sees the old value; a read after the update the new one;
    an update whose control input depends on the cluster itself stays a separate node."""
    v = tf.Variable(np.arange(4, dtype=np.float32))
    u = tf.Variable(np.ones(4, np.float32))
    old = v * 1.0
    with tf.xla.experimental.jit_scope():
        v_t = v * 10.0 + 1.0
        u_t = u * 2.0 - 1.0
    with tf.control_dependencies([old]):
        a = tf.assign(v, v_t)
    after_cluster = u_t * 1.0  # outside the cluster, after it
    with tf.control_dependencies([after_cluster]):
        b = tf.assign(u, u_t)
    with tf.control_dependencies([a, b]):
        new = v * 1.0
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True)
        got_old, got_new = s.run([old, new], options=opts, run_metadata=md)
        ops = [n.op for g in md.partition_graphs for n in g.node]
        np.testing.assert_array_equal(got_old, [0, 1, 2, 3])
        np.testing.assert_array_equal(got_new, [1, 11, 21, 31])
        np.testing.assert_array_equal(s.run(u), [1, 1, 1, 1])
    assert ops.count("Assign") == 1  # b: its control input depends on the cluster


def test_fetched_or_targeted_assigns_stay_nodes():
    v = tf.Variable(np.zeros(3, np.float32))
    with tf.xla.experimental.jit_scope():
        y = tf.exp(v) * 2.0
    a = tf.assign(v, y)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert "Assign" in _ops(s, a)
        assert "Assign" in _ops(s, a.op)
        np.testing.assert_allclose(s.run(v), np.exp(2.0) * 2.0, rtol=1e-6)


def test_an_update_and_a_reduction_of_one_value_share_a_loop():
    """v's new value is written in place and summed by the same loop."""
    n = 100_000

    def build():
        v = tf.Variable(np.linspace(-1, 1, n).astype(np.float32))
        total = tf.Variable(0.0)
        with tf.xla.experimental.jit_scope():
            v_t = v * 0.5 + 1.0
            s = tf.reduce_sum(v_t)
        return tf.group(tf.assign(v, v_t), tf.assign(total, s)), [v, total]

    (fused, ops), (unfused, _) = _both(build)
    _same(fused, unfused)
    assert ops.count("_FusedElementwise") == 1 and "Assign" in ops  # total's: a reduction's

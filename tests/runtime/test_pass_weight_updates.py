"""Fused weight-gradient updates (runtime/passes/weight_updates.py, kernels/cpu/weight_updates.py):
a MatMul whose only reader is a variable's update becomes part of it, visibly in the partition
graphs; the step computes what the unfused step computes (to float rounding: gemm adds the
product to the variable unrounded), with the same errors, and the gradient never takes memory."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import RewriterConfig
from flowgraph.runtime.tracing import peak_memory

R = RewriterConfig
ON, OFF = R.DEFAULT_MEM_OPT, R.NO_MEM_OPT
TOL = {np.float32: 2e-6, np.float64: 1e-14}


def _config(level) -> tf.ConfigProto:
    config = tf.ConfigProto()
    config.graph_options.rewrite_options.memory_optimization = level
    return config


def _steps(graph, init, fetches, feeds, level, steps=3):
    """(fetched values of each step, partition graph nodes by name, peak bytes of the last)."""
    values = []
    with tf.Session(graph=graph, config=_config(level)) as s:
        s.run(init)
        for _ in range(steps):
            md = tf.RunMetadata()
            opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, output_partition_graphs=True)
            values.append(s.run(fetches, feeds, options=opts, run_metadata=md))
    nodes = {n.name: n for gd in md.partition_graphs for n in gd.node}
    return values, nodes, sum(peak_memory(md).values())


def _assert_close(on, off, dtype=np.float32):
    for a, b in zip(on, off, strict=True):
        if isinstance(a, (list, tuple)):
            _assert_close(a, b, dtype)
        elif a is not None:
            scale = np.abs(b).max() if np.size(b) else 0
            np.testing.assert_allclose(a, b, rtol=TOL[dtype], atol=TOL[dtype] * scale)


def _fused(nodes) -> dict:
    return {name: n for name, n in nodes.items() if n.op.startswith("_FusedMatMul")}


def _mlp(optimizer, sizes=(64, 256, 256, 10), batch=16, resource=False, dtype=tf.float32):
    """A ReLU MLP's training step: (graph, init, [loss, variables..., train], feeds)."""
    rng = np.random.RandomState(0)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(dtype, [None, sizes[0]])
        h, params = x, []
        for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
            w0 = (rng.randn(n_in, n_out) / np.sqrt(n_in)).astype(dtype.as_numpy_dtype)
            w = tf.Variable(w0, name=f"w{i}", use_resource=resource)
            b = tf.Variable(tf.zeros([n_out], dtype), name=f"b{i}", use_resource=resource)
            h = tf.matmul(h, w) + b
            h = tf.nn.relu(h) if i < len(sizes) - 2 else h
            params += [w, b]
        loss = tf.reduce_mean(tf.square(h))
        train = optimizer().minimize(loss)
        init = tf.global_variables_initializer()
    feeds = {x: rng.randn(batch, sizes[0]).astype(dtype.as_numpy_dtype)}
    with g.as_default():
        fetches = [loss, train] + [p.read_value() if resource else p for p in params]
    return g, init, fetches, feeds


OPTIMIZERS = {
    "sgd": lambda: tf.train.GradientDescentOptimizer(0.1),
    "sgd_locking": lambda: tf.train.GradientDescentOptimizer(0.1, use_locking=True),
    "momentum": lambda: tf.train.MomentumOptimizer(0.05, 0.9),
    "nesterov": lambda: tf.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True, use_locking=True),
}


@pytest.mark.parametrize("resource", [False, True], ids=["ref", "resource"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_mlp_training_fuses_every_weight_gradient_with_the_same_results(name, resource):
    g, init, fetches, feeds = _mlp(OPTIMIZERS[name], resource=resource)
    on, nodes, _ = _steps(g, init, fetches, feeds, ON)
    off, nodes_off, _ = _steps(g, init, fetches, feeds, OFF)
    _assert_close(on, off)
    fused = _fused(nodes)
    assert len(fused) == 3 and not _fused(nodes_off)
    for n in fused.values():
        gradient = n.attr["gradient"].s.decode()
        assert gradient.endswith("_grad/MatMul_1") and gradient not in nodes
        assert gradient in nodes_off
        assert n.op.removeprefix("_FusedMatMul") == nodes_off[n.name].op
        assert n.attr["transpose_a"].b


def test_float64_and_the_peak_without_the_gradient():
    g, init, fetches, feeds = _mlp(OPTIMIZERS["sgd"], sizes=(32, 512, 512, 4), dtype=tf.float64)
    on, _, peak_on = _steps(g, init, fetches, feeds, ON, steps=2)
    off, _, peak_off = _steps(g, init, fetches, feeds, OFF, steps=2)
    _assert_close(on, off, np.float64)
    # the 2 MiB gradient of the 512x512 weights was most of the peak; the rest is small
    assert peak_on < peak_off - 1.5 * 2**20


def _product_update(ta, tb, shape_a, shape_b, dtype=np.float32, var_value=None, operand=None):
    """var -= 0.5 * op(a) @ op(b) by GradientDescent on a fed product; `operand` 'a' makes
    `a` the variable itself (its buffer is then both read and written)."""
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(dtype, [None, None])
        b = tf.placeholder(dtype, [None, None])
        var = tf.Variable(var_value, name="var")
        left = var if operand == "a" else a
        grad = tf.matmul(left, b, transpose_a=ta, transpose_b=tb, name="grad")
        train = tf.train.GradientDescentOptimizer(0.5).apply_gradients([(grad, var)])
        init = tf.global_variables_initializer()
    rng = np.random.RandomState(1)
    feeds = {a: rng.randn(*shape_a).astype(dtype), b: rng.randn(*shape_b).astype(dtype)}
    return g, init, [train], feeds, var


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_transposed_operands(ta, tb, dtype):
    m, k, n = 5, 7, 3
    shape_a, shape_b = (k, m) if ta else (m, k), (n, k) if tb else (k, n)
    init_value = np.arange(m * n, dtype=dtype).reshape(m, n) / 10
    g, init, fetches, feeds, var = _product_update(ta, tb, shape_a, shape_b, dtype, init_value)
    on, nodes, _ = _steps(g, init, fetches + [var], feeds, ON, steps=2)
    off, _, _ = _steps(g, init, fetches + [var], feeds, OFF, steps=2)
    _assert_close(on, off, dtype)
    a, b = (feeds[t] for t in sorted(feeds, key=lambda t: t.name))
    expect = init_value - 2 * 0.5 * ((a.T if ta else a) @ (b.T if tb else b))
    np.testing.assert_allclose(on[-1][1], expect, rtol=TOL[dtype] * 8)
    assert len(_fused(nodes)) == 1 and "grad" not in nodes


def test_large_product_runs_in_row_blocks_on_the_pool():
    # 512 x 256 x 512 = 67M multiply-adds, above the MatMul kernel's sharding threshold
    init_value = np.random.RandomState(2).randn(512, 512).astype(np.float32)
    g, init, fetches, feeds, var = _product_update(
        True, False, (256, 512), (256, 512), np.float32, init_value
    )
    on, nodes, _ = _steps(g, init, fetches + [var], feeds, ON, steps=2)
    off, _, _ = _steps(g, init, fetches + [var], feeds, OFF, steps=2)
    _assert_close(on, off)
    assert len(_fused(nodes)) == 1


def test_an_operand_that_is_the_variable_itself():
    init_value = np.random.RandomState(3).randn(6, 6).astype(np.float32)
    g, init, fetches, feeds, var = _product_update(
        True, False, (6, 6), (6, 6), np.float32, init_value, operand="a"
    )
    on, nodes, _ = _steps(g, init, fetches + [var], feeds, ON)
    off, _, _ = _steps(g, init, fetches + [var], feeds, OFF)
    _assert_close(on, off)
    assert len(_fused(nodes)) == 1


def test_a_column_major_variable_buffer_is_updated_through_a_copy():
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [4, 3])
        b = tf.placeholder(tf.float32, [4, 5])
        var = tf.Variable(tf.zeros([5, 3]), name="var")
        # a transpose's result is a column-major view; the variable copies it as it is
        assign = tf.assign(var, tf.transpose(tf.reshape(tf.range(15.0), [3, 5])))
        grad = tf.matmul(b, a, transpose_a=True)
        train = tf.train.GradientDescentOptimizer(1.0).apply_gradients([(grad, var)])
    rng = np.random.RandomState(4)
    feeds = {a: rng.randn(4, 3).astype(np.float32), b: rng.randn(4, 5).astype(np.float32)}
    results = {}
    for level in (ON, OFF):
        with tf.Session(graph=g, config=_config(level)) as s:
            s.run(assign)
            s.run(train, feeds)
            results[level] = s.run(var)
    expect = np.arange(15.0, dtype=np.float32).reshape(3, 5).T - feeds[b].T @ feeds[a]
    np.testing.assert_allclose(results[ON], expect, rtol=1e-6)
    np.testing.assert_allclose(results[ON], results[OFF], rtol=1e-6)


def _graph_with_gradient_reader(reader):
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [4, 3])
        var = tf.Variable(tf.ones([3, 3]))
        grad = tf.matmul(a, a, transpose_a=True, name="grad")
        train = tf.train.GradientDescentOptimizer(0.1).apply_gradients([(grad, var)])
        fetches = [train] + reader(grad)
        init = tf.global_variables_initializer()
    return g, init, fetches, {a: np.ones((4, 3), np.float32)}


@pytest.mark.parametrize(
    "reader",
    [
        lambda grad: [grad],  # fetched
        lambda grad: [tf.summary.histogram("grad", grad)],  # summarized
        lambda grad: [tf.norm(grad)],  # another reader (a clip's norm)
    ],
    ids=["fetched", "summarized", "norm"],
)
def test_a_gradient_with_another_reader_is_not_fused(reader):
    g, init, fetches, feeds = _graph_with_gradient_reader(reader)
    on, nodes, _ = _steps(g, init, fetches, feeds, ON, steps=1)
    off, _, _ = _steps(g, init, fetches, feeds, OFF, steps=1)
    assert not _fused(nodes) and "grad" in nodes
    for a, b in zip(on[0][1:], off[0][1:]):
        np.testing.assert_array_equal(a, b)


def test_half_precision_and_loops_are_not_fused():
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float16, [4, 3])
        var = tf.Variable(tf.ones([3, 3], tf.float16))
        grad = tf.matmul(a, a, transpose_a=True)
        half = tf.train.GradientDescentOptimizer(0.1).apply_gradients([(grad, var)])
        x = tf.placeholder(tf.float32, [4, 3])
        rvar = tf.Variable(tf.ones([3, 3]), use_resource=True)

        def body(i):
            update = tf.train.GradientDescentOptimizer(0.1).apply_gradients(
                [(tf.matmul(x, x, transpose_a=True), rvar)]
            )
            with tf.control_dependencies([update]):
                return i + 1

        loop = tf.while_loop(lambda i: i < 3, body, [tf.constant(0)])
        init = tf.global_variables_initializer()
    feeds = {a: np.ones((4, 3), np.float16), x: np.ones((4, 3), np.float32)}
    _, nodes, _ = _steps(g, init, [half, loop], feeds, ON, steps=1)
    assert not _fused(nodes)
    with tf.Session(graph=g, config=_config(ON)) as s:
        s.run(init)
        s.run(loop, feeds)
        np.testing.assert_allclose(s.run(rvar), np.ones((3, 3)) - 3 * 0.1 * 4, rtol=1e-6)


@pytest.mark.parametrize(
    "shape_a,shape_b,message",
    [
        ((5, 7), (6, 3), "Matrix size-incompatible"),
        ((5, 7), (7, 4), "var and grad do not have the same shape"),
    ],
)
def test_errors_are_the_unfused_ones(shape_a, shape_b, message):
    init_value = np.zeros((5, 3), np.float32)
    g, init, fetches, feeds, _ = _product_update(
        False, False, shape_a, shape_b, np.float32, init_value
    )
    for level in (ON, OFF):
        with tf.Session(graph=g, config=_config(level)) as s:
            s.run(init)
            with pytest.raises(tf.errors.InvalidArgumentError, match=message):
                s.run(fetches, feeds)


def test_an_uninitialized_variable_fails_as_unfused():
    init_value = np.zeros((5, 3), np.float32)
    g, _, fetches, feeds, _ = _product_update(False, False, (5, 7), (7, 3), np.float32, init_value)
    for level in (ON, OFF):
        with (
            tf.Session(graph=g, config=_config(level)) as s,
            pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized"),
        ):
            s.run(fetches, feeds)

"""The memory optimizer (runtime/passes/memory.py): each rewrite shows in the partition graphs,
leaves the step's values bit for bit what they are without it, and lowers the step's peak memory
as StepStats' allocation records tell it (tracing.peak_memory)."""

from __future__ import annotations

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import RewriterConfig
from flowgraph.runtime.tracing import peak_memory

R = RewriterConfig
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


def _config(level, separate=(), cpus=1) -> tf.ConfigProto:
    config = tf.ConfigProto(device_count={"CPU": cpus}, inter_op_parallelism_threads=1)
    config.graph_options.rewrite_options.memory_optimization = level
    config.experimental.separate_memory_devices.extend(separate)
    return config


def _run(graph, fetches, feeds, config, init=None):
    """(values, partition graphs' nodes by device, peak bytes per device) of one traced step."""
    with tf.Session(graph=graph, config=config) as s:
        if init is not None:
            s.run(init)
        md = tf.RunMetadata()
        opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, output_partition_graphs=True)
        values = s.run(fetches, feeds, options=opts, run_metadata=md)
    nodes = {}
    for gd in md.partition_graphs:
        for n in gd.node:
            nodes[n.name] = n
    return values, nodes, peak_memory(md)


def _assert_same(a, b):
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# -- accumulating sums ------------------------------------------------------------------------
def _sum_graph(n=8, shape=(64, 1024)):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, shape)
        total = tf.add_n([tf.sin(x * float(i + 1)) for i in range(n)], name="total")
    feed = {x: np.random.RandomState(0).randn(*shape).astype(np.float32)}
    return g, total, feed


def test_addn_becomes_an_accumulation_chain_with_the_same_sum_and_lower_peak():
    g, total, feed = _sum_graph()
    on, nodes, peak_on = _run(g, [total], feed, _config(R.DEFAULT_MEM_OPT))
    off, nodes_off, peak_off = _run(g, [total], feed, _config(R.NO_MEM_OPT))
    _assert_same(on, off)
    assert nodes["total"].op == "AddV2" and nodes_off["total"].op == "AddN"
    assert sum(n.startswith("total/Accumulate_") for n in nodes) == 6
    assert peak_on[CPU0] <= peak_off[CPU0] / 2  # 8 sines alive at once before, ~2 after


def test_small_or_unknown_shaped_sums_stay_addn():
    g, total, feed = _sum_graph(n=4, shape=(4, 4))
    _, nodes, _ = _run(g, [total], feed, _config(R.DEFAULT_MEM_OPT))
    assert nodes["total"].op == "AddN"
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 1024])
        y = tf.placeholder(tf.float32, [None, 1024])
        total = tf.add_n([x, y, x * 2.0, y * 3.0], name="total")
    # AddN must refuse inputs of different shapes, which AddV2 would broadcast
    feed = {x: np.ones((64, 1024), np.float32), y: np.ones((1, 1024), np.float32)}
    with tf.Session(graph=g) as s, pytest.raises(tf.errors.InvalidArgumentError, match="AddN"):
        s.run(total, feed)


# -- recomputation ----------------------------------------------------------------------------
def _activation_graph(marked=False):
    """Eight activations of a fed x, each read by its own gradient: without recomputation they
    all live from the forward pass to the backward pass."""
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(1)
        x = tf.placeholder(tf.float32, [128, 1024])
        ws = [tf.Variable(tf.random_normal([1024], seed=i), name=f"w{i}") for i in range(8)]

        def block(x):
            acts = [tf.sigmoid, tf.tanh, tf.nn.relu, tf.nn.relu6, tf.nn.elu, tf.nn.selu]
            acts += [tf.nn.softplus, tf.square]
            return tf.add_n([tf.reduce_sum(f(x) * w) for f, w in zip(acts, ws, strict=True)])

        loss = (tf.recompute_grad(block) if marked else block)(x)
        grads = tf.gradients(loss, ws)
        init = tf.global_variables_initializer()
    feed = {x: np.random.RandomState(0).randn(128, 1024).astype(np.float32)}
    return g, [loss] + grads, feed, init


@pytest.mark.parametrize(
    ("level", "marked"),
    [(R.RECOMPUTATION_HEURISTICS, False), (R.MANUAL, True), (R.DEFAULT_MEM_OPT, True)],
)
def test_recomputed_activations_give_the_same_gradients_with_lower_peak(level, marked):
    g, fetches, feed, init = _activation_graph(marked)
    on, nodes, peak_on = _run(g, fetches, feed, _config(level), init)
    off, nodes_off, peak_off = _run(g, fetches, feed, _config(R.NO_MEM_OPT), init)
    _assert_same(on, off)
    copies = [n for n in nodes.values() if n.name.startswith("Recomputed/")]
    assert {n.op for n in copies} >= {"Sigmoid", "Tanh", "Relu"}
    assert not any(n.name.startswith("Recomputed/") for n in nodes_off.values())
    for c in copies:
        assert "_recompute_hint" not in c.attr
    # each copy waits for the backward pass: a control input from a gradient node
    assert all(any(i.startswith("^gradients/") for i in c.input) for c in copies)
    assert peak_on[CPU0] < 0.6 * peak_off[CPU0]


@pytest.mark.parametrize("branch", [True, False])
def test_graphs_with_control_flow_recompute_outside_loops_and_control_flow_ops(branch):
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(1)
        x = tf.placeholder(tf.float32, [128, 1024])
        flag = tf.placeholder(tf.bool, [])
        ws = [tf.Variable(tf.random_normal([1024], seed=i), name=f"w{i}") for i in range(4)]
        acts = [tf.sigmoid, tf.tanh, tf.nn.relu]
        loss = tf.add_n([tf.reduce_sum(f(x) * w) for f, w in zip(acts, ws[:3], strict=True)])
        # a loop (its nodes stay alone) and a cond (its Switch's readers stay alone)
        _, looped = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.tanh(v)), (0, x))
        picked = tf.cond(flag, lambda: tf.sigmoid(x * ws[3]), lambda: tf.tanh(x * ws[3]))
        loss += tf.reduce_sum(looped * ws[3]) + tf.reduce_sum(picked)
        grads = tf.gradients(loss, ws)
        init = tf.global_variables_initializer()
    rng = np.random.RandomState(0)
    feed = {x: rng.randn(128, 1024).astype(np.float32), flag: branch}
    fetches = [loss] + grads
    on, nodes, peak_on = _run(g, fetches, feed, _config(R.HEURISTICS), init)
    off, _, peak_off = _run(g, fetches, feed, _config(R.NO_MEM_OPT), init)
    _assert_same(on, off)
    copies = {n.name for n in nodes.values() if n.name.startswith("Recomputed/")}
    assert {"Recomputed/Sigmoid", "Recomputed/Tanh", "Recomputed/Relu"} <= copies
    assert not any("while/" in c or "cond/" in c for c in copies)
    assert peak_on[CPU0] < peak_off[CPU0]


def test_heuristics_leave_unmarked_activations_alone_when_recomputing_saves_nothing():
    """relu(x @ w + b): recomputing relu would keep x @ w + b alive instead."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [8, 16])
        w = tf.Variable(tf.ones([16, 16]))
        b = tf.Variable(tf.zeros([16]))
        loss = tf.reduce_sum(tf.matmul(tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w), b)), w))
        grads = tf.gradients(loss, [w, b])
        init = tf.global_variables_initializer()
    feed = {x: np.ones((8, 16), np.float32)}
    _, nodes, _ = _run(g, grads, feed, _config(R.HEURISTICS), init)
    assert not any(n.startswith("Recomputed/") for n in nodes)
    # x * w is read by the backward pass only through a Shape (the gradient of `+ x * b`)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 16])
        w = tf.Variable(tf.ones([16]))
        b = tf.Variable(tf.zeros([16]))
        loss = tf.reduce_sum(tf.sigmoid(x * w + x * b))
        grads = tf.gradients(loss, [w, b])
        init = tf.global_variables_initializer()
    feed = {x: np.ones((8, 16), np.float32)}
    _, nodes, _ = _run(g, grads, feed, _config(R.HEURISTICS), init)
    assert not any(n.startswith("Recomputed/") for n in nodes)
    # marked nodes are only recomputed when the level says so
    g, fetches, feed, init = _activation_graph(marked=True)
    for level in (R.NO_MEM_OPT, R.SCHEDULING_HEURISTICS, R.SWAPPING_HEURISTICS):
        _, nodes, _ = _run(g, fetches, feed, _config(level), init)
        assert not any(n.startswith("Recomputed/") for n in nodes), level


def test_target_scope_option_and_disable_meta_optimizer():
    g, fetches, feed, init = _activation_graph(marked=True)
    config = _config(R.MANUAL)
    config.graph_options.rewrite_options.memory_optimizer_target_node_name_scope = "nothing/"
    _, nodes, _ = _run(g, fetches, feed, config, init)
    assert not any(n.startswith("Recomputed/") for n in nodes)
    config = _config(R.MANUAL)
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    _, nodes, _ = _run(g, fetches, feed, config, init)
    assert not any(n.startswith("Recomputed/") for n in nodes)


def test_graphs_with_loops_are_left_alone():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [4])
        w = tf.Variable(tf.ones([4]))

        @tf.recompute_grad
        def body_value(v):
            return tf.tanh(v * w)

        _, y = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, body_value(v)), (0, x))
        grads = tf.gradients(tf.reduce_sum(y), [w])
        init = tf.global_variables_initializer()
    feed = {x: np.arange(4, dtype=np.float32)}
    on, nodes, _ = _run(g, grads, feed, _config(R.HEURISTICS), init)
    off, _, _ = _run(g, grads, feed, _config(R.NO_MEM_OPT), init)
    _assert_same(on, off)
    assert not any(n.startswith("Recomputed/") for n in nodes)


def test_recompute_grad_refuses_a_non_bool_tupleize_grads():
    with pytest.raises(TypeError, match="tupleize_grads"):
        tf.contrib.layers.recompute_grad(lambda x: x, tupleize_grads="yes")


# -- swapping ---------------------------------------------------------------------------------
def _swap_graph(mark=False):
    """Four tanh layers on CPU:1 whose 1 MiB activations wait for the backward pass."""
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(1)
        x = tf.placeholder(tf.float32, [1024, 256])
        with tf.device("/device:CPU:1"):
            w = tf.Variable(tf.random_normal([256, 256], stddev=0.06, seed=1))
            h = x
            for i in range(4):
                h = tf.tanh(tf.matmul(h, w), name=f"h{i}")
            grads = tf.gradients(tf.reduce_sum(h), [w])
        init = tf.global_variables_initializer()
        if mark:  # the gradient of h1's matmul swaps its input h0 (index 0) to the host
            g.get_operation_by_name("gradients/MatMul_1_grad/MatMul_1")._set_attr(
                "_swap_to_host", [0]
            )
    feed = {x: np.random.RandomState(0).randn(1024, 256).astype(np.float32)}
    return g, [h] + grads, feed, init


@pytest.mark.parametrize(("level", "mark"), [(R.SWAPPING_HEURISTICS, False), (R.MANUAL, True)])
def test_swapping_to_the_host_of_a_device_with_its_own_memory(level, mark):
    g, fetches, feed, init = _swap_graph(mark)
    config = _config(level, separate=["/device:CPU:1"], cpus=2)
    on, nodes, peak_on = _run(g, fetches, feed, config, init)
    off, _, peak_off = _run(g, fetches, feed, _config(R.NO_MEM_OPT, cpus=2), init)
    _assert_same(on, off)
    out, back = nodes["swap_out_h0"], nodes["swap_in_h0"]
    assert (out.op, out.device) == ("_CopyFromGpuToHost", CPU0)
    assert (back.op, back.device) == ("_CopyFromHostToGpu", CPU1)
    assert any(i.startswith("^gradients/") for i in back.input)  # swapped in when needed
    assert peak_on[CPU1] < peak_off[CPU1]


def test_no_swapping_on_a_cpu_that_shares_the_host_memory():
    g, fetches, feed, init = _swap_graph(mark=True)
    _, nodes, _ = _run(g, fetches, feed, _config(R.HEURISTICS, cpus=2), init)
    assert not any(n.startswith("swap_") for n in nodes)


def test_a_swap_mark_naming_a_missing_input_is_refused():
    g, fetches, feed, init = _swap_graph()
    g.get_operation_by_name("gradients/MatMul_1_grad/MatMul_1")._set_attr("_swap_to_host", [5])
    config = _config(R.MANUAL, separate=["/device:CPU:1"], cpus=2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="_swap_to_host .* names input 5"):
        _run(g, fetches, feed, config, init)

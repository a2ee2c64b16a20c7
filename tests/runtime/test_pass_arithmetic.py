"""Arithmetic simplification (Grappler's ArithmeticOptimizer and Identity bypass) as a Session
runs it: each rewrite, the broadcasting and aliasing cases it must leave alone, and its options."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import RewriterConfig


def _config(arithmetic=0, disable_meta=False, min_graph_nodes=0, devices=1):
    config = tf.ConfigProto(device_count={"CPU": devices})
    config.graph_options.rewrite_options.arithmetic_optimization = arithmetic
    config.graph_options.rewrite_options.disable_meta_optimizer = disable_meta
    config.graph_options.rewrite_options.min_graph_nodes = min_graph_nodes
    return config


OFF = _config(RewriterConfig.OFF)


def _run(fetches, feeds=None, config=None):
    """Returns (values, {node name: NodeDef} of every node that ran)."""
    with tf.Session(config=config) as s:
        s.run(tf.global_variables_initializer())
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True)
        out = s.run(fetches, feeds, options=opts, run_metadata=md)
    return out, {n.name: n for g in md.partition_graphs for n in g.node}


def _ops(nodes):
    return sorted(n.op for n in nodes.values() if not n.op.startswith("_"))


def _same(fetches, feeds=None, devices=1):
    """Runs with the pass on and off; returns the nodes that ran with it on."""
    on, nodes = _run(fetches, feeds, _config(devices=devices))
    off, _ = _run(fetches, feeds, _config(RewriterConfig.OFF, devices=devices))
    for a, b in zip(on if isinstance(on, list) else [on], off if isinstance(off, list) else [off]):
        np.testing.assert_array_equal(a, b)
    return nodes


def test_neutral_operands_are_dropped():
    x = tf.placeholder(tf.float32, [2, 3])
    y = tf.exp((1.0 * (x * 1.0) + 0.0) - 0.0) + tf.zeros([3])
    nodes = _same(y, {x: np.arange(6, dtype=np.float32).reshape(2, 3)})
    assert _ops(nodes) == ["Exp", "Identity"]  # the fetched `+ zeros` keeps its name
    assert nodes[y.op.name].op == "Identity"


def test_zero_minus_x_and_broadcasting_operands_are_kept():
    x = tf.placeholder(tf.float32, [3])
    p = tf.placeholder(tf.float32, [None, 3])
    a = tf.exp(0.0 - x)  # a negation, not x
    b = tf.exp(x * tf.ones([2, 3]))  # broadcasting grows x to (2, 3)
    c = tf.exp(p * tf.ones([1, 3]))  # keeps p's shape whatever its first dimension
    s = tf.placeholder(tf.float32, [])
    d = tf.exp(s + tf.zeros([1]))  # grows a scalar to (1,)
    feeds = {x: np.ones(3, np.float32), p: np.ones((4, 3), np.float32), s: 2.0}
    nodes = _same([a, b, c, d], feeds)
    assert _ops(nodes).count("Sub") == 1
    assert _ops(nodes).count("Mul") == 1
    assert _ops(nodes).count("AddV2") == 1


def test_cancelling_transposes_and_single_addn():
    x = tf.placeholder(tf.float32, [2, 3, 4])
    y = tf.exp(tf.transpose(tf.transpose(x, [2, 0, 1]), [1, 2, 0]))
    z = tf.exp(tf.transpose(tf.transpose(x, [2, 0, 1]), [2, 1, 0]))  # does not cancel
    w = tf.exp(tf.add_n([x]))
    nodes = _same([y, z, w], {x: np.random.RandomState(0).rand(2, 3, 4).astype(np.float32)})
    assert _ops(nodes).count("Transpose") == 2 and "AddN" not in _ops(nodes)


def test_identity_chains_collapse_but_fetched_and_ref_identities_stay():
    x = tf.placeholder(tf.float32, [2])
    chain = tf.identity(tf.identity(tf.identity(x)))
    y = tf.exp(chain)
    v = tf.Variable([1.0, 2.0])
    r = tf.exp(tf.identity(v))  # reads the variable's buffer
    nodes = _same([y, chain, r], {x: np.ones(2, np.float32)})
    assert chain.op.name in nodes  # fetched: kept by name
    assert _ops(nodes).count("Identity") == 2  # the fetched one (reading x) and the ref read
    assert list(nodes[chain.op.name].input) == ["_recv_Placeholder_0"]
    nodes = _same([y, r], {x: np.ones(2, np.float32)})
    assert _ops(nodes).count("Identity") == 1  # the ref read


def test_identity_across_devices_is_kept():
    x = tf.placeholder(tf.float32, [2])
    with tf.device("/cpu:1"):
        moved = tf.identity(tf.identity(x))
    y = tf.exp(moved)
    nodes = _same(y, {x: np.ones(2, np.float32)}, devices=2)
    assert _ops(nodes).count("Identity") == 2  # both sit on a device boundary


def test_a_snapshot_of_a_ref_variable_is_not_aliased():
    v = tf.Variable(1.0)
    snapshot = tf.exp(v + 0.0) * 1.0  # `+ 0.0` copies the buffer before the update
    read = v.value() * 1.0
    with tf.control_dependencies([snapshot, read]):
        update = tf.assign_add(v, 1.0)
    with tf.Session() as s:
        s.run(v.initializer)
        got = s.run([snapshot, read, update])
    assert got == [np.exp(np.float32(1.0)), 1.0, 2.0]


@pytest.mark.parametrize(
    "config, rewrites",
    [
        (_config(), True),
        (OFF, False),
        (_config(disable_meta=True), False),
        (_config(min_graph_nodes=10), False),  # Grappler skips graphs this small
        (_config(min_graph_nodes=-1), True),
    ],
)
def test_options_switch_it_as_in_tensorflow(config, rewrites):
    x = tf.placeholder(tf.float32, [2])
    y = tf.exp(x * 1.0)
    _, nodes = _run(y, {x: np.ones(2, np.float32)}, config)
    assert ("Mul" not in _ops(nodes)) == rewrites

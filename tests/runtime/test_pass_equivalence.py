"""The graph passes change what runs, never what it computes: every fixture graph TensorFlow
exported, the examples' training steps and random graphs give the same values with the passes on
(the defaults) and off (opt_level L0, Grappler's rewrites OFF, NO_MEM_OPT), bit for bit (up to
the sign of zero, which `x + 0` may change as in TensorFlow); the examples' training steps also
with every memory optimization on (HEURISTICS: recomputation and accumulated sums). One rewrite
changes rounding: a weight gradient fused into its update (passes/weight_updates.py) is added
to the variable by gemm as it is computed, not rounded first; where one ran, values agree to a
few float ulps."""

from __future__ import annotations

import json

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import RewriterConfig
from flowgraph.examples import training_graphs
from tests.helpers import TF_FIXTURES

GRAPHS = TF_FIXTURES / "graphs"
CASES = json.loads((GRAPHS / "cases.json").read_text()) if (GRAPHS / "cases.json").is_file() else {}


def _off() -> tf.ConfigProto:
    config = tf.ConfigProto()
    config.graph_options.optimizer_options.opt_level = tf.OptimizerOptions.L0
    rw = config.graph_options.rewrite_options
    rw.constant_folding = rw.arithmetic_optimization = RewriterConfig.OFF
    rw.dependency_optimization = RewriterConfig.OFF
    rw.memory_optimization = RewriterConfig.NO_MEM_OPT
    return config


def _memory_heuristics() -> tf.ConfigProto:
    config = tf.ConfigProto()
    config.graph_options.rewrite_options.memory_optimization = RewriterConfig.HEURISTICS
    return config


def _runs(graph: tf.Graph, steps: list, config) -> tuple[list, int, bool]:
    """Values of every step's fetches, how many nodes ran in the last step, and whether a
    fused weight-gradient update ran."""
    values = []
    fused = False
    with tf.Session(graph=graph, config=config) as s:
        for fetches, feeds in steps:
            md = tf.RunMetadata()
            opts = tf.RunOptions(output_partition_graphs=True)
            values.append(s.run(fetches, feeds, options=opts, run_metadata=md))
            ops = {n.op for g in md.partition_graphs for n in g.node}
            fused |= any(op.startswith("_FusedMatMul") for op in ops)
    return values, sum(len(g.node) for g in md.partition_graphs), fused


def _assert_same(on, off, rounding: bool):
    for a, b in zip(on, off, strict=True):
        if isinstance(a, (list, tuple)):
            _assert_same(a, b, rounding)
        elif a is not None or b is not None:
            a, b = np.asarray(a), np.asarray(b)
            if rounding and a.dtype.kind == "f":
                eps = np.finfo(a.dtype).eps
                np.testing.assert_allclose(a, b, rtol=64 * eps, atol=64 * eps * np.abs(b).max())
            else:
                np.testing.assert_array_equal(a, b)


def _compare(graph: tf.Graph, steps: list, on_config=None) -> tuple[int, int]:
    on, n_on, fused = _runs(graph, steps, on_config)
    off, n_off, _ = _runs(graph, steps, _off())
    _assert_same(on, off, rounding=fused)
    return n_on, n_off


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_fixture_graphs(case_name):
    case = CASES[case_name]
    gd = tf.GraphDef()
    gd.ParseFromString((GRAPHS / case["pb"]).read_bytes())
    npz = np.load(GRAPHS / case["npz"])
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(gd, name="")
    runs = case.get("steps") or [case]
    steps = [
        (
            list(st.get("fetches", {})) + list(st.get("targets", [])),
            {name: npz[key] for name, key in st.get("feeds", {}).items()},
        )
        for st in runs
    ]
    _compare(g, steps)


@pytest.mark.parametrize("name", sorted(training_graphs.BUILDERS))
def test_example_training_steps(name):
    g = tf.Graph()
    with g.as_default():
        graph = training_graphs.BUILDERS[name]()
        init = tf.global_variables_initializer()
    steps = [(init, None)] + [([graph.loss, graph.train], graph.feeds)] * 3
    n_on, n_off = _compare(g, steps)
    assert n_on < n_off  # the passes did something
    _compare(g, steps, _memory_heuristics())


def _random_graph(rng: np.random.RandomState):
    """Element-wise, transposing, reducing and shape-reading ops over fed, constant and neutral
    (ones, zeros) inputs, so that constant subgraphs and simplifiable nodes both occur."""
    x = tf.placeholder(tf.float32, [2, 3])
    p = tf.placeholder(tf.float32, [None, 3])
    pool = [x, p, tf.constant(rng.randn(2, 3).astype(np.float32)), tf.constant(2.0)]
    pool += [tf.ones([3]), tf.zeros([2, 3]), tf.constant(1.0), tf.constant(0.0)]
    unary = [
        tf.identity,
        tf.tanh,
        lambda a: tf.add_n([a]),
        lambda a: tf.transpose(tf.transpose(a)),
        lambda a: tf.reduce_sum(a, keepdims=True),
        lambda a: a * tf.cast(tf.size(a), tf.float32),
        lambda a: a + tf.reduce_sum(tf.cast(tf.shape_n([a])[0], tf.float32)),
    ]
    binary = [tf.add, tf.subtract, tf.multiply, lambda a, b: tf.maximum(a, b) * 0.5]
    for _ in range(rng.randint(8, 20)):
        a, b = (pool[i] for i in rng.randint(len(pool), size=2))
        if rng.rand() < 0.4:
            pool.append(unary[rng.randint(len(unary))](a))
        else:
            pool.append(binary[rng.randint(len(binary))](a, b))
    feeds = {x: rng.randn(2, 3).astype(np.float32), p: rng.randn(2, 3).astype(np.float32)}
    return pool[-4:], feeds


@pytest.mark.parametrize("seed", range(30))
def test_random_graphs(seed):
    g = tf.Graph()
    with g.as_default():
        fetches, feeds = _random_graph(np.random.RandomState(seed))
    _compare(g, [(fetches, feeds)] * 2)

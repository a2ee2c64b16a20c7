"""Placement by the cost model's simulated execution (whitepaper §3.2.1), switched on by
`ConfigProto.experimental.cost_model_placement`, with declared relative device speeds."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import dtypes
from flowgraph.core.protos import RewriterConfig, StepStats
from flowgraph.runtime.cost_model import CostModel, CostParams
from flowgraph.runtime.nodes import make_node

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


def _config(speeds=None, devices=2, **graph_options) -> tf.ConfigProto:
    config = tf.ConfigProto(device_count={"CPU": devices})
    config.experimental.cost_model_placement = True
    # The chains multiply constants: keep constant folding (both TF switches) from making each
    # chain one Const before placement.
    config.graph_options.optimizer_options.opt_level = tf.OptimizerOptions.L0
    config.graph_options.rewrite_options.constant_folding = RewriterConfig.OFF
    for spec, speed in (speeds or {}).items():
        config.experimental.device_speeds[spec] = speed
    for key, value in graph_options.items():
        setattr(config.graph_options, key, value)
    return config


def _devices(session, fetches, feeds=None) -> dict:
    """Node name -> device, from the partition graphs of one run."""
    md = tf.RunMetadata()
    opts = tf.RunOptions(output_partition_graphs=True)
    session.run(fetches, feeds, options=opts, run_metadata=md)
    return {n.name: n.device for g in md.partition_graphs for n in g.node}


def _chain(x, w, name: str, length: int = 3):
    h = x
    for i in range(length):
        h = tf.matmul(h, w, name=f"{name}_{i}")
    return h


def _eye(k: int = 1):
    """A distinct constant per chain, so common subexpression elimination keeps them apart."""
    return tf.constant(k * np.eye(200, dtype=np.float32))


def test_independent_chains_spread_over_devices():
    a, b = _eye(1), _eye(2)
    left, right = _chain(a, a, "left"), _chain(b, b, "right")
    total = left + right
    with tf.Session(config=_config()) as s:
        assert s.run(total)[0, 0] == 17.0  # 1 + 2**4
        devices = _devices(s, total)
    on_left = {devices[f"left_{i}"] for i in range(3)}
    on_right = {devices[f"right_{i}"] for i in range(3)}
    assert len(on_left) == 1 and len(on_right) == 1  # each chain stays together
    assert on_left | on_right == {CPU0, CPU1}


def test_first_fit_stays_the_default():
    total = _chain(_eye(1), _eye(1), "left") + _chain(_eye(2), _eye(1), "right")
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as s:
        assert set(_devices(s, total).values()) == {CPU0}


def test_a_chain_stays_where_its_input_is_when_moving_costs_more_than_it_saves():
    with tf.device("/cpu:0"):
        big = tf.random_uniform([1000, 1000])  # 4 MB: ~4 ms on the modelled 1 GB/s link
    cheap = tf.nn.relu(big, name="cheap") * 2.0  # element-wise: ~1 ms, 0.5 ms on CPU:1
    with tf.device("/cpu:0"):
        small = tf.random_uniform([1000, 30])
    heavy = tf.matmul(small, small, transpose_a=True, name="heavy")  # 60 MFLOP, 120 kB in
    heavy = tf.matmul(tf.matmul(heavy, heavy), heavy, name="heavy_out")
    with tf.Session(config=_config({"/cpu:1": 2.0})) as s:
        devices = _devices(s, [cheap, heavy])
    assert devices["cheap"] == CPU0  # moving 4 MB costs more than halving 1 ms
    assert devices["heavy"] == CPU1  # halving 6 ms is worth moving 120 kB
    assert devices["heavy_out"] == CPU1  # and its consumers follow it


def test_declared_speed_draws_work_to_the_faster_device():
    chains = [_chain(_eye(k + 1), _eye(1), f"c{k}") for k in range(4)]
    total = tf.add_n(chains)
    with tf.Session(config=_config({"/device:CPU:1": 3.0})) as s:
        devices = _devices(s, total)
    on_fast = sum(devices[f"c{k}_0"] == CPU1 for k in range(4))
    assert on_fast == 3  # a third of the time per chain: three chains there, one on CPU:0


def test_measured_costs_move_an_expensive_node_to_the_faster_device():
    with tf.device("/cpu:0"):
        x = tf.placeholder(tf.float32, [None, None])  # unknown shape: estimated as tiny
    w = tf.Variable(1.0, name="w")
    y = tf.matmul(x, x, name="y") * w
    xv = np.random.RandomState(0).rand(600, 600).astype(np.float32)
    config = _config({"/cpu:1": 10.0}, build_cost_model=1, build_cost_model_after=2)
    with tf.Session(config=config) as s:
        s.run(w.initializer)
        before = _devices(s, y, {x: xv})  # step 1 (0 initialized w): statically placed
        measured = _devices(s, y, {x: xv})  # step 2: measured, then placed again
        after = _devices(s, y, {x: xv})
        np.testing.assert_allclose(s.run(y, {x: xv}), xv @ xv, rtol=1e-5)
    assert before["y"] == measured["y"] == CPU0  # a 1x1 matmul is not worth a transfer
    assert after["y"] == CPU1  # measured ~10 ms, ~1 ms on CPU:1 plus ~1.5 ms to move 1.4 MB
    assert after["w"] == before["w"]  # state never moves


def test_traced_runs_feed_the_cost_model_without_build_cost_model():
    with tf.device("/cpu:0"):
        x = tf.placeholder(tf.float32, [None, None])
    y = tf.matmul(x, x, name="y")
    xv = np.random.RandomState(0).rand(600, 600).astype(np.float32)
    with tf.Session(config=_config({"/cpu:1": 10.0})) as s:
        assert _devices(s, y, {x: xv})["y"] == CPU0
        s.run(y, {x: xv}, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))
        assert _devices(s, y, {x: xv})["y"] == CPU1


def test_constraints_and_colocation_hold_under_the_cost_model():
    v = tf.Variable(tf.zeros([100, 100]))
    with tf.device("/cpu:1"):
        pinned = tf.matmul(v, v, name="pinned")
    inc = tf.assign_add(v, tf.ones([100, 100]), name="inc")  # a ref input: with the variable
    with tf.device("/cpu:7"):
        soft = tf.identity(pinned, name="soft")
    config = _config({"/cpu:0": 5.0})
    config.allow_soft_placement = True
    with tf.Session(config=config) as s:
        s.run(v.initializer)
        devices = _devices(s, [soft, inc])
        assert s.run(v)[0, 0] == 1.0
    assert devices["pinned"] == CPU1
    assert devices["inc"] == devices[v.op.name]
    assert devices["soft"] in (CPU0, CPU1)


def test_log_device_placement_shows_the_estimates(capfd):
    a = tf.constant(np.eye(50, dtype=np.float32), name="a")
    b = tf.matmul(a, a, name="b")
    config = _config()
    config.log_device_placement = True
    with tf.Session(config=config) as s:
        s.run(b)
    err = capfd.readouterr().err
    line = next(line for line in err.splitlines() if line.startswith("b: (MatMul): "))
    assert "cost model: finishes at" in line and "CPU:0" in line and "CPU:1" in line


# -- the cost model itself ------------------------------------------------------------------
def _const(name, shape):
    return make_node(
        name, "Const", attrs={"value": np.zeros(shape, np.float32), "dtype": dtypes.float32}
    )


def test_static_estimates_from_inferred_shapes():
    a, b = _const("a", (30, 40)), _const("b", (40, 50))
    mm = make_node("mm", "MatMul", inputs=[("a", 0), ("b", 0)], attrs={"T": dtypes.float32})
    model = CostModel(params=CostParams(flops_per_us=1e3, bytes_per_us=1e9, overhead_us=1.0))
    model.analyze([a, b, mm])
    assert model.output_bytes("mm", 0) == 30 * 50 * 4
    assert model.static_us(mm) == pytest.approx(1.0 + 2 * 30 * 40 * 50 / 1e3)
    assert model.compute_us(mm, CPU0) == model.static_us(mm)
    assert model.transfer_us(1000, CPU0, CPU0) == 0.0
    assert model.transfer_us(1000, CPU0, CPU1) == pytest.approx(20.0 + 1.0)


def test_measured_costs_replace_estimates_scaled_by_device_speed():
    a = _const("a", (2, 2))
    neg = make_node("neg", "Neg", inputs=[("a", 0)], attrs={"T": dtypes.float32})
    model = CostModel({"/cpu:1": 4.0})
    model.analyze([a, neg])
    stats = StepStats()
    ns = stats.dev_stats.add(device=CPU1).node_stats.add(node_name="neg")
    ns.op_end_rel_nanos = 100_000  # 100 us on a device 4x faster: 400 us of speed-1 work
    ns.output.add(slot=0).tensor_description.allocation_description.requested_bytes = 4096
    assert model.record(stats) == 1
    assert model.compute_us(neg, CPU0) == pytest.approx(400.0)
    assert model.compute_us(neg, CPU1) == pytest.approx(100.0)
    assert model.output_bytes("neg", 0) == 4096


def test_device_speeds_most_specific_key_wins_and_must_be_positive():
    model = CostModel({"CPU": 2.0, "/device:CPU:1": 8.0})
    assert model.speed(CPU0) == 2.0 and model.speed(CPU1) == 8.0
    assert model.speed("/job:localhost/replica:0/task:0/device:GPU:0") == 1.0
    with pytest.raises(ValueError, match="positive"):
        CostModel({"/cpu:0": 0.0})

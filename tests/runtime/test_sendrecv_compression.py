"""Lossy compression of cross-device float32 edges (whitepaper §5.5), switched by TF's
`GraphOptions.enable_bfloat16_sendrecv`: the wire carries the top 16 bits of each float32."""

import numpy as np
import pytest

import flowgraph as tf

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


def _config(compress: bool) -> tf.ConfigProto:
    config = tf.ConfigProto(device_count={"CPU": 2})
    config.graph_options.enable_bfloat16_sendrecv = compress
    return config


def _values() -> np.ndarray:
    rng = np.random.RandomState(7)
    special = [np.inf, -np.inf, 3.4e38, -3.4e38, 0.0, -0.0, 1e-40, -1e-40, 1e-45, 1.0, -2.5]
    return np.concatenate([rng.randn(4096) * 1e3, rng.rand(1000) * 1e-30, special]).astype(
        np.float32
    )


def _truncated(x: np.ndarray) -> np.ndarray:
    """The paper's conversion: keep sign, exponent and 7 mantissa bits; zeros fill the rest."""
    return (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def _cross_device_identity():
    with tf.device("/cpu:0"):
        x = tf.placeholder(tf.float32, [None])
        a = x * 1.0  # computed on CPU:0, so the edge to CPU:1 crosses devices
    with tf.device("/cpu:1"):
        b = tf.identity(a)
        c = b + 0.0  # a second consumer on CPU:1 shares the one received tensor
    return x, b, c


def _run_traced(config, fetches, feeds):
    md = tf.RunMetadata()
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, output_partition_graphs=True)
    with tf.Session(config=config) as s:
        out = s.run(fetches, feeds, options=opts, run_metadata=md)
    return out, md


def test_values_are_truncated_to_16_bits_and_widened_on_receipt():
    x, b, c = _cross_device_identity()
    xv = _values()
    (bv, cv), _ = _run_traced(_config(True), [b, c], {x: xv})
    assert bv.dtype == np.float32
    np.testing.assert_array_equal(bv.view(np.uint32), _truncated(xv).view(np.uint32))
    np.testing.assert_array_equal(cv, bv)
    finite = np.isfinite(xv) & (np.abs(xv) >= np.finfo(np.float32).tiny)
    rel = np.abs(bv[finite] - xv[finite]) / np.abs(xv[finite])
    assert rel.max() < 2.0**-7  # 7 explicit mantissa bits survive
    assert np.all(np.abs(bv[finite]) <= np.abs(xv[finite]))  # truncation rounds toward zero


def test_fetched_values_reach_the_client_exactly():
    with tf.device("/cpu:1"):
        x = tf.placeholder(tf.float32, [None])
        y = x * 1.0  # fetched from CPU:1 through the client's device, CPU:0
    xv = _values()
    with tf.Session(config=_config(True)) as s:
        np.testing.assert_array_equal(s.run(y, {x: xv}), xv)


def test_off_by_default_and_exact():
    x, b, _ = _cross_device_identity()
    xv = _values()
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as s:
        np.testing.assert_array_equal(s.run(b, {x: xv}), xv)


@pytest.mark.parametrize("compress, wire_bytes", [(False, 4), (True, 2)])
def test_bytes_on_the_wire_are_halved(compress, wire_bytes):
    x, b, _ = _cross_device_identity()
    xv = _values()
    _, md = _run_traced(_config(compress), b, {x: xv})
    recvs = [
        ns
        for dev in md.step_stats.dev_stats
        if dev.device == CPU1
        for ns in dev.node_stats
        if "_recv_" in ns.node_name
    ]
    assert len(recvs) == 1
    desc = recvs[0].output[0].tensor_description
    assert desc.allocation_description.requested_bytes == wire_bytes * xv.size
    expected = tf.bfloat16 if compress else tf.float32
    assert desc.dtype == expected.as_datatype_enum
    parts = {g.node[0].device: g for g in md.partition_graphs}
    sends = [n for n in parts[CPU0].node if n.op == "_Send" and n.attr["recv_device"].s]
    cross = [n for n in sends if n.attr["recv_device"].s.decode() == CPU1]
    assert [n.attr["T"].type for n in cross] == [expected.as_datatype_enum]
    casts = [n.op for g in md.partition_graphs for n in g.node if n.op == "Cast"]
    assert len(casts) == (2 if compress else 0)  # one each side, however many consumers


def test_other_dtypes_and_control_edges_cross_unchanged():
    with tf.device("/cpu:0"):
        i = tf.placeholder(tf.int32, [3])
        d = tf.placeholder(tf.float64, [3])
        f = tf.placeholder(tf.float32, [3])
        side = tf.assign_add(tf.Variable(0.0), 1.0)
    with tf.device("/cpu:1"), tf.control_dependencies([side]):
        out = [tf.identity(i), tf.identity(d), tf.reduce_sum(f)]
    feeds = {
        i: np.array([2**31 - 1, -5, 7], np.int32),
        d: np.array([1 / 3, 1e300, -2.0]),
        f: np.array([1.0, 2.0, 3.0], np.float32),
    }
    config = _config(True)
    with tf.Session(config=config) as s:
        s.run(tf.global_variables_initializer())
        iv, dv, fv = s.run(out, feeds)
    np.testing.assert_array_equal(iv, feeds[i])
    np.testing.assert_array_equal(dv, feeds[d])  # float64 is not compressed
    assert fv == 6.0  # small integers are exact in bfloat16


def test_training_across_devices_with_compression_converges():
    rng = np.random.RandomState(0)
    xs = rng.randn(64, 4).astype(np.float32)
    ys = xs @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
    with tf.device("/cpu:0"):
        x = tf.placeholder(tf.float32, [None, 4])
        w = tf.Variable(tf.zeros([4, 1]))
        h = tf.matmul(x, w)
    with tf.device("/cpu:1"):
        loss = tf.reduce_mean(tf.square(h - ys))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.Session(config=_config(True)) as s:
        s.run(tf.global_variables_initializer())
        for _ in range(200):
            s.run(train, {x: xs})
        assert s.run(loss, {x: xs}) < 1e-3

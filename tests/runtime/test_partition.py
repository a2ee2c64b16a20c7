"""Several devices in one process: placement by tf.device, partitioning into one graph per
device with _Send/_Recv pairs (whitepaper §3.2), and colocation constraints."""

import numpy as np
import pytest

import flowgraph as tf

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


def _two_cpus():
    return tf.ConfigProto(device_count={"CPU": 2})


def test_cross_device_edges_become_send_recv_pairs():
    with tf.device("/cpu:0"):
        x = tf.placeholder(tf.float32, [2, 2])
        a = tf.matmul(x, x)
    with tf.device("/cpu:1"):
        b = a * 2.0
        c = b + a  # a crosses once to CPU:1, however many consumers it has there
    with tf.device("/cpu:0"):
        d = tf.reduce_sum(c)
    with tf.Session(config=_two_cpus()) as s:
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True)
        xv = np.array([[1, 2], [3, 4]], np.float32)
        assert s.run(d, {x: xv}, options=opts, run_metadata=md) == pytest.approx(
            3 * (xv @ xv).sum()
        )
    parts = {g.node[0].device: g for g in md.partition_graphs}
    assert set(parts) == {CPU0, CPU1}
    ops = {dev: [n.op for n in g.node] for dev, g in parts.items()}
    assert ops[CPU0].count("_Send") == 2  # a -> CPU:1 and the fetch of d
    assert ops[CPU1].count("_Recv") == 1 and ops[CPU1].count("_Send") == 1  # c -> CPU:0
    assert all(n.device == dev for dev, g in parts.items() for n in g.node)


def test_control_edge_across_devices_and_colocation():
    v = tf.Variable(1.0)
    with tf.device("/cpu:1"):
        inc = tf.assign_add(v, 1.0)  # a ref input: placed with the variable, not on CPU:1
    with tf.device("/cpu:1"), tf.control_dependencies([inc]):
        out = tf.constant(5.0) * 2
    with tf.Session(config=_two_cpus()) as s:
        s.run(v.initializer)
        md = tf.RunMetadata()
        assert (
            s.run(out, options=tf.RunOptions(output_partition_graphs=True), run_metadata=md) == 10.0
        )
        assert s.run(v) == 2.0
    devices = {n.name: n.device for g in md.partition_graphs for n in g.node}
    assert devices[inc.op.name] == devices[v.op.name]


def test_unknown_device_is_a_clear_error_and_soft_placement_recovers():
    with tf.device("/cpu:7"):
        y = tf.constant(1.0) + 1.0
    with (
        tf.Session() as s,
        pytest.raises(tf.errors.InvalidArgumentError, match="Cannot assign a device"),
    ):
        s.run(y)
    with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as s:
        assert s.run(y) == 2.0


def test_kernel_error_on_second_device_names_node_and_device():
    with tf.device("/cpu:1"):
        bad = tf.matmul(
            tf.placeholder(tf.float32, [None, 3]), tf.placeholder(tf.float32, [None, 2]), name="bad"
        )
    with tf.Session(config=_two_cpus()) as s:
        a, b = bad.op.inputs
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"bad.*CPU:1"):
            s.run(bad, {a: np.ones((2, 3)), b: np.ones((2, 2))})


def test_every_partition_of_a_plan_validates():
    """runtime/nodes.validate after the passes: inputs exist, dtypes match, Sends have Recvs."""
    from flowgraph.runtime import nodes as rt_nodes

    with tf.device("/cpu:1"):
        x = tf.placeholder(tf.float32, [3])
        y = tf.reduce_sum(tf.square(x))
    with tf.device("/cpu:0"):
        z = y * 2.0
    with tf.Session(config=_two_cpus()) as s:
        s.run(z, {x: [1.0, 2.0, 3.0]})
        plans = list(s._master.session(s._handle)._plans.values())
    assert plans
    sends, recvs = set(), set()
    for plan in plans:
        for nodes in plan.graphs.values():
            rt_nodes.validate(nodes)
            sends |= {
                n.attrs["tensor_name"]
                for n in nodes
                if n.op == "_Send" and not n.attrs["client_terminated"]
            }
            recvs |= {
                n.attrs["tensor_name"]
                for n in nodes
                if n.op == "_Recv" and not n.attrs["client_terminated"]
            }
    assert sends and sends == recvs


def test_resource_consumers_are_placed_with_their_variable():
    with tf.device("/cpu:1"):
        v = tf.Variable([1.0, 2.0], use_resource=True)
    inc = v.assign_add([1.0, 1.0], read_value=False)  # no device asked: goes where v lives
    with tf.device("/cpu:0"):
        clash = v.assign_sub([1.0, 1.0], read_value=False)  # asks for another device than v's
    with tf.Session(config=_two_cpus()) as s:
        s.run(v.initializer)
        md = tf.RunMetadata()
        s.run(inc, options=tf.RunOptions(output_partition_graphs=True), run_metadata=md)
        np.testing.assert_allclose(s.run(v), [2.0, 3.0])
        with pytest.raises(tf.errors.InvalidArgumentError, match="colocate"):
            s.run(clash)
    devices = {n.name: n.device for g in md.partition_graphs for n in g.node}
    assert devices[inc.name] == devices[v.op.name] == CPU1
    soft = tf.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=True)
    with tf.Session(config=soft) as s:
        s.run(v.initializer)
        s.run(clash)
        np.testing.assert_allclose(s.run(v), [0.0, 1.0])

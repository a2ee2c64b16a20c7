"""Loops whose bodies span devices (whitepaper §4.4): partitioning gives every device that
holds part of a loop its own control loop, driven by the LoopCond value sent from the device
that leads the loop. Each case runs on 2 and 3 CPU devices of one process and must equal the
same graph on one device."""

import numpy as np
import pytest

import flowgraph as tf

TIMEOUT = tf.RunOptions(timeout_in_ms=20000)  # a hang fails the test instead of the suite


def _run(build, devices: int, feed=None):
    """Builds the graph with `dev(k)` naming the k-th of `devices` devices (all CPU:0 when
    devices == 1) and runs its fetches."""

    def dev(k):
        return f"/cpu:{k % devices}"

    g = tf.Graph()
    with g.as_default():
        fetches, feeds = build(dev)
        config = tf.ConfigProto(device_count={"CPU": max(devices, 1)})
        with tf.Session(config=config) as s:
            s.run(tf.global_variables_initializer())
            return s.run(fetches, feeds, options=TIMEOUT)


def _same_on_one_device(build, devices):
    want = _run(build, 1)
    got = _run(build, devices)
    for w, x in zip(want, got):
        np.testing.assert_allclose(x, w, rtol=1e-6)
    return got


def _simple(dev):
    def body(i, v):
        with tf.device(dev(1)):
            w = v * 2.0 + 1.0
        return i + 1, w

    with tf.device(dev(0)):
        i, v = tf.while_loop(lambda i, v: i < 5, body, [tf.constant(0), tf.constant(1.0)])
    return [i, v], None


def _three_stage(dev):
    x = tf.placeholder(tf.float32, [3])

    def body(i, v):
        with tf.device(dev(1)):
            a = tf.sin(v) + x  # x is a loop invariant sent to another device every iteration
        with tf.device(dev(2)):
            b = a * tf.cast(i, tf.float32)
        return i + 1, b + v

    i, v = tf.while_loop(lambda i, v: i < 4, body, [tf.constant(0), x])
    return [i, v], {x: np.array([0.5, -1.0, 2.0], np.float32)}


def _nested(dev):
    def outer(i, acc):
        def inner(j, a):
            with tf.device(dev(1)):
                a = a + tf.cast(i * j, tf.float32)
            return j + 1, a

        with tf.device(dev(2)):
            acc = acc * 1.5
        _, acc = tf.while_loop(lambda j, a: j < i, inner, [tf.constant(0), acc])
        return i + 1, acc

    i, acc = tf.while_loop(lambda i, a: i < 4, outer, [tf.constant(0), tf.constant(1.0)])
    return [i, acc], None


def _cond_inside(dev):
    def body(i, v):
        with tf.device(dev(1)):
            v = tf.cond(tf.equal(i % 2, 0), lambda: v + 10.0, lambda: v * 3.0)
        return i + 1, v

    i, v = tf.while_loop(lambda i, v: i < 6, body, [tf.constant(0), tf.constant(1.0)])
    return [i, v], None


def _cond_predicate_elsewhere(dev):
    def body(i, v):
        with tf.device(dev(1)):
            v = v * 2.0
        with tf.device(dev(2)):
            stop = tf.reduce_sum(v) > 50.0
        return i + 1, tf.cond(stop, lambda: v - 1.0, lambda: v)

    i, v = tf.while_loop(lambda i, v: i < 7, body, [tf.constant(0), tf.constant([1.0, 2.0])])
    return [i, v], None


@pytest.mark.parametrize("devices", [2, 3])
@pytest.mark.parametrize(
    "build", [_simple, _three_stage, _nested, _cond_inside, _cond_predicate_elsewhere]
)
def test_loop_across_devices_equals_one_device(build, devices):
    _same_on_one_device(build, devices)


def test_simple_values():
    assert _run(_simple, 2) == [5, 63.0]


def _gradient_graph(dev):
    x = tf.placeholder(tf.float32, [2])
    w = tf.Variable([0.5, -0.3])

    def body(i, v):
        with tf.device(dev(1)):
            v = tf.tanh(v * w)
        with tf.device(dev(2)):
            v = v + x
        return i + 1, v

    _, y = tf.while_loop(lambda i, v: i < 3, body, [tf.constant(0), x])
    loss = tf.reduce_sum(y * y)
    gx, gw = tf.gradients(loss, [x, w])
    return x, [loss, gx, gw]


@pytest.mark.parametrize("devices", [2, 3])
def test_gradient_of_a_loop_across_devices(devices):
    x0 = np.array([0.3, 0.7], np.float32)

    def build(dev):
        x, fetches = _gradient_graph(dev)
        return fetches, {x: x0}

    got = _same_on_one_device(build, devices)
    # and the gradient along x against central differences of the loss, same devices
    with tf.Graph().as_default():
        x, (loss, _gx, _) = _gradient_graph(lambda k: f"/cpu:{k % devices}")
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": devices})) as s:
            s.run(tf.global_variables_initializer())
            eps = 1e-3
            numeric = [
                (s.run(loss, {x: x0 + e}) - s.run(loss, {x: x0 - e})) / (2 * eps)
                for e in np.eye(2, dtype=np.float32) * eps
            ]
    np.testing.assert_allclose(got[1], numeric, rtol=2e-2)


@pytest.mark.parametrize("parallel", [1, 32])
def test_thousand_iterations_without_deadlock(parallel):
    def build(dev):
        def body(i, v):
            with tf.device(dev(1)):
                v = v + 1.0
            with tf.device(dev(2)):
                v = v * 1.0
            return i + 1, v

        i, v = tf.while_loop(
            lambda i, v: i < 1000,
            body,
            [tf.constant(0), tf.constant(0.0)],
            parallel_iterations=parallel,
        )
        return [i, v], None

    assert _run(build, 3) == [1000, 1000.0]


def test_partition_graphs_hold_control_loops():
    config = tf.ConfigProto(device_count={"CPU": 2})
    i, v = _simple(lambda k: f"/cpu:{k % 2}")[0]
    with tf.Session(config=config) as s:
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True, timeout_in_ms=20000)
        s.run([i, v], options=opts, run_metadata=md)
    graphs = {g.node[0].device[-5:]: g for g in md.partition_graphs}
    ops1 = [n.op for n in graphs["CPU:1"].node]
    assert {"Enter", "Merge", "Switch", "NextIteration"} <= set(ops1)
    assert "LoopCond" not in ops1  # CPU:1 follows the predicate CPU:0 sends
    recvs = [n for n in graphs["CPU:1"].node if n.op == "_Recv"]
    assert recvs and all(any(x.startswith("^_cloop") for x in n.input) for n in recvs)

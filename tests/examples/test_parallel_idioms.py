"""In-graph replication (towers, averaged gradients) and model parallelism (LSTM layers on
different devices), whitepaper §7 Figures 7 and 8: on three devices of one process and on three
tasks of an in-process cluster, each trains exactly as the same model on one device, and the
partition graphs show the work where the device strings put it. Concurrent steps on one device
(Figure 9): every client's step lands."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.distributed.local import InProcessCluster
from flowgraph.examples import concurrent_steps
from flowgraph.examples import in_graph_replication as igr
from flowgraph.examples import model_parallel_lstm as mpl

CPU3 = tf.ConfigProto(device_count={"CPU": 3})
LOCAL = [f"/cpu:{i}" for i in range(3)]
TASKS = [f"/job:worker/task:{i}" for i in range(3)]


@pytest.fixture
def three_tasks():
    cluster = InProcessCluster({"worker": 3})
    yield cluster
    cluster.close()


def _assert_same(run_a, run_b, rtol):
    (losses_a, vars_a), (losses_b, vars_b) = run_a, run_b
    np.testing.assert_allclose(losses_a, losses_b, rtol=rtol)
    assert vars_a.keys() == vars_b.keys()
    for name in vars_a:
        np.testing.assert_allclose(vars_a[name], vars_b[name], rtol=rtol, atol=1e-6)


def _partition_devices(build, feed_fn):
    """{device: [node types]} of one training step's partition graphs."""
    with tf.Graph().as_default():
        placeholders, fetches = build()
        with tf.Session(config=CPU3) as sess:
            sess.run(tf.global_variables_initializer())
            meta = tf.RunMetadata()
            sess.run(
                fetches,
                feed_fn(*placeholders),
                options=tf.RunOptions(output_partition_graphs=True),
                run_metadata=meta,
            )
    out = {}
    for graph_def in meta.partition_graphs:
        for node in graph_def.node:
            out.setdefault(node.device.split("/device:")[-1], []).append(node.op)
    return out


def test_towers_on_three_devices_train_as_one_tower_on_the_whole_batch():
    one = igr.train("", ["/cpu:0"], "/cpu:0", steps=4, batch_size=48, config=CPU3)
    three = igr.train("", LOCAL, "/cpu:0", steps=4, batch_size=48, config=CPU3)
    _assert_same(three, one, rtol=1e-5)
    assert three[0][-1] < three[0][0]


def test_towers_run_on_their_devices():
    def build():
        images, labels, loss, train_op = igr.build(LOCAL, "/cpu:0")
        return (images, labels), [loss, train_op]

    def feed(images, labels):
        return {images: np.ones((6, 64), np.float32), labels: np.arange(6) % 10}

    devices = _partition_devices(build, feed)
    for i in range(3):
        assert devices[f"CPU:{i}"].count("MatMul") >= 2  # each tower's forward layers
    assert "ApplyGradientDescent" in devices["CPU:0"]  # the update on the parameter device
    assert "ApplyGradientDescent" not in devices["CPU:1"] + devices["CPU:2"]


def test_towers_on_three_tasks(three_tasks):
    local = igr.train("", ["/cpu:0"], "/cpu:0", steps=3, batch_size=48)
    spread = igr.train(three_tasks.target, TASKS, TASKS[0], steps=3, batch_size=48)
    _assert_same(spread, local, rtol=1e-5)


def test_lstm_layers_on_three_devices_pipeline_through_send_recv():
    one = mpl.train("", ["/cpu:0"] * 3, steps=2, num_steps=4, config=CPU3)
    three = mpl.train("", LOCAL, steps=2, num_steps=4, config=CPU3)
    _assert_same(three, one, rtol=1e-5)

    def build():
        inputs, targets, loss, train_op = mpl.build(LOCAL, num_steps=4)
        return (inputs, targets), [loss, train_op]

    def feed(inputs, targets):
        return {inputs: np.ones((2, 4, 1), np.float32), targets: np.ones((2, 1), np.float32)}

    devices = _partition_devices(build, feed)
    for i in range(3):
        # each layer's 4 unrolled steps (cell MatMuls, forward and backward) on its device
        assert devices[f"CPU:{i}"].count("MatMul") >= 4
    # layer 1 receives each of layer 0's 4 outputs (and layer 0 the gradients back)
    assert devices["CPU:1"].count("_Recv") >= 4 and devices["CPU:0"].count("_Recv") >= 4


def test_lstm_layers_on_three_tasks(three_tasks):
    local = mpl.train("", ["/cpu:0"] * 3, steps=2, num_steps=4)
    spread = mpl.train(three_tasks.target, TASKS, steps=2, num_steps=4)
    _assert_same(spread, local, rtol=1e-5)


def test_concurrent_steps_on_one_device_all_land():
    """Figure 9: four clients step one Session at once; every step's update lands."""
    step, test_loss, _ = concurrent_steps.train(threads=4, steps_per_thread=50)
    assert step == 200
    assert test_loss < 0.5 * np.log(10)  # untrained: about ln(10)

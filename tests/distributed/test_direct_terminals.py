"""Feeds and fetches travel in the RunGraph of the task that uses or makes them
(distributed/direct_terminals.py): a step whose work is all on another task than the client's
is one RunGraph there and no RecvTensor; fetches from several tasks come back in their order;
partial runs still feed and fetch through the client's worker."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.distributed.local import InProcessCluster

W0, W1, PS = "/job:worker/task:0", "/job:worker/task:1", "/job:ps/task:0"


@pytest.fixture
def cluster():
    c = InProcessCluster({"worker": 2, "ps": 1})
    c.recvs, c.run_graphs = [], []
    for worker in c.workers.values():  # count the RecvTensor and RunGraph calls each serves
        recv, run = worker.recv_tensor_async, worker.run_graph

        def counted_recv(req, done, *opts, recv=recv, task=worker.task):
            c.recvs.append((task, req.rendezvous_key))
            recv(req, done, *opts)

        def counted_run(req, call_opts=None, run=run, task=worker.task):
            c.run_graphs.append(task)
            return run(req, call_opts)

        worker.recv_tensor_async, worker.run_graph = counted_recv, counted_run
    yield c
    c.close()


def _partition_devices(sess, fetches, feed) -> set:
    options = tf.RunOptions(output_partition_graphs=True)
    metadata = tf.RunMetadata()
    sess.run(fetches, feed, options=options, run_metadata=metadata)
    return {n.device for g in metadata.partition_graphs for n in g.node}


def test_a_step_all_on_another_task_is_one_run_graph_there(cluster):
    x = tf.placeholder(tf.float32, [3])
    with tf.device(W1):
        y = x * 2.0 + 1.0
    with tf.Session(cluster.target) as sess:
        value = np.array([1.0, 2.0, -3.0], np.float32)
        for _ in range(3):
            np.testing.assert_allclose(sess.run(y, {x: value}), value * 2 + 1)
        assert cluster.recvs == []
        assert cluster.run_graphs == ["/job:worker/replica:0/task:1"] * 3
        devices = _partition_devices(sess, y, {x: value})
    assert devices == {"/job:worker/replica:0/task:1/device:CPU:0"}


def test_fetches_of_several_tasks_come_back_in_order(cluster):
    x0, x1 = tf.placeholder(tf.float32, []), tf.placeholder(tf.float32, [])
    with tf.device(PS):
        v = tf.Variable(5.0)
    with tf.device(W1):
        a = x1 + 1.0
    with tf.device(W0):
        b = x0 - 1.0
    with tf.Session(cluster.target) as sess:
        sess.run(v.initializer)
        got = sess.run([a, v, b, a], {x0: 10.0, x1: 20.0})
        assert got == [21.0, 5.0, 9.0, 21.0]
        assert sess.run({"b": b, "v": v}, {x0: 0.0}) == {"b": -1.0, "v": 5.0}
    assert cluster.recvs == []  # each value was fed where it was used, fetched where made


def test_a_feed_used_on_two_tasks_stays_on_the_client(cluster):
    x = tf.placeholder(tf.float32, [2])
    with tf.device(W1):
        a = x * 3.0
    with tf.device(W0):
        b = x + a
    with tf.Session(cluster.target) as sess:
        np.testing.assert_allclose(sess.run(b, {x: [1.0, 2.0]}), [4.0, 8.0])
    # task 1 receives the feed from the client's worker, which receives a from task 1
    assert sorted(task for task, _ in cluster.recvs) == [
        "/job:worker/replica:0/task:0",
        "/job:worker/replica:0/task:1",
    ]


def test_partial_runs_feed_and_fetch_through_the_client(cluster):
    x = tf.placeholder(tf.float32, [])
    z = tf.placeholder(tf.float32, [])
    with tf.device(W1):
        y = x * 2.0
        w = y + z
    with tf.Session(cluster.target) as sess:
        handle = sess.partial_run_setup([y, w], [x, z])
        assert sess.partial_run(handle, y, {x: 3.0}) == 6.0
        assert sess.partial_run(handle, w, {z: 1.0}) == 7.0
        assert sess.run(w, {x: 1.0, z: 1.0}) == 3.0  # the same signature, run whole

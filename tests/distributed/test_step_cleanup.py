"""How a step ends on each worker (worker.py, master_session.py): a graph that sends nothing to
another task ends its step itself, so the master sends it no CleanupGraph and no rendezvous is
left behind; CleanupGraph cancels a step still running on a live peer (how a master cancels a
remote RunGraph, a blocking call) and refuses one that arrives after it."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.distributed import messages as m
from flowgraph.distributed.local import InProcessCluster

W0, W1 = "/job:worker/task:0", "/job:worker/task:1"
T1 = "/job:worker/replica:0/task:1"
STEP = tf.RunOptions(timeout_in_ms=60_000)  # a bound on a hung step; no step here needs it


@pytest.fixture
def cluster():
    c = InProcessCluster({"worker": 2})
    c.cleanups = []
    for worker in c.workers.values():
        real = worker.cleanup_graph

        def counted(req, real=real, task=worker.task):
            c.cleanups.append(task)
            return real(req)

        worker.cleanup_graph = counted
    yield c
    c.close()


def _open_steps(c) -> int:
    return sum(len(w.rendezvous_mgr) for w in c.workers.values())


def test_self_contained_graphs_end_their_steps_themselves(cluster):
    x = tf.placeholder(tf.float32, [2])
    with tf.device(W1):
        y = x * 2.0
    with tf.Session(cluster.target) as sess:
        for _ in range(3):
            np.testing.assert_allclose(sess.run(y, {x: [1.0, 2.0]}), [2.0, 4.0])
    assert cluster.cleanups == []
    assert _open_steps(cluster) == 0


def test_only_workers_that_send_to_another_task_get_cleanup_graph(cluster):
    x = tf.placeholder(tf.float32, [])
    with tf.device(W1):
        a = x + 1.0  # the feed comes to task 1 in its RunGraph; a goes to task 0
    with tf.device(W0):
        b = a * 2.0
    with tf.Session(cluster.target) as sess:
        assert sess.run(b, {x: 3.0}) == 8.0
        assert sess.run(b, {x: 1.0}) == 4.0
    assert cluster.cleanups == [T1, T1]
    assert _open_steps(cluster) == 0


def test_a_run_graph_after_its_cleanup_graph_is_refused(cluster):
    worker = cluster.workers[T1]
    worker.cleanup_graph(m.CleanupGraphRequest(step_id=77))
    request = m.RunGraphRequest(session_handle="s", graph_handle="s/1", step_id=77)
    with pytest.raises(tf.errors.CancelledError, match="ended by its master before it ran"):
        worker.run_graph(request)


def test_a_failing_task_cancels_the_blocked_remote_run_graph(grpc_cluster):
    cluster = grpc_cluster({"worker": 2})
    with tf.Graph().as_default():
        with tf.device(W1):
            queue = tf.FIFOQueue(2, tf.float32, shapes=[])
            blocked = queue.dequeue()  # nothing is ever enqueued: only cancelling ends it
        with tf.device(W0):
            bad = tf.debugging.check_numerics(tf.constant(np.nan), "not a number")
            y = blocked + bad
        with tf.Session(cluster.target("worker", 0)) as sess:
            with pytest.raises(tf.errors.InvalidArgumentError, match="not a number"):
                sess.run(y, options=STEP)
            sess.run(queue.enqueue(5.0), options=STEP)  # task 1 serves steps again
            assert sess.run(blocked, options=STEP) == 5.0

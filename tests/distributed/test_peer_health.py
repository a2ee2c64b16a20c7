"""Workers check the health of their peers (health.py, PeerWatch), with a real process as the
peer: a worker whose step waits on a Recv from a peer that hangs (SIGSTOP: its sockets stay
open, so no transfer fails by itself) ends that step with UnavailableError naming the peer and
itself, though the master checks nothing. The master then cancels the step's RunGraph on the
hung peer, which does not answer that either, so the master ends its calls to the peer: the
client's step reports the error while the peer is still stopped, and once it runs again
(SIGCONT) the session runs the next step. A step with a deadline ends by it, whatever the
peer does.

worker:0 (the master, its health checks turned off) and worker:1 are servers in this process,
so that the test sees worker:1's RunGraph end; worker:2 is a process."""

import threading

import pytest
from conftest import Cluster

import flowgraph as tf
from flowgraph import errors

W1 = "/job:worker/task:1"
W2 = "/job:worker/task:2"


@pytest.fixture
def cluster():
    """(Cluster, the master's target, worker:1's Worker)."""
    c = Cluster({"worker": 3})
    spec = tf.train.ClusterSpec(c.spec)
    servers = [tf.train.Server(spec, job_name="worker", task_index=i) for i in (0, 1)]
    servers[0]._server.services.master.health = None
    try:
        c.start("worker", 2)
        c.wait_ready("worker", 2)
        yield c, servers[0].target, servers[1]._server.services.worker
    finally:
        c.close()
        for server in servers:
            server._server.stop()
    for server in servers:  # stopping a server ends its health checks' thread
        thread = server._server.services.health._thread
        assert thread is None or not thread.is_alive()


def test_a_worker_ends_the_step_of_a_peer_that_hangs(cluster, monkeypatch):
    c, target, worker = cluster
    ended: list = []  # what RunGraph on worker:1 raised
    ended_event = threading.Event()
    real_run_graph = worker.run_graph

    def run_graph(req, call_opts=None):
        try:
            return real_run_graph(req, call_opts)
        except errors.OpError as e:
            ended.append(e)
            ended_event.set()
            raise

    monkeypatch.setattr(worker, "run_graph", run_graph)
    config = tf.ConfigProto()
    config.experimental.health_check_period_ms = 100
    with tf.Graph().as_default():
        with tf.device(W2):
            mark = tf.FIFOQueue(10, tf.float32, shapes=[[]], shared_name="mark")
            blocked = tf.FIFOQueue(10, tf.float32, shapes=[[]], shared_name="blocked")
            with tf.control_dependencies([mark.enqueue(1.0)]):
                value = blocked.dequeue()
            feed = blocked.enqueue(2.0)
            started = mark.dequeue()
        with tf.device(W1):
            out = value + 1.0  # worker:1 receives `value` from worker:2
        sess = tf.Session(target, config=config)
        other = tf.Session(target, config=config)
        # worker:1 checks its peer only: its master is this process, which a loaded machine
        # may keep from answering within the deadline (and the check would end the step)
        for watch in list(worker._watches.values()):
            worker.health.remove(watch)
        outcome: list = []

        def run():
            try:
                sess.run(out)
            except errors.OpError as e:
                outcome.append(e)

        other.run(feed)  # a first step connects worker:1 to worker:2, as in training
        assert sess.run(out) == 3.0
        other.run(started)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        other.run(started)  # the step waits on worker:2's queue
        c.stop("worker", 2)
        try:
            assert ended_event.wait(60)
            thread.join(60)  # the client's step ends, worker:2 still hung
            assert not thread.is_alive()
        finally:
            c.cont("worker", 2)
        (error,) = ended
        assert isinstance(error, errors.UnavailableError), error
        assert "Peer task /job:worker/replica:0/task:2 is unreachable" in error.message
        assert "health check of /job:worker/replica:0/task:1" in error.message
        assert not worker._steps
        assert "Peer task /job:worker/replica:0/task:2" in str(outcome[0]), outcome
        other.run(feed)
        assert sess.run(out) == 3.0  # the same session, worker:2 running again
        sess.close()
        other.close()


def test_a_step_with_a_deadline_ends_while_its_task_hangs(cluster):
    """Nothing checks worker:2 (the master's checks are off, and no peer receives from it):
    the step's deadline alone ends the step that waits on it, while it is stopped."""
    c, target, _ = cluster
    with tf.Graph().as_default():
        with tf.device(W2):
            q = tf.FIFOQueue(10, tf.float32, shapes=[[]])
            enqueue, dequeue, size = q.enqueue(1.0), q.dequeue(), q.size()
        with tf.Session(target) as sess:
            sess.run(enqueue)
            assert sess.run(dequeue) == 1.0  # registered, connected
            outcome: list = []

            def run():
                try:
                    sess.run(dequeue, options=tf.RunOptions(timeout_in_ms=200))
                except errors.OpError as e:
                    outcome.append(e)

            c.stop("worker", 2)
            thread = threading.Thread(target=run, daemon=True)
            try:
                thread.start()
                thread.join(60)
                assert not thread.is_alive()
            finally:
                c.cont("worker", 2)
            assert isinstance(outcome[0], errors.DeadlineExceededError), outcome
            assert sess.run(size) >= 0  # worker:2 serves the session again

"""Workers check the health of their sessions' masters (health.py, MasterWatch): a worker
running a step for a master that hangs (SIGSTOP: its sockets stay open, so nothing fails by
itself) ends that step and frees its rendezvous within the session's health-check period and
deadline, and a worker whose master came back as a new process drops that master's sessions.

The master is a server process (worker:0); the worker, worker:1, is a server in this process,
so that the test can see its running steps."""

import threading

import pytest
from conftest import Cluster

import flowgraph as tf
from flowgraph import errors
from flowgraph.distributed import health

W1 = "/job:worker/task:1"
MASTER = "/job:worker/replica:0/task:0"


def _config(period_ms: int) -> tf.ConfigProto:
    config = tf.ConfigProto()
    config.experimental.health_check_period_ms = period_ms
    return config


@pytest.fixture
def cluster():
    """worker:0 in its own process (the master), worker:1 in this one: (Cluster, its Worker)."""
    c = Cluster({"worker": 2})
    server = tf.train.Server(tf.train.ClusterSpec(c.spec), job_name="worker", task_index=1)
    try:
        c.start("worker", 0)
        c.wait_ready("worker", 0)
        yield c, server._server.services.worker
    finally:
        c.close()
        server._server.stop()


def _blocked_step():
    """A step that tells `mark` it started on worker:1, then waits there on an empty queue."""
    with tf.device(W1):
        mark = tf.FIFOQueue(10, tf.float32, shapes=[[]], shared_name="mark")
        blocked = tf.FIFOQueue(10, tf.float32, shapes=[[]], shared_name="blocked")
        with tf.control_dependencies([mark.enqueue(1.0)]):
            value = blocked.dequeue()
    return mark.dequeue(), value


def _run_in_thread(sess, fetch, outcome: list) -> threading.Thread:
    def run():
        try:
            sess.run(fetch)
        except errors.OpError as e:
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_worker_ends_the_step_of_a_master_that_hangs(cluster, monkeypatch):
    c, worker = cluster
    monkeypatch.setattr(health, "MIN_DEADLINE_S", 0.5)  # in this process: worker:1's checks
    ended: list = []  # what RunGraph on worker:1 raised
    ended_event = threading.Event()
    real_run_graph = worker.run_graph

    def run_graph(req, call_opts=None):
        try:
            return real_run_graph(req, call_opts)
        except errors.OpError as e:
            ended.append((req.step_id, e))
            ended_event.set()
            raise

    monkeypatch.setattr(worker, "run_graph", run_graph)
    with tf.Graph().as_default():
        wait_started, value = _blocked_step()
        step_sess = tf.Session(c.target("worker", 0), config=_config(100))
        watcher = tf.Session(c.target("worker", 0))
        outcome: list = []
        thread = _run_in_thread(step_sess, value, outcome)
        watcher.run(wait_started)  # the step waits on worker:1's queue
        (step_id,) = worker._steps
        c.stop("worker", 0)  # the master hangs
        assert ended_event.wait(30)
        assert ended[0][0] == step_id
        error = ended[0][1]
        assert isinstance(error, errors.UnavailableError), error
        assert MASTER in str(error) and "health check" in str(error)
        assert step_id not in worker._steps  # the step is gone, its rendezvous too
        assert step_id not in worker.rendezvous_mgr._table
        c.kill("worker", 0)  # the client's call to the master ends
        thread.join(30)
        assert not thread.is_alive() and isinstance(outcome[0], errors.UnavailableError)


def test_a_worker_drops_the_sessions_of_a_master_that_restarted(cluster):
    c, worker = cluster
    with tf.Graph().as_default():
        with tf.device(W1):
            out = tf.constant(1.0) + 1.0
        sess = tf.Session(c.target("worker", 0), config=_config(100))
        assert sess.run(out) == 2.0
        (handle,) = worker._sessions
        dropped = threading.Event()
        real_delete = worker.delete_worker_session

        def delete(req):
            response = real_delete(req)
            if req.session_handle == handle:
                dropped.set()
            return response

        worker.delete_worker_session = delete
        c.kill("worker", 0)
        c.restart("worker", 0)
        assert dropped.wait(30)
        assert handle not in worker._sessions and handle not in worker._watches

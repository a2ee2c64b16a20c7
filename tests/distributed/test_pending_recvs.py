"""A step may have more receives waiting at a task than any thread pool has threads (issue 12):
a RecvTensor waiting for its tensor holds no thread on either side (io_loop.py), so 300 of them
(the old limits were 64 server threads and 256 client threads) wait while the task still
serves other calls, among them the one that releases them; and a step whose receives wait
still ends by its deadline, after which the task serves again."""

import threading

import numpy as np
import pytest
from conftest import free_ports

import flowgraph as tf

W0, W1 = "/job:worker/task:0", "/job:worker/task:1"
N = 300  # receives waiting at task 0 at once
STEP = tf.RunOptions(timeout_in_ms=60_000)  # a bound on a hung step (the old code's deadlock)


def _gated_step():
    """(gate, total): total, on task 1, sums N tensors of task 0 that all wait for one
    dequeue from `gate` (on task 0), so task 1's N receives wait until the gate opens."""
    with tf.device(W0):
        gate = tf.FIFOQueue(1, tf.float32, shapes=[], shared_name="gate")
        opened = gate.dequeue()
        xs = [opened + float(i) for i in range(N)]
    with tf.device(W1):
        total = tf.add_n([x * 2.0 for x in xs])
    return gate, total


def _expected(opened: float) -> float:
    return 2.0 * sum(opened + i for i in range(N))


def _run_in_thread(fn):
    """Starts fn() on a thread; returns the function that joins it and returns its outcome."""
    outcome: list = []

    def run():
        try:
            outcome.append(fn())
        except Exception as e:  # noqa: BLE001  (returned to the test)
            outcome.append(e)

    thread = threading.Thread(target=run)
    thread.start()

    def join():
        thread.join(120)
        assert not thread.is_alive()
        return outcome[0]

    return join


def test_a_step_with_more_waiting_receives_than_threads_completes(grpc_cluster):
    """Round 1 receives by the gRPC stream (first contact), round 2 by socket (the port is
    known by then); both times task 0 serves the enqueue while N receives wait there."""
    cluster = grpc_cluster({"worker": 2})
    with tf.Graph().as_default():
        gate, total = _gated_step()
        with tf.Session(cluster.target("worker", 0)) as sess:
            for opened in (1.0, 2.0):
                join = _run_in_thread(lambda: sess.run(total, options=STEP))
                sess.run(gate.enqueue(opened), options=STEP)
                assert join() == _expected(opened)


def test_waiting_receives_hold_no_thread():
    """In one process (so its threads can be counted): with all N receives waiting at task 0,
    the process has far fewer than N threads; then the gate opens and the step completes."""
    cluster = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]})
    servers = [tf.train.Server(cluster, "worker", i) for i in range(2)]
    try:
        producer = servers[0]._server.services.worker
        asked = []
        all_asked = threading.Event()
        real = producer.recv_tensor_async

        def counted(req, done, call_opts=None):
            asked.append(req.rendezvous_key)
            if len(asked) == N:
                all_asked.set()
            real(req, done, call_opts)

        producer.recv_tensor_async = counted
        with tf.Graph().as_default():
            gate, total = _gated_step()
            with tf.Session(servers[0].target) as sess:
                join = _run_in_thread(lambda: sess.run(total, options=STEP))
                assert all_asked.wait(60), f"{len(asked)} of {N} receives reached task 0"
                threads = threading.active_count()
                sess.run(gate.enqueue(3.0), options=STEP)
                assert join() == _expected(3.0)
        assert threads < N // 2, f"{threads} threads while {N} receives waited"
    finally:
        for s in servers:
            s.stop()


def test_a_step_whose_receives_wait_ends_by_its_deadline(grpc_cluster):
    """The gate never opens: the step fails by its deadline, the waiting receives end, and
    both tasks serve the next steps, which move tensors between them."""
    cluster = grpc_cluster({"worker": 2})
    with tf.Graph().as_default():
        _, total = _gated_step()
        with tf.device(W0):
            a = tf.range(4.0)
        with tf.device(W1):
            b = a * 2.0
        with tf.Session(cluster.target("worker", 0)) as sess:
            with pytest.raises(tf.errors.DeadlineExceededError):
                sess.run(total, options=tf.RunOptions(timeout_in_ms=1000))
            for _ in range(2):
                np.testing.assert_array_equal(sess.run(b, options=STEP), [0.0, 2.0, 4.0, 6.0])

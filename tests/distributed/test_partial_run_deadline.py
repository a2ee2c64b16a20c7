"""A partial run's calls are bounded by the session's operation_timeout_in_ms, as TF bounds each
PRun's waits: a fetch that is not produced in time, or a last call whose ops do not finish, is
DeadlineExceededError; the partial run is cancelled on every task (a blocked dequeue there takes
no element) and its handle is gone, and the session runs on. Locally and with the queue on a
ps process, where a partial run's part also outlives the RunGraph call that started it."""

import time

import pytest

import flowgraph as tf

TIMEOUT_MS = 2000  # what a step that does not block finishes in, even on a loaded machine
BOUND_S = 20.0  # far above TIMEOUT_MS: only a missing deadline (a hang) passes it


def _config() -> tf.ConfigProto:
    return tf.ConfigProto(operation_timeout_in_ms=TIMEOUT_MS)


def _graph(queue_device=None):
    with tf.device(queue_device):
        q = tf.FIFOQueue(4, tf.float32, shapes=[[]], shared_name="q")
        dequeue = q.dequeue()
    x = tf.placeholder(tf.float32, [])
    y = x + 1.0
    return q, x, y, dequeue + y, dequeue


def _times_out(sess, handle, fetches, match: str, feeds=None) -> None:
    started = time.monotonic()
    with pytest.raises(tf.errors.DeadlineExceededError, match=match):
        sess.partial_run(handle, fetches, feeds)
    assert time.monotonic() - started < BOUND_S
    with pytest.raises(tf.errors.InvalidArgumentError, match="Must run 'setup'"):
        sess.partial_run(handle, fetches)  # cancelled: the handle is gone


def test_a_fetch_not_produced_in_time_cancels_the_partial_run():
    with tf.Graph().as_default():
        q, x, y, z, dequeue = _graph()
        with tf.Session(config=_config()) as sess:
            handle = sess.partial_run_setup([y, z], [x])
            assert sess.partial_run(handle, y, {x: 1.0}) == 2.0
            _times_out(sess, handle, z, "fetch 'add_1:0' was not produced")
            sess.run(q.enqueue(5.0))
            assert sess.run(dequeue) == 5.0  # the cancelled dequeue took nothing
            handle = sess.partial_run_setup([y, z], [x])  # the session runs on
            sess.run(q.enqueue(6.0))
            assert sess.partial_run(handle, [y, z], {x: 1.0}) == [2.0, 8.0]


def test_a_last_call_whose_ops_do_not_finish_in_time():
    with tf.Graph().as_default():
        q, x, y, _, dequeue = _graph()
        with tf.Session(config=_config()) as sess:
            handle = sess.partial_run_setup([y, dequeue.op], [x])  # the op: a target
            _times_out(sess, handle, y, "last call waited for its ops", {x: 1.0})
            sess.run(q.enqueue(5.0))
            assert sess.run(dequeue) == 5.0


def test_the_partial_run_is_cancelled_on_the_task_it_waits_for(grpc_cluster):
    cluster = grpc_cluster({"ps": 1, "worker": 1})
    with tf.Graph().as_default():
        q, x, y, z, dequeue = _graph("/job:ps/task:0")
        with tf.Session(cluster.target("worker", 0), config=_config()) as sess:
            handle = sess.partial_run_setup([y, z], [x])
            assert sess.partial_run(handle, y, {x: 1.0}) == 2.0
            _times_out(sess, handle, z, "was not produced")
            sess.run(q.enqueue(5.0))
            assert sess.run(dequeue) == 5.0  # the ps's part of the partial run ended
            # the ps's part outlives the call that started it (its end cancelled it once)
            handle = sess.partial_run_setup([y, z], [x])
            assert sess.partial_run(handle, y, {x: 1.0}) == 2.0
            sess.run(q.enqueue(6.0))
            assert sess.partial_run(handle, z) == 8.0

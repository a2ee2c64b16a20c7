"""A cancellation manager per step (issue 8): Session.close(), RunOptions.timeout_in_ms and a
failing kernel end every pending asynchronous kernel of the step (a blocked Recv, a dequeue
from an empty queue) with CancelledError or DeadlineExceededError.

Each blocked step here would wait forever but for the cancellation, so a step that ends at all
shows that the cancellation reached it; how soon is not asserted (a wall-clock bound fails on a
loaded machine): the waits are bounded only against a hang (tests/helpers.py HANG_S)."""

import time

import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.core.cancellation import CancellationManager
from flowgraph.distributed import messages
from flowgraph.distributed.local import local_cluster
from tests.helpers import in_thread, until


def test_manager_calls_each_callback_once_and_refuses_late_ones():
    cm = CancellationManager()
    got = []
    t1, t2 = cm.get_cancellation_token(), cm.get_cancellation_token()
    assert cm.register_callback(t1, got.append) and cm.register_callback(t2, got.append)
    assert cm.deregister_callback(t2)
    error = errors.CancelledError(None, None, "stop")
    assert cm.start_cancel(error) and not cm.start_cancel(error)
    assert got == [error] and cm.is_cancelled and cm.error is error
    assert not cm.register_callback(cm.get_cancellation_token(), got.append)
    assert not cm.deregister_callback(t1)  # cancellation took it


def _steps(worker) -> list:
    return list(worker._steps.values())


def test_close_cancels_a_step_blocked_in_a_dequeue():
    q = tf.FIFOQueue(1, tf.float32)
    s = tf.Session()
    worker = next(iter(s._local.workers.values()))
    join = in_thread(lambda: s.run(q.dequeue()))
    # The dequeue has registered its callback with the step's cancellation manager.
    until(lambda: _steps(worker) and len(_steps(worker)[0].cancellation), "the step never blocked")
    s.close()
    with pytest.raises(tf.errors.CancelledError):
        join()


def _orphan_recv_session():
    """A master session whose graph holds a _Recv that no _Send ever feeds."""
    cluster = local_cluster()
    cpu = "/job:localhost/replica:0/task:0/device:CPU:0"
    g = tf.Graph()
    with g.as_default():
        tf.constant(1.0, name="c")
    gd = g.as_graph_def()
    nd = gd.node.add(name="r", op="_Recv", device=cpu)
    nd.attr["tensor_type"].type = tf.float32.as_datatype_enum
    nd.attr["tensor_name"].s = b"nobody"
    nd.attr["send_device"].s = cpu.encode()
    nd.attr["recv_device"].s = cpu.encode()
    nd.attr["send_device_incarnation"].i = 1
    nd.attr["client_terminated"].b = False
    handle = cluster.master.create_session(
        messages.CreateSessionRequest(graph_def=gd)
    ).session_handle
    return cluster, handle


def test_close_cancels_a_step_blocked_in_a_recv():
    cluster, handle = _orphan_recv_session()
    worker = next(iter(cluster.workers.values()))
    join = in_thread(
        lambda: cluster.master.run_step(messages.RunStepRequest(handle, fetch=["r:0"]))
    )
    # A _Recv parks its continuation in the rendezvous, not with the manager: wait for the
    # step to be running, then for its rendezvous to hold the waiter.
    until(lambda: _steps(worker) and _steps(worker)[0].rendezvous._waiters, "no Recv waits")
    cluster.master.close_session(messages.CloseSessionRequest(handle))
    try:
        with pytest.raises(tf.errors.CancelledError, match="closed"):
            join()
    finally:
        cluster.close()


def test_timeout_cancels_a_blocked_dequeue():
    q = tf.FIFOQueue(1, tf.float32)
    with tf.Session() as s:
        start = time.monotonic()
        join = in_thread(lambda: s.run(q.dequeue(), options=tf.RunOptions(timeout_in_ms=50)))
        with pytest.raises(tf.errors.DeadlineExceededError):
            join()
        assert time.monotonic() - start >= 0.05  # not before its deadline (load only delays)
        # The cancelled dequeue left nothing behind: the queue still serves the next step.
        s.run(q.enqueue(3.0))
        assert s.run(q.dequeue()) == 3.0


def test_failing_kernel_cancels_a_blocked_dequeue_of_its_step():
    q = tf.FIFOQueue(1, tf.float32)
    x = tf.placeholder(tf.float32, [])
    bad = tf.debugging.check_numerics(x / 0.0 * 0.0, "nan here")
    with tf.Session() as s:
        join = in_thread(lambda: s.run([q.dequeue(), bad], {x: 1.0}))
        with pytest.raises(tf.errors.InvalidArgumentError, match="nan here"):
            join()

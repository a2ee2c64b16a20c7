"""RunGraph by socket between flowgraph tasks (raw_calls.py): answers and failures (class,
message, node) as over gRPC, one kept connection reused, None (send it by gRPC) when no
listener or another task's answers, a kept connection the peer closed replaced once, a caller
that goes away or gives up cancelling the call on the listener, the deadline, a silent peer
failed by the keepalive check, a listener that closes mid-call. Then a real peer process: a
master's RunGraphs go by socket, and by gRPC again once the peer restarted elsewhere."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import Cluster

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.distributed import grpc_server, grpc_service, raw_calls, raw_receiver, task_services
from flowgraph.distributed import raw_transport as rt
from flowgraph.distributed.raw_sender import RawSender

TASK = "/job:w/replica:0/task:0"
WAIT_S = 30.0  # bounds on waits for events; never reached when the code works


class Service:
    """The listener's RunGraph: the request bytes say what to do."""

    def __init__(self):
        self.started = threading.Event()  # a blocking call is running
        self.release = threading.Event()  # lets it return
        self.ended = threading.Event()  # its CallContext ended (answered, cancelled, gone)
        self.calls = 0

    def __call__(self, request: bytes, context) -> bytes:
        self.calls += 1
        if request == b"fail":
            error = errors.FailedPreconditionError(None, None, "x is not initialized")
            error.node_name = "x/read"
            raise error
        if request == b"bug":
            raise ValueError("a bug")
        if request == b"big":
            return bytes(range(256)) * (32 << 10)  # 8 MiB
        if request == b"block":
            context.add_callback(self.ended.set)
            self.started.set()
            self.release.wait(WAIT_S)
            return b"released"
        return request[::-1]


@pytest.fixture
def peer():
    service = Service()
    pool = ThreadPoolExecutor(4)
    sender = RawSender("127.0.0.1", lambda request, done: None, TASK, service, pool)
    receiver = raw_receiver.RawReceiver("127.0.0.1", TASK, pool)
    yield service, sender, receiver
    service.release.set()
    receiver.close()
    sender.close()
    pool.shutdown(wait=False)


def _call(sender, receiver, request: bytes, in_flight=None, timeout=WAIT_S, alive=None, task=TASK):
    in_flight = in_flight or raw_calls.InFlight()
    alive = alive or (lambda: True)
    return raw_calls.call(receiver, in_flight, sender.port, task, request, timeout, alive)


def test_answers_come_over_one_kept_connection(peer):
    _, sender, receiver = peer
    assert _call(sender, receiver, b"abc") == b"cba"
    kept = list(receiver._idle)
    assert len(kept) == 1
    assert _call(sender, receiver, b"big") == bytes(range(256)) * (32 << 10)
    assert receiver._idle == kept


def test_failures_keep_their_class_message_and_node(peer):
    _, sender, receiver = peer
    with pytest.raises(errors.FailedPreconditionError, match="x is not initialized") as e:
        _call(sender, receiver, b"fail")
    assert e.value.node_name == "x/read"
    with pytest.raises(errors.InternalError, match="RunGraph failed: ValueError: a bug"):
        _call(sender, receiver, b"bug")
    assert _call(sender, receiver, b"ok") == b"ko"  # the connection is still in step


def test_error_payload_round_trip():
    error = errors.ResourceExhaustedError(None, None, "OOM when allocating é")
    error.node_name = "big/alloc"
    back = rt.parse_error(rt.error_payload(error, "RunGraph"))
    assert type(back) is errors.ResourceExhaustedError
    assert (back.message, back.node_name) == (error.message, "big/alloc")
    assert not hasattr(
        rt.parse_error(rt.error_payload(errors.AbortedError(None, None, "a"), "")), "node_name"
    )


def test_nothing_runs_without_a_listener_of_that_task(peer):
    service, sender, receiver = peer
    assert _call(sender, receiver, b"abc", task="/job:w/replica:0/task:1") is None
    assert service.calls == 0
    assert _call(sender, receiver, b"abc") == b"cba"  # that connection serves on
    sender.close()
    assert _call(sender, raw_receiver.RawReceiver("127.0.0.1", TASK, None), b"abc") is None


def test_a_kept_connection_the_peer_closed_is_replaced_once(peer):
    _, sender, receiver = peer
    assert _call(sender, receiver, b"abc") == b"cba"
    with sender._lock:
        conns = list(sender._conns)
    for conn in conns:  # the listener's end of the kept connection goes
        rt.shutdown(conn)
    assert _call(sender, receiver, b"def") == b"fed"


def _blocked_call(sender, receiver, in_flight, timeout=WAIT_S):
    outcome: list = []

    def run():
        try:
            outcome.append(_call(sender, receiver, b"block", in_flight, timeout))
        except errors.OpError as e:
            outcome.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_caller_that_goes_away_cancels_the_call(peer):
    service, sender, receiver = peer
    in_flight = raw_calls.InFlight()
    thread, outcome = _blocked_call(sender, receiver, in_flight)
    assert service.started.wait(WAIT_S)
    in_flight.abort(errors.UnavailableError(None, None, "the peer hung"))
    thread.join(WAIT_S)
    assert isinstance(outcome[0], errors.UnavailableError) and "hung" in str(outcome[0])
    assert service.ended.wait(WAIT_S)  # the listener saw the caller go: the call ended there
    service.release.set()
    assert _call(sender, receiver, b"abc") == b"cba"


def test_abort_by_key_ends_only_that_calls_socket():
    import socket

    in_flight = raw_calls.InFlight()
    mine, other = socket.socketpair(), socket.socketpair()
    key = object()
    in_flight.add(mine[0], key)
    in_flight.add(other[0])
    error = errors.UnavailableError(None, None, "the peer could not be told")
    in_flight.abort(error, key)
    assert mine[0].recv(1) == b""  # shut down: a waiting recv returns at once
    assert in_flight.remove(mine[0]) is error
    assert in_flight.remove(other[0]) is None
    for pair in (mine, other):
        for s in pair:
            s.close()


def test_the_deadline_ends_the_wait_and_the_call(peer):
    service, sender, receiver = peer
    with pytest.raises(errors.DeadlineExceededError, match=f"RunGraph to {TASK} passed"):
        _call(sender, receiver, b"block", timeout=0.3)
    assert service.ended.wait(WAIT_S)


def test_a_silent_peer_that_fails_the_keepalive_check_fails_the_call(peer, monkeypatch):
    service, sender, receiver = peer
    monkeypatch.setattr(raw_calls, "KEEPALIVE_S", 0.05)
    checks = []
    answers = iter([True, False])

    def alive():
        checks.append(1)
        return next(answers)

    with pytest.raises(errors.UnavailableError, match="did not answer a keepalive check"):
        _call(sender, receiver, b"block", alive=alive)
    assert len(checks) == 2
    assert service.ended.wait(WAIT_S)


def test_a_listener_that_closes_mid_call_fails_it_naming_the_task(peer):
    service, sender, receiver = peer
    thread, outcome = _blocked_call(sender, receiver, raw_calls.InFlight())
    assert service.started.wait(WAIT_S)
    sender.close()
    thread.join(WAIT_S)
    assert isinstance(outcome[0], errors.UnavailableError)
    assert f"RunGraph to {TASK} failed: Socket closed" in str(outcome[0])


def test_a_master_runs_graphs_on_a_flowgraph_peer_by_socket(monkeypatch):
    """Task 0 in this process (its master), task 1 a process: RunGraph never goes by gRPC, a
    failure there names its node, and after task 1 restarts (its listener on another port)
    the next RunGraph goes by gRPC and then by the new port."""
    cluster = Cluster({"worker": 2})
    calls: list = []
    real_call = grpc_service.Client.call
    monkeypatch.setattr(
        grpc_service.Client,
        "call",
        lambda self, name, *a, **k: (calls.append(name), real_call(self, name, *a, **k))[1],
    )
    server = grpc_server.GrpcServer(task_services.server_def(_cluster_def(cluster), "worker", 0))
    try:
        cluster.start("worker", 1)
        cluster.wait_ready("worker", 1)
        server.start()
        with tf.Graph().as_default():
            x = tf.placeholder(tf.float32, [3])
            with tf.device("/job:worker/task:1"):
                y = x * 2.0
                bad = tf.debugging.check_numerics(x / 0.0, "inf", name="bad")
            with tf.Session(server.target) as sess:
                value = np.array([1.0, 2.0, 3.0], np.float32)
                for _ in range(3):
                    np.testing.assert_array_equal(sess.run(y, {x: value}), value * 2)
                with pytest.raises(errors.InvalidArgumentError, match="inf") as e:
                    sess.run(bad, {x: value})
                assert e.value.op is not None and e.value.op.name == "bad"
                assert "RunGraph" not in calls
                worker1 = server.services.worker_cache.get_worker("/job:worker/replica:0/task:1")
                old_port = worker1._raw_port
                cluster.kill("worker", 1)
                cluster.restart("worker", 1)
                for _ in range(4):  # the restart is reported once, then steps run again
                    try:
                        np.testing.assert_array_equal(sess.run(y, {x: value}), value * 2)
                        break
                    except errors.AbortedError:
                        pass
                else:
                    pytest.fail("no step ran on the restarted worker within 4 tries")
                assert "RunGraph" in calls  # the old port refused: by gRPC
                calls.clear()
                worker1.get_status()  # (as the health checks do once a second)
                assert worker1._raw_port not in (None, old_port)
                np.testing.assert_array_equal(sess.run(y, {x: value}), value * 2)
                assert "RunGraph" not in calls
    finally:
        server.stop()
        cluster.close()


def _cluster_def(cluster: Cluster):
    from flowgraph.core.protos import ClusterDef

    cluster_def = ClusterDef()
    job = cluster_def.job.add(name="worker")
    for i, address in enumerate(cluster.spec["worker"]):
        job.tasks[i] = address
    return cluster_def

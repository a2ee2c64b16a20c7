"""A worker's checks of its peers (health.py, PeerWatch) against a fake peer whose GetStatus
answers what the test says: a step blocked on a Recv from a peer that does not answer, or that
answers with a new incarnation, ends with an error naming the peer and the checking worker, its
in-flight RecvTensor is cancelled, and the worker runs the next step. One watch per peer, kept
while a registered graph receives from it."""

import threading

import numpy as np
import pytest

import flowgraph as tf
from flowgraph import errors
from flowgraph.core.attr_value import to_attr_value
from flowgraph.core.protos import ConfigProto, GraphDef, NodeDef, ServerDef
from flowgraph.distributed import health
from flowgraph.distributed import messages as m
from flowgraph.distributed.worker import Worker
from flowgraph.runtime import device as device_lib

W0 = "/job:worker/replica:0/task:0"
W1 = "/job:worker/replica:0/task:1"
INCARNATION = -12345  # signed, as the _Recv attr holds it
LONG_MS = 600_000  # a period the monitor's own loop never reaches in a test: checks are called


class FakePeer:
    """Task W1: GetStatus answers `incarnation` (None: the deadline passes; "refused": the
    connection is refused); RecvTensor calls are kept, unanswered, with their CallOptions."""

    def __init__(self):
        self.incarnation: int | str | None = INCARNATION
        self.recvs: list = []
        self.recv_started = threading.Event()
        self.asked = threading.Event()
        self.reconnected: list = []  # the worker cache's reconnects to it

    def start_get_status(self, deadline_s: float):
        self.asked.set()
        incarnation = self.incarnation

        def wait():
            if incarnation is None:
                raise errors.DeadlineExceededError(None, None, "Deadline Exceeded")
            if incarnation == "refused":
                raise errors.UnavailableError(None, None, "Connection refused")
            attrs = m.DeviceAttributes(
                name=f"{W1}/device:CPU:0", incarnation=incarnation % (1 << 64)
            )
            return m.GetStatusResponse(device_attributes=[attrs])

        return wait

    def recv_tensor_async(self, req, done, call_opts=None):
        self.recvs.append((req, done, call_opts))
        self.recv_started.set()


class FakeCache:
    def __init__(self, peer: FakePeer):
        self.peer = peer

    def list_workers(self):
        return [W0, W1]

    def get_worker(self, task):
        assert task == W1
        return self.peer

    def reconnect(self, task):
        self.peer.reconnected.append(task)


@pytest.fixture
def setup():
    """(worker W0, its HealthMonitor, the fake peer W1)."""
    peer = FakePeer()
    cache = FakeCache(peer)
    worker = Worker(W0, device_lib.make_devices("worker", 0, {}, 1, 1))
    worker.worker_cache = cache
    monitor = worker.health = health.HealthMonitor(cache, W0)
    yield worker, monitor, peer
    monitor.close()
    monitor.join()
    worker.close()


def _session(worker, handle: str, period_ms: int) -> None:
    config = ConfigProto()
    config.experimental.health_check_period_ms = period_ms
    request = m.CreateWorkerSessionRequest(handle, ServerDef(default_session_config=config))
    worker.create_worker_session(request)


def _recv_graph(worker, session: str, incarnation: int = INCARNATION) -> str:
    """Registers a graph of one _Recv on W0 of tensor 'x' from W1; its graph handle."""
    nd = NodeDef(name="r", op="_Recv", device=f"{W0}/device:CPU:0")
    for key, value, kind in [
        ("tensor_type", tf.float32, "type"),
        ("tensor_name", "x", "string"),
        ("send_device", f"{W1}/device:CPU:0", "string"),
        ("recv_device", f"{W0}/device:CPU:0", "string"),
        ("send_device_incarnation", incarnation, "int"),
        ("client_terminated", False, "bool"),
    ]:
        nd.attr[key].CopyFrom(to_attr_value(value, kind))
    request = m.RegisterGraphRequest(session, True, GraphDef(node=[nd]))
    return worker.register_graph(request).graph_handle


def _start_step(worker, session: str, graph: str, step_id: int):
    """Runs step `step_id` on a thread; (the thread, its outcome: [error] or [None])."""
    outcome: list = []

    def run():
        try:
            worker.run_graph(m.RunGraphRequest(session, True, graph, step_id))
            outcome.append(None)
        except errors.OpError as e:
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _watch(worker) -> health.PeerWatch:
    return worker.peer_watches._watches[W1]


def test_a_peer_that_does_not_answer_ends_the_steps_that_receive_from_it(setup):
    worker, monitor, peer = setup
    _session(worker, "s", LONG_MS)
    graph = _recv_graph(worker, "s")
    thread, outcome = _start_step(worker, "s", graph, 7)
    assert peer.recv_started.wait(10)
    peer.incarnation = "refused"  # its transfers fail by themselves: the check ends nothing
    monitor.check([_watch(worker)], 1.0)
    assert thread.is_alive() and not outcome
    peer.incarnation = None
    monitor.check([_watch(worker)], 1.0)
    thread.join(10)
    (error,) = outcome
    assert isinstance(error, errors.UnavailableError), error
    assert f"Peer task {W1} is unreachable" in error.message
    assert f"health check of {W0}" in error.message
    (_, _, call_opts) = peer.recvs[0]
    assert call_opts.error.message in error.message  # the RecvTensor in flight was cancelled
    assert peer.recvs[0][0].step_id == 7
    assert 7 not in worker.rendezvous_mgr._table
    # the worker runs the next step, the peer answering again
    peer.incarnation = INCARNATION
    peer.recv_started.clear()
    thread, outcome = _start_step(worker, "s", graph, 8)
    assert peer.recv_started.wait(10)
    monitor.check([_watch(worker)], 1.0)  # a healthy peer ends nothing
    _, done, _ = peer.recvs[1]
    done(None, m.RecvTensorResponse(np.float32(3.0), False))
    thread.join(10)
    assert outcome == [None]


@pytest.mark.parametrize("named", [True, False], ids=["named", "learnt"])
def test_a_peer_of_another_incarnation_aborts_the_steps_that_receive_from_it(setup, named):
    """The incarnation a graph expects is its _Recv's attr, or (attr 0) the first answer."""
    worker, monitor, peer = setup
    _session(worker, "s", LONG_MS)
    graph = _recv_graph(worker, "s", INCARNATION if named else 0)
    if not named:
        monitor.check([_watch(worker)], 1.0)  # learns INCARNATION
    thread, outcome = _start_step(worker, "s", graph, 7)
    assert peer.recv_started.wait(10)
    monitor.check([_watch(worker)], 1.0)
    assert thread.is_alive() and not outcome  # same incarnation: the step still waits
    peer.incarnation = INCARNATION + 1
    monitor.check([_watch(worker)], 1.0)
    thread.join(10)
    (error,) = outcome
    assert isinstance(error, errors.AbortedError), error
    assert f"Peer task {W1} was restarted" in error.message and W0 in error.message
    assert peer.recvs[0][2].error.message in error.message  # its RecvTensor was cancelled


def test_one_watch_per_peer_kept_while_a_graph_receives_from_it(setup):
    worker, monitor, _ = setup
    _session(worker, "a", 3000)
    _session(worker, "b", 2000)
    _session(worker, "off", -1)
    graph_a = _recv_graph(worker, "a")
    graph_a2 = _recv_graph(worker, "a")
    graph_b = _recv_graph(worker, "b")
    _recv_graph(worker, "off")  # a session without checks adds nothing
    assert worker.peer_watches.watched() == {W1: frozenset([graph_a, graph_a2, graph_b])}
    watch = _watch(worker)
    assert monitor._sessions == {watch: 2000}  # the shortest period of its graphs
    worker.deregister_graph(m.DeregisterGraphRequest("b", graph_handle=graph_b))
    assert monitor._sessions == {watch: 3000}
    worker.delete_worker_session(m.DeleteWorkerSessionRequest("a"))
    assert worker.peer_watches.watched() == {} and monitor._sessions == {}


def test_the_monitor_checks_peers_on_the_session_period(setup):
    """No check is called by the test: the monitor's loop finds the hung peer by itself."""
    worker, _, peer = setup
    peer.incarnation = None
    _session(worker, "s", 20)
    graph = _recv_graph(worker, "s")
    thread, outcome = _start_step(worker, "s", graph, 7)
    thread.join(30)
    assert isinstance(outcome[0], errors.UnavailableError), outcome
    assert peer.asked.is_set() and W1 in peer.reconnected  # a hung peer's calls end too

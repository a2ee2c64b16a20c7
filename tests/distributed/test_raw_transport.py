"""Tensors between flowgraph workers go by a plain socket (raw_transport.py), with real sender
processes: large ones from the first RecvTensor on, all once the peer's port is known; they
arrive bit for bit, and a sender that truncates, lies about the size, stalls or dies
mid-transfer, a failed RecvTensor, or a receive cancelled mid-transfer or while it waits, is an
error of that receive naming the peer, never a crash or a hang; the sender keeps serving."""

import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
from conftest import ROOT, free_ports

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.core.protos import ClusterDef
from flowgraph.core.rendezvous_keys import make_key
from flowgraph.distributed import grpc_worker, raw_receiver, raw_transport
from flowgraph.distributed import messages as m
from flowgraph.distributed.worker_cache import CallOptions

SENDER = "/job:sender/replica:0/task:0"
KEY = make_key(f"{SENDER}/device:CPU:0", 1, "/job:receiver/replica:0/task:0/device:CPU:0", "x:0")
ELEMENTS = raw_transport.MIN_BYTES // 2  # float32: twice the size that takes the socket
OK, TRUNCATES, LIES, STALLS, DIES = range(5)  # step // 10: how the sender behaves

# The sender process: a real server whose rendezvous holds value(step) for steps 1..59 and
# whose socket writer behaves as step // 10 says (read back from the tensor's first element).
_SENDER_SCRIPT = r"""
import ctypes, os, signal, socket, sys
ctypes.CDLL(None).prctl(1, 9)  # die with the test process
import numpy as np
from flowgraph.core.protos import ClusterDef
from flowgraph.distributed import grpc_server, raw_sender, task_services

key, port, elements = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
real_send = raw_sender.send_bytes

def send(conn, data):
    mode = int(np.frombuffer(data[:4], np.float32)[0]) // 10000
    if mode == 0:
        return real_send(conn, data)
    length = len(data) + 8 if mode == 2 else len(data)
    conn.sendall(length.to_bytes(8, "little"))
    conn.sendall(data[: len(data) // 2])
    if mode == 3:  # stalls until the receiver goes
        conn.recv(1)
    if mode == 4:
        os.kill(os.getpid(), signal.SIGKILL)
    raise OSError("the test sender gave up")

raw_sender.send_bytes = send
cluster = ClusterDef()
cluster.job.add(name="sender").tasks[0] = f"127.0.0.1:{port}"
cluster.job.add(name="receiver").tasks[0] = "127.0.0.1:1"
server = grpc_server.GrpcServer(task_services.server_def(cluster, "sender", 0))
for step in range(1, 60):
    value = np.arange(elements, dtype=np.float32) + step * 1000
    server.services.worker.rendezvous_mgr.find(step).send(key, value)
for step in range(100, 110):  # small ones, and a string
    server.services.worker.rendezvous_mgr.find(step).send(key, np.arange(3.0) + step)
server.services.worker.rendezvous_mgr.find(110).send(key, np.array(b"flow", dtype=object))
server.start()
server.join()
"""


def _value(step: int) -> np.ndarray:
    return np.arange(ELEMENTS, dtype=np.float32) + step * 1000


class Sender:
    """A sender process and this process's stub of it (a RemoteWorker)."""

    def __init__(self):
        port = free_ports(1)[0]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SENDER_SCRIPT, KEY, str(port), str(ELEMENTS)],
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        address = f"127.0.0.1:{port}"
        grpc_worker.wait_until_serving(address, timeout=60)
        cluster = ClusterDef()
        cluster.job.add(name="sender").tasks[0] = address
        self.cache = grpc_worker.GrpcWorkerCache(cluster)
        self.peer = self.cache.get_worker(SENDER)

    def recv(self, step: int, call_opts: CallOptions | None = None, raw: bool = True):
        return self.peer.recv_tensor(m.RecvTensorRequest(step, KEY), call_opts, raw).tensor

    def close(self):
        self.cache.close()
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def sender():
    s = Sender()
    yield s
    s.close()


def _idle(sender) -> int:
    return len(sender.peer._raw._idle)


def test_large_tensor_arrives_bit_for_bit_over_one_reused_connection(sender):
    np.testing.assert_array_equal(sender.recv(1), _value(1))
    assert _idle(sender) == 1  # it came by socket, which is kept for the next one
    np.testing.assert_array_equal(sender.recv(2), _value(2))
    assert _idle(sender) == 1
    np.testing.assert_array_equal(sender.recv(3, raw=False), _value(3))  # the gRPC stream


def test_once_the_port_is_known_small_tensors_and_failures_come_by_socket(sender, monkeypatch):
    sender.recv(7)  # the port is known from here on
    monkeypatch.setattr(sender.peer._streams, "start", None)  # gRPC is not asked again
    np.testing.assert_array_equal(sender.recv(100), np.arange(3.0) + 100)
    assert sender.recv(110) == b"flow"
    other = KEY.replace(SENDER, "/job:other/replica:0/task:0")
    with pytest.raises(errors.InvalidArgumentError, match="does not come from task"):
        sender.peer.recv_tensor(m.RecvTensorRequest(101, other))
    np.testing.assert_array_equal(sender.recv(102), np.arange(3.0) + 102)


def test_cancelling_a_receive_that_waits_for_its_tensor(sender):
    sender.recv(8)
    call_opts = CallOptions()
    outcome = []
    thread = threading.Thread(
        target=lambda: outcome.append(_raises(lambda: sender.recv(999, call_opts)))
    )
    thread.start()
    call_opts.start_cancel(errors.CancelledError(None, None, "the step was cancelled"))
    thread.join(60)
    assert not thread.is_alive() and isinstance(outcome[0], errors.CancelledError)
    np.testing.assert_array_equal(sender.recv(103), np.arange(3.0) + 103)


def test_truncated_transfer_is_unavailable_naming_the_peer(sender):
    with pytest.raises(errors.UnavailableError, match=f"{SENDER} closed the connection after"):
        sender.recv(TRUNCATES * 10)
    np.testing.assert_array_equal(sender.recv(4), _value(4))  # the sender still serves


def test_size_mismatch_is_data_loss(sender):
    with pytest.raises(errors.DataLossError, match=f"{SENDER} announced {ELEMENTS * 4 + 8} bytes"):
        sender.recv(LIES * 10)
    np.testing.assert_array_equal(sender.recv(5), _value(5))


def test_stalled_sender_passes_the_deadline(sender, monkeypatch):
    monkeypatch.setattr(raw_receiver, "IDLE_TIMEOUT_S", 0.5)
    with pytest.raises(errors.DeadlineExceededError, match=f"{SENDER} sent nothing for 0.5 s"):
        sender.recv(STALLS * 10)


def test_cancelling_a_receive_mid_transfer_aborts_it(sender, monkeypatch):
    """The sender stalls after half the bytes; cancelling the call (as the receiving step's
    rendezvous does when the step ends) ends the receive with the cancellation's error."""
    started = threading.Event()
    real_read = raw_receiver.read_into

    def read_into(conn, view):  # reports the first bytes of the tensor itself
        if len(view) <= 8:
            return real_read(conn, view)
        got = conn.recv_into(view[:1024])
        started.set()
        return got + real_read(conn, view[got:])

    monkeypatch.setattr(raw_receiver, "read_into", read_into)
    call_opts = CallOptions()
    outcome = []
    thread = threading.Thread(
        target=lambda: outcome.append(_raises(lambda: sender.recv(STALLS * 10 + 1, call_opts)))
    )
    thread.start()
    assert started.wait(60)
    call_opts.start_cancel(errors.CancelledError(None, None, "the step was cancelled"))
    thread.join(60)
    assert not thread.is_alive()
    assert isinstance(outcome[0], errors.CancelledError) and "step was cancelled" in str(outcome[0])
    np.testing.assert_array_equal(sender.recv(6), _value(6))


def _raises(fn):
    try:
        fn()
    except errors.OpError as e:
        return e
    return None


def test_sender_killed_mid_transfer_is_unavailable_naming_it():
    sender = Sender()
    try:
        with pytest.raises(errors.UnavailableError, match=SENDER):
            sender.recv(DIES * 10)
        assert sender.proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        sender.close()


def test_a_step_moves_large_tensors_between_tasks_by_socket(grpc_cluster):
    cluster = grpc_cluster({"worker": 2})
    with tf.Graph().as_default():
        with tf.device("/job:worker/task:1"):
            x = tf.random.uniform([ELEMENTS // 256, 256], seed=1)
        with tf.device("/job:worker/task:0"):
            y = x * 2.0
        with tf.Session(cluster.target("worker", 0)) as sess:
            for _ in range(2):  # the second step reuses the connection
                got_x, got_y = sess.run([x, y])
                np.testing.assert_array_equal(got_y, got_x * 2.0)

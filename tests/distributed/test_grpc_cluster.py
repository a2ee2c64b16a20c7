"""Clusters of real server processes on 127.0.0.1 (`flowgraph server`, conftest.py): state lives
on the tasks and outlives client sessions, steps span tasks, bad RPCs get error statuses, and a
dead task fails the step with UnavailableError naming it."""

import threading

import grpc
import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import GraphDef, master_pb2, worker_pb2
from flowgraph.distributed import grpc_master, grpc_service, grpc_worker

PS = "/job:ps/replica:0/task:0"
STEP = tf.RunOptions(timeout_in_ms=60_000)  # a bound on a hung step; no step here needs it


@pytest.fixture
def shared(ps_worker_cluster):
    return ps_worker_cluster


def _model():
    with tf.device("/job:ps/task:0"):
        v = tf.Variable(tf.zeros([3]), name="v")
    with tf.device("/job:worker/task:1"):
        x = tf.range(3.0) * 2.0
    with tf.device("/job:worker/task:0"):
        step = v.assign_add(x)
    return v, step


def test_variables_on_ps_are_shared_by_clients_of_different_workers(shared):
    tf.Session.reset(shared.target("worker", 0))
    with tf.Graph().as_default():
        v, step = _model()
        with tf.Session(shared.target("worker", 0)) as sess:
            sess.run(v.initializer)
            sess.run(step, options=STEP)
            np.testing.assert_array_equal(sess.run(v), [0.0, 2.0, 4.0])
    with tf.Graph().as_default():  # another client, through the other worker's master
        v, step = _model()
        with tf.Session(shared.target("worker", 1)) as sess:
            np.testing.assert_array_equal(sess.run(step, options=STEP), [0.0, 4.0, 8.0])
            names = {d.name for d in sess.list_devices()}
    assert f"{PS}/device:CPU:0" in names and len(names) >= 3
    tf.Session.reset(shared.target("ps", 0))
    with tf.Graph().as_default():
        v, _ = _model()
        with (
            tf.Session(shared.target("worker", 1)) as sess,
            pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized"),
        ):
            sess.run(v)


def test_small_and_dead_tensors_cross_tasks_step_after_step(shared):
    with tf.Graph().as_default():
        p = tf.placeholder(tf.float32, [3])
        flag = tf.placeholder(tf.bool, [])
        with tf.device("/job:worker/task:1"):
            y = tf.cond(flag, lambda: p * 2.0, lambda: p - 1.0)
        with tf.device("/job:ps/task:0"):
            z = y + 1.0
        with tf.Session(shared.target("worker", 0)) as sess:
            for i in range(4):  # the first step streams each edge, later ones go unary
                x = np.full(3, float(i), np.float32)
                got = sess.run(z, {p: x, flag: i % 2 == 0}, options=STEP)
                np.testing.assert_array_equal(got, (x * 2.0 if i % 2 == 0 else x - 1.0) + 1.0)


def test_large_tensors_cross_tasks(shared):
    value = np.random.default_rng(1).standard_normal((700, 1000)).astype(np.float32)
    with tf.Graph().as_default():
        with tf.device("/job:worker/task:1"):
            p = tf.placeholder(tf.float32, value.shape)
            y = p * 2.0
        with tf.device("/job:ps/task:0"):
            z = y + 1.0
        with tf.Session(shared.target("worker", 0)) as sess:
            np.testing.assert_array_equal(sess.run(z, {p: value}, options=STEP), value * 2 + 1)


def test_bad_rpcs_get_error_statuses_and_servers_keep_serving(shared):
    address = shared.address("worker", 0)
    with grpc.insecure_channel(address) as channel:
        master = grpc_service.Client(
            channel, grpc_master.SERVICE_NAME, grpc_master.METHODS, address
        )
        worker = grpc_service.Client(
            channel, grpc_worker.SERVICE_NAME, grpc_worker.METHODS, address
        )
        with pytest.raises(tf.errors.AbortedError, match="not found"):
            master.call("RunStep", master_pb2.RunStepRequest(session_handle="nope", fetch=["a"]))
        bad = GraphDef()
        bad.node.add(name="x", op="NoSuchOp")
        handle = master.call("CreateSession", master_pb2.CreateSessionRequest()).session_handle
        with pytest.raises(tf.errors.OpError, match="NoSuchOp"):
            master.call(
                "ExtendSession",
                master_pb2.ExtendSessionRequest(session_handle=handle, graph_def=bad),
            )
            master.call("RunStep", master_pb2.RunStepRequest(session_handle=handle, target=["x"]))
        with pytest.raises(tf.errors.OpError):
            worker.call("RunGraph", worker_pb2.RunGraphRequest(graph_handle="g_unknown"))
        short = worker_pb2.RunGraphRequest(graph_handle="g_unknown")
        tensor = short.send.add(name="k").tensor
        tensor.dtype = tf.float32.as_datatype_enum
        tensor.tensor_shape.dim.add(size=4)
        tensor.tensor_content = b"\0" * 12  # 3 floats for a shape of 4
        with pytest.raises(tf.errors.InvalidArgumentError, match="malformed RunGraphRequest"):
            worker.call("RunGraph", short)
        raw = channel.unary_unary("/tensorflow.grpc.MasterService/RunStep")
        with pytest.raises(grpc.RpcError) as info:
            raw(b"\x0a\xff", timeout=30)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        master.call("CloseSession", master_pb2.CloseSessionRequest(session_handle=handle))
    grpc_worker.wait_until_serving(address, timeout=30)


def test_dead_task_fails_the_step_with_unavailable_naming_it(grpc_cluster):
    cluster = grpc_cluster({"ps": 1, "worker": 1})
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(1.0)
        with tf.device("/job:worker/task:0"):
            y = v * 2.0
        with tf.Session(cluster.target("worker", 0)) as sess:
            sess.run(v.initializer)
            assert sess.run(y) == 2.0
            cluster.kill("ps", 0)
            with pytest.raises(tf.errors.UnavailableError, match=PS):
                sess.run(y, options=STEP)
            cluster.start("ps", 0)  # back, empty: its variables are uninitialized
            cluster.wait_ready("ps", 0)
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(1.0)
        with (
            tf.Session(cluster.target("worker", 0)) as sess,
            pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized"),
        ):
            sess.run(v, options=STEP)


def test_task_dying_mid_step_fails_the_blocked_step(grpc_cluster):
    cluster = grpc_cluster({"ps": 1, "worker": 1})
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            queue = tf.FIFOQueue(2, tf.float32, shapes=[])
            item = queue.dequeue()  # blocks: nothing is ever enqueued
        with tf.device("/job:worker/task:0"):
            y = item + 1.0
        with tf.Session(cluster.target("worker", 0)) as sess:
            outcome = {}

            def step():
                try:
                    sess.run(y, options=STEP)
                except tf.errors.OpError as e:
                    outcome["error"] = e

            runner = threading.Thread(target=step)
            runner.start()
            cluster.kill("ps", 0)
            runner.join(timeout=60)
            assert not runner.is_alive()
    assert isinstance(outcome.get("error"), tf.errors.UnavailableError), outcome
    assert PS in str(outcome["error"]), str(outcome["error"])

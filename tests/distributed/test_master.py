"""The Master's RPC methods called directly with in-memory requests (what a gRPC adapter
forwards): sessions, steps, callables, devices, reset, and their errors."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.distributed import messages as m
from flowgraph.distributed.local import InProcessCluster


@pytest.fixture
def master_and_graph():
    cluster = InProcessCluster({"worker": 1, "ps": 1})
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        with tf.device("/job:ps/task:0"):
            v = tf.Variable([1.0, 2.0], name="v")
        tf.add(x, v, name="y")
    master = cluster.master
    handle = master.create_session(m.CreateSessionRequest(g.as_graph_def())).session_handle
    master.run_step(m.RunStepRequest(handle, target=[v.initializer.name]))
    yield master, handle
    master.close_session(m.CloseSessionRequest(handle))
    cluster.close()


def test_run_step_and_callables(master_and_graph):
    master, handle = master_and_graph
    resp = master.run_step(m.RunStepRequest(handle, [("x:0", np.ones(2, np.float32))], ["y:0"]))
    assert resp.tensor[0][0] == "y:0"
    np.testing.assert_array_equal(resp.tensor[0][1], [2.0, 3.0])
    opts = m.CallableOptions(feed=["x:0"], fetch=["y:0"])
    callable_handle = master.make_callable(m.MakeCallableRequest(handle, opts)).handle
    for k in range(3):
        feed = [np.full(2, k, np.float32)]
        out = master.run_callable(m.RunCallableRequest(handle, callable_handle, feed)).fetch
        np.testing.assert_array_equal(out[0], [1.0 + k, 2.0 + k])
    with pytest.raises(tf.errors.InvalidArgumentError, match="takes 1 feeds"):
        master.run_callable(m.RunCallableRequest(handle, callable_handle, []))
    master.release_callable(m.ReleaseCallableRequest(handle, callable_handle))
    with pytest.raises(tf.errors.InvalidArgumentError, match="No callable"):
        master.run_callable(m.RunCallableRequest(handle, callable_handle, feed))


def test_devices_extend_reset_and_unknown_sessions(master_and_graph):
    master, handle = master_and_graph
    devices = master.list_devices(m.ListDevicesRequest(handle))
    assert [d.name for d in devices.local_device] == ["/job:worker/replica:0/task:0/device:CPU:0"]
    assert [d.name for d in devices.remote_device] == ["/job:ps/replica:0/task:0/device:CPU:0"]
    g = tf.Graph()
    with g.as_default():
        tf.constant(3.0, name="c")
    version = master.extend_session(m.ExtendSessionRequest(handle, g.as_graph_def(), 1))
    assert version.new_graph_version == 2
    assert master.run_step(m.RunStepRequest(handle, fetch=["c:0"])).tensor[0][1] == 3.0
    master.reset(m.ResetRequest())  # closes the sessions, drops the default containers
    with pytest.raises(tf.errors.AbortedError, match="not found"):
        master.run_step(m.RunStepRequest(handle, fetch=["c:0"]))
    for worker in master.worker_cache.list_workers():
        devices = master.worker_cache.get_worker(worker).devices
        assert all(not d.resource_mgr.containers() for d in devices)

"""Resource handles are values (issue 8, whitepaper §4.7): a DT_RESOURCE edge carries
(device, container, name, type), resolved by the consuming kernel in its own device's
containers, never a live Python object."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import ResourceHandleProto
from flowgraph.core.resource_handle import ResourceHandle
from flowgraph.distributed import messages
from flowgraph.distributed.local import InProcessCluster
from flowgraph.framework.apply_op import apply_op
from flowgraph.kernels.base import KernelContext, bind, find_kernel

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def _read(handle, dtype=tf.float32):
    return apply_op("ReadVariableOp", [handle], dtype=dtype).outputs[0]


def test_a_variable_handle_is_a_value_naming_its_resource():
    v = tf.get_variable("v", initializer=2.0, use_resource=True)
    queue = tf.FIFOQueue(2, tf.float32, shared_name="q")
    with tf.Session() as s:
        s.run(v.initializer)
        h1, h2 = s.run(v.handle), s.run(v.handle)
        qh = s.run(queue.queue_ref)
    assert h1 == h2 == ResourceHandle(CPU0, "localhost", "v", "VariableState")
    assert isinstance(qh, ResourceHandle) and qh.name == "q" and qh.device == CPU0
    assert "Queue" in qh.maybe_type_name
    proto = ResourceHandleProto.FromString(h1.to_proto().SerializeToString())
    assert ResourceHandle.from_proto(proto) == h1 and proto.device == CPU0


def _kernel_on(device):
    """ReadVariableOp's kernel as the executor binds it on `device`."""
    attrs = {"dtype": tf.float32}
    ctx = KernelContext("read", "ReadVariableOp", attrs, device, [tf.resource], [tf.float32])
    return bind(find_kernel("ReadVariableOp", "CPU", attrs), ctx)


def test_a_handle_resolves_only_on_its_own_device():
    v = tf.get_variable("v", initializer=[1.0, 2.0], use_resource=True)
    h = tf.placeholder(tf.resource, [])
    read = _read(h)
    h1 = tf.placeholder(tf.resource, [])
    with tf.device("/cpu:1"):
        read_there = _read(h1)  # a fed handle goes where its user is; it names cpu:0's variable
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as s:
        s.run(v.initializer)
        handle = s.run(v.handle)
        np.testing.assert_array_equal(s.run(read, {h: handle}), [1.0, 2.0])  # fed, resolved
        cpu0, cpu1 = next(iter(s._local.workers.values())).devices
        np.testing.assert_array_equal(_kernel_on(cpu0)(handle), [1.0, 2.0])
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"located in device {CPU0}"):
            _kernel_on(cpu1)(handle)
        with pytest.raises(tf.errors.InvalidArgumentError, match="from device .*CPU:1"):
            s.run(read_there, {h1: handle})
        missing = ResourceHandle(CPU0, "localhost", "nope", "VariableState")
        with pytest.raises(tf.errors.NotFoundError, match="localhost/nope"):
            s.run(read, {h: missing})


def test_a_handle_outlives_its_resource_as_a_name_only():
    v = tf.get_variable("v", initializer=3.0, use_resource=True)
    h = tf.placeholder(tf.resource, [])
    read = _read(h)
    cluster = InProcessCluster({"localhost": 1})
    with tf.Session(cluster.target) as s:
        s.run(v.initializer)
        handle = s.run(v.handle)
        assert s.run(read, {h: handle}) == 3.0
        cluster.master.reset(messages.ResetRequest(container=["localhost"]))
    with (
        tf.Session(cluster.target) as s,  # the old handle names nothing now
        pytest.raises(tf.errors.NotFoundError, match="localhost/v"),
    ):
        s.run(read, {h: handle})
    cluster.close()


def test_a_handle_of_a_ps_variable_does_not_resolve_on_a_worker():
    with tf.device("/job:ps/task:0"):
        v = tf.get_variable("v", initializer=1.0, use_resource=True)
    cluster = InProcessCluster({"worker": 1, "ps": 1})
    with tf.Session(cluster.target) as s:
        s.run(v.initializer)
        handle = s.run(v.handle)  # fetched to the client's task: a value crosses tasks
    assert handle.device == "/job:ps/replica:0/task:0/device:CPU:0"
    ps = cluster.workers["/job:ps/replica:0/task:0"].devices[0]
    worker = cluster.workers["/job:worker/replica:0/task:0"].devices[0]
    assert _kernel_on(ps)(handle) == 1.0
    with pytest.raises(tf.errors.InvalidArgumentError, match="/job:ps/replica:0/task:0"):
        _kernel_on(worker)(handle)
    cluster.close()


def test_forwarding_ops_pass_handles_untouched():
    v = tf.get_variable("v", initializer=5.0, use_resource=True)
    alias = tf.identity(v.handle)
    with tf.Session() as s:
        s.run(v.initializer)
        assert s.run(alias) == s.run(v.handle)
        assert s.run(_read(alias)) == 5.0

"""TensorArrays and stacks are per-step resources named by handle values (issue 8; TF's
ScopedStepContainer): the op outputs (device, "__per_step_<id>", name, type), the array or
stack lives in that container of its device, kernels resolve the handle on their own device,
and the container goes when the step ends on its worker."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.resource_handle import ResourceHandle
from flowgraph.distributed.local import InProcessCluster
from flowgraph.framework.apply_op import apply_op

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
PS0 = "/job:ps/replica:0/task:0/device:CPU:0"


def _devices(session):
    return [d for w in session._local.workers.values() for d in w.devices]


def _per_step_containers(devices):
    return [c for d in devices for c in d.resource_mgr.containers() if c.startswith("__per_")]


def test_a_tensor_array_handle_names_its_step_container():
    ta = tf.TensorArray(tf.float32, size=2, tensor_array_name="arr")
    stack = apply_op("StackV2", [tf.constant(-1)], elem_type=tf.float32, stack_name="st").outputs[0]
    with tf.Session() as s:
        handle, stack_handle = s.run([ta.handle, stack])
        assert _per_step_containers(_devices(s)) == []  # both went with their step
    assert isinstance(handle, ResourceHandle) and handle.device == CPU0
    assert handle.container.startswith("__per_step_") and handle.name.startswith("arr_")
    assert handle.maybe_type_name == "TensorArray"
    assert stack_handle.maybe_type_name == "Stack" and stack_handle.name.startswith("st_")
    assert stack_handle.container == handle.container  # one container per step


def test_a_handle_names_nothing_after_its_step():
    ta = tf.TensorArray(tf.float32, size=1)
    written = ta.write(0, 5.0)
    h = tf.placeholder(tf.resource, [])
    flow = tf.placeholder(tf.float32, [])
    read = apply_op("TensorArrayReadV3", [h, tf.constant(0), flow], dtype=tf.float32).outputs[0]
    with tf.Session() as s:
        handle, _ = s.run([written.handle, written.flow])
        with pytest.raises(tf.errors.NotFoundError, match=handle.container):
            s.run(read, {h: handle, flow: 0.0})


def test_each_step_and_each_iteration_gets_its_own_array():
    def body(i, acc):
        ta = tf.TensorArray(tf.float32, size=1).write(0, tf.cast(i, tf.float32))
        return i + 1, acc + ta.read(0)

    _, total = tf.while_loop(lambda i, a: i < 4, body, [tf.constant(0), tf.constant(0.0)])
    ta = tf.TensorArray(tf.float32, size=1)
    h = ta.write(0, 1.0).handle
    with tf.Session() as s:
        assert s.run(total) == 6.0
        assert s.run(h) != s.run(h)  # a new array (and container) per step


def test_close_clears_the_array_and_later_uses_fail():
    ta = tf.TensorArray(tf.float32, size=1).write(0, 1.0)
    close = apply_op("TensorArrayCloseV3", [ta.handle])
    with tf.control_dependencies([close]):
        read = ta.read(0)
    with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError, match="closed"):
        s.run(read)


def test_a_handle_resolves_only_on_the_device_of_its_array():
    with tf.device("/cpu:0"):
        ta = tf.TensorArray(tf.float32, size=1).write(0, 2.0)
    with tf.device("/cpu:1"):
        # an Identity of a handle is a value that travels; the read stays with its input's
        # device by colocation, so a handle read elsewhere must come in by feeding
        h = tf.placeholder(tf.resource, [])
        read = apply_op(
            "TensorArrayReadV3", [h, tf.constant(0), tf.constant(0.0)], dtype=tf.float32
        ).outputs[0]
    here = apply_op(
        "TensorArrayReadV3", [tf.identity(ta.handle), tf.constant(0), ta.flow], dtype=tf.float32
    ).outputs[0]
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as s:
        assert s.run(here) == 2.0
        handle = s.run(ta.handle)
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"located in device {CPU0}"):
            s.run(read, {h: handle})


def _rnn_like(dev):
    """A loop that writes values made on dev(1) into an array on dev(0), and its gradient
    (stacks of the forward values on dev(1))."""
    x = tf.constant(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3))
    with tf.device(dev(0)):
        w = tf.get_variable("w", initializer=tf.constant([0.5, -0.25, 1.5]), use_resource=True)
        inputs = tf.TensorArray(tf.float32, size=4).unstack(x)
        out = tf.TensorArray(tf.float32, size=4)

    def body(i, h, out):
        x_i = inputs.read(i)  # on dev(0), with its array
        with tf.device(dev(1)):
            h = tf.tanh(x_i * w + h)
        return i + 1, h, out.write(i, h)

    _, h, out = tf.while_loop(lambda i, h, o: i < 4, body, [tf.constant(0), tf.zeros([3]), out])
    stacked = out.stack()
    loss = tf.reduce_sum(stacked * stacked) + tf.reduce_sum(h * h)
    return [stacked, loss, tf.gradients(loss, w)[0]]


def _run_local(devices: int):
    g = tf.Graph()
    with g.as_default():
        fetches = _rnn_like(lambda k: f"/cpu:{k % devices}")
        config = tf.ConfigProto(device_count={"CPU": devices})
        with tf.Session(config=config) as s:
            s.run(tf.global_variables_initializer())
            got = s.run(fetches, options=tf.RunOptions(timeout_in_ms=20000))
            assert _per_step_containers(_devices(s)) == []
            return got


def test_tensor_arrays_and_stacks_across_devices_equal_one_device():
    want = _run_local(1)
    for got in (_run_local(2), _run_local(3)):
        for w, x in zip(want, got):
            np.testing.assert_allclose(x, w, rtol=1e-6)


def test_a_tensor_array_on_another_task_of_an_in_process_cluster():
    want = _run_local(1)
    g = tf.Graph()
    with g.as_default():
        fetches = _rnn_like(lambda k: ["/job:ps/task:0", "/job:worker/task:0"][k])
        with tf.device("/job:ps/task:0"):
            ta = tf.TensorArray(tf.float32, size=1)
        cluster = InProcessCluster({"worker": 1, "ps": 1})
        try:
            with tf.Session(cluster.target) as s:
                s.run(tf.global_variables_initializer())
                got = s.run(fetches, options=tf.RunOptions(timeout_in_ms=20000))
                handle = s.run(ta.handle)  # fetched to the master's task (worker:0)
            devices = [d for w in cluster.workers.values() for d in w.devices]
            assert _per_step_containers(devices) == []
        finally:
            cluster.close()
    for w, x in zip(want, got):
        np.testing.assert_allclose(x, w, rtol=1e-6)
    assert handle.device == PS0


def test_map_fn_in_a_dataset_function_drops_its_arrays():
    ds = tf.data.Dataset.range(3).map(
        lambda i: tf.map_fn(lambda v: v * 2, tf.fill([2], tf.cast(i, tf.float32)))
    )
    nxt = tf.data.make_one_shot_iterator(ds).get_next()
    with tf.Session() as s:
        got = [s.run(nxt) for _ in range(3)]
        assert _per_step_containers(_devices(s)) == []
    np.testing.assert_array_equal(got, [[0, 0], [2, 2], [4, 4]])

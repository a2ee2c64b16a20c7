"""Resource handles and callables over gRPC between real processes (issue 8): a handle is a
DT_RESOURCE value, so it is fetched through grpc://, fed back, and sent between tasks by
Send/Recv; it resolves only on the task that owns its resource. Session.make_callable is
MakeCallable/RunCallable/ReleaseCallable on the remote master."""

import gc

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import CallableOptions
from flowgraph.core.resource_handle import ResourceHandle
from flowgraph.distributed.messages import RunCallableRequest
from flowgraph.framework.apply_op import apply_op

PS_CPU = "/job:ps/replica:0/task:0/device:CPU:0"
STEP = tf.RunOptions(timeout_in_ms=60_000)  # a bound on a hung step


@pytest.fixture
def cluster(ps_worker_pair):
    """One ps and one worker process, the worker's master serving the client."""
    return ps_worker_pair


def _read(handle):
    return apply_op("ReadVariableOp", [handle], dtype=tf.float32).outputs[0]


def test_a_variable_handle_is_fetched_and_read_via_another_task(cluster):
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.get_variable("hv", initializer=[1.0, 2.0], use_resource=True)
            h = tf.placeholder(tf.resource, [])
            read_on_ps = _read(h)  # the fed handle goes worker -> ps by Send/Recv
        with tf.device("/job:worker/task:0"):
            h_there = tf.placeholder(tf.resource, [])
            read_on_worker = _read(h_there)
        with tf.Session(cluster.target("worker", 0)) as sess:
            sess.run(v.initializer)
            handle = sess.run(v.handle, options=STEP)  # ps -> worker -> client, over gRPC
            assert isinstance(handle, ResourceHandle)
            assert handle.device == PS_CPU and handle.name == "hv"
            np.testing.assert_array_equal(sess.run(read_on_ps, {h: handle}, STEP), [1.0, 2.0])
            sess.run(v.assign_add([1.0, 1.0]))
            np.testing.assert_array_equal(sess.run(read_on_ps, {h: handle}, STEP), [2.0, 3.0])
            with pytest.raises(tf.errors.InvalidArgumentError, match=f"located in device {PS_CPU}"):
                sess.run(read_on_worker, {h_there: handle}, STEP)


def test_a_tensor_array_on_the_ps_serves_a_loop_on_the_worker(cluster):
    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            inputs = tf.TensorArray(tf.float32, size=3).unstack(tf.constant(xs))
            out = tf.TensorArray(tf.float32, size=3)

        def body(i, out):
            x = inputs.read(i)
            with tf.device("/job:worker/task:0"):
                y = x * 2.0 + 1.0
            return i + 1, out.write(i, y)

        _, out = tf.while_loop(lambda i, o: i < 3, body, [tf.constant(0), out])
        with tf.Session(cluster.target("worker", 0)) as sess:
            got, handle = sess.run([out.stack(), out.handle], options=STEP)
    np.testing.assert_array_equal(got, xs * 2.0 + 1.0)
    assert handle.device == PS_CPU and handle.container.startswith("__per_step_")


def test_callables_over_grpc(cluster):
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            acc = tf.get_variable("acc", initializer=0.0, use_resource=True)
        x = tf.placeholder(tf.float32, [], name="x")
        with tf.device("/job:worker/task:0"):
            y = x * 2.0
        add = acc.assign_add(y)
        five = tf.constant(5.0, name="five")
        options = CallableOptions(fetch=[add.name])
        options.tensor_connection.add(from_tensor=five.name, to_tensor=x.name)
        with tf.Session(cluster.target("worker", 0)) as sess:
            sess.run(acc.initializer)
            step = sess.make_callable(add, [x])
            assert [step(float(k)) for k in range(1, 4)] == [2.0, 6.0, 12.0]
            connected = sess._make_callable_from_options(options)
            assert connected() == [22.0]  # x fed from `five` inside the step, on the tasks
            handle = step.master_callable.handle
            assert sess._master.run_callable(
                RunCallableRequest(sess._handle, handle, [np.float32(1)])
            ).fetch
            del step, connected
            gc.collect()  # ReleaseCallable for both
            with pytest.raises(tf.errors.InvalidArgumentError, match="No callable"):
                sess._master.run_callable(RunCallableRequest(sess._handle, handle, [np.float32(1)]))

"""Rendezvous keys in TensorFlow's format, real device incarnations, the frame and iteration
of a _Send/_Recv taken from the kernel's own context, and one rendezvous per step."""

import threading

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import dtypes
from flowgraph.core.rendezvous_keys import key_prefix, make_key, parse_key, with_frame
from flowgraph.kernels.base import KernelContext, bind, find_kernel
from flowgraph.runtime.rendezvous import LocalRendezvous
from flowgraph.runtime.step import Step, StepContext
from tests.helpers import HANG_S

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


def _worker(sess):
    """The in-process worker of a local Session."""
    return next(iter(sess._local.workers.values()))


def test_key_format_is_tensorflows():
    key = make_key(CPU0, 0x1234, CPU1, "edge_1_x_0", 5, 7)
    assert key == f"{CPU0};0000000000001234;{CPU1};edge_1_x_0;5:7"
    assert with_frame(key_prefix(CPU0, 0x1234, CPU1, "edge_1_x_0"), 5, 7) == key
    assert parse_key(key) == (CPU0, 0x1234, CPU1, "edge_1_x_0", 5, 7)
    # An int64 attr holds the 64 random bits signed; the key shows them unsigned, as TF's.
    assert make_key(CPU0, -1, CPU1, "t").split(";")[1] == "f" * 16
    assert parse_key(make_key(CPU0, -1, CPU1, "t")).src_incarnation == 2**64 - 1
    with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid rendezvous key"):
        parse_key("a;b;c")


def _send_recv_attrs(sess, fetch, feed):
    md = tf.RunMetadata()
    opts = tf.RunOptions(output_partition_graphs=True)
    sess.run(fetch, feed, options=opts, run_metadata=md)
    return [
        (n.op, n.attr["send_device"].s.decode(), n.attr["send_device_incarnation"].i)
        for g in md.partition_graphs
        for n in g.node
        if n.op in ("_Send", "_Recv")
    ]


def test_partitions_carry_random_device_incarnations():
    config = tf.ConfigProto(device_count={"CPU": 2})
    x = tf.placeholder(tf.float32, [])
    with tf.device("/cpu:1"):
        y = x * 2.0
    seen = []
    for _ in range(2):  # each runtime (a process start, for its devices) draws new ones
        with tf.Session(config=config) as s:
            attrs = _send_recv_attrs(s, y, {x: 1.0})
            devices = {d.name: d.incarnation for d in _worker(s).devices}
        assert len(set(devices.values())) == 2 and 0 not in devices.values()
        for _, src, inc in attrs:
            assert inc == devices[src]  # every key names its source device's incarnation
        seen.append(devices[CPU0])
    assert seen[0] != seen[1]


def test_send_takes_frame_and_iteration_from_its_own_context():
    """The tag comes with the kernel's call, not from the Step, which partitions share."""
    attrs = {
        "T": dtypes.float32,
        "tensor_name": "t",
        "send_device": CPU0,
        "send_device_incarnation": 9,
        "recv_device": CPU1,
        "client_terminated": False,
    }
    kdef = find_kernel("_Send", "CPU", attrs)
    ctx = KernelContext("s", "_Send", attrs, None, [dtypes.float32], [])
    send = bind(kdef, ctx)
    step = Step(1, LocalRendezvous())
    assert not hasattr(step, "frame_iter")
    send(StepContext(step, 11, 2), np.float32(1.0))
    send(StepContext(step, 11, 3), np.float32(2.0))
    assert step.rendezvous.try_take(make_key(CPU0, 9, CPU1, "t", 11, 3))[0] == 2.0
    assert step.rendezvous.try_take(make_key(CPU0, 9, CPU1, "t", 11, 2))[0] == 1.0


def test_one_rendezvous_per_step_keyed_by_step_id():
    q = tf.FIFOQueue(1, tf.float32)
    x = tf.placeholder(tf.float32, [])
    out = q.dequeue() + x
    with tf.Session() as s:
        mgr = _worker(s).rendezvous_mgr
        assert s.run(x * 3.0, {x: 1.0}) == 3.0
        assert len(mgr) == 0  # torn down when the step ended
        result = []
        t = threading.Thread(target=lambda: result.append(s.run(out, {x: 1.0})))
        t.start()
        s.run(q.enqueue(41.0))  # a second step runs while the first waits in its dequeue
        t.join(HANG_S)
        assert result == [42.0] and len(mgr) == 0

"""The executor's fixed schedule (runtime/schedule.py): which steps run it, and that they behave
as on the dispatch loop: the same values, order, errors, buffer lifetimes and cancellation."""

from __future__ import annotations

import threading
import weakref

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.runtime.executor import execute
from flowgraph.runtime.rendezvous import LocalRendezvous
from flowgraph.runtime.schedule import Schedule
from flowgraph.runtime.step import Step
from tests.helpers import local_plans

FULL_TRACE = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)


def _no_schedule(monkeypatch):
    monkeypatch.setattr(Schedule, "build", staticmethod(lambda plan: None))


def _program():
    """A graph with branches, a multi-output op, a no-output op, ref reads and a feed."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 4], name="x")
        v = tf.Variable(tf.ones([4]), name="v")
        parts = tf.split(x * v, 2, axis=1)
        total = tf.reduce_sum(parts[0]) + tf.reduce_sum(parts[1] ** 2)
        with tf.control_dependencies([total]):
            bump = tf.assign_add(v, tf.fill([4], 0.5))
        words = tf.strings.join([tf.constant("a"), tf.as_string(tf.shape(x)[0])])
        fetches = {"total": total, "parts": parts, "bump": bump, "words": words, "x": x}
        init = tf.global_variables_initializer()
    return g, x, init, fetches


def _run_program(feed_rows):
    g, x, init, fetches = _program()
    with tf.Session(graph=g) as sess:
        sess.run(init)
        return [sess.run(fetches, {x: rows}) for rows in feed_rows], sess


def test_plain_graphs_loops_queues_and_cross_device_recvs_have_a_schedule():
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [])
        plain = a * 2.0 + 1.0
        loop = tf.while_loop(lambda i: i < 3, lambda i: i + 1, [tf.constant(0)])
        q = tf.FIFOQueue(10, tf.float32)
        enqueue = q.enqueue([a])
    for fetch, feed in [(plain, {a: 1.0}), (loop, None), (enqueue, {a: 1.0})]:
        with tf.Session(graph=g) as sess:
            sess.run(fetch, feed)
            assert [p.schedule is not None for p in local_plans(sess)] == [True]
    with tf.Session(graph=g, config=tf.ConfigProto(device_count={"CPU": 2})) as sess:
        with g.as_default(), tf.device("/cpu:1"):
            across = plain + 1.0
        assert sess.run(across, {a: 1.0}) == 4.0
        plans = local_plans(sess)
        recv_side = [p for p in plans if p.device.name.endswith("CPU:1")]
        assert recv_side and all(p.schedule is not None for p in recv_side)


def test_which_steps_run_the_schedule(runs):
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [2, 2])
        b = tf.placeholder(tf.float32, [2, 2])
        plain = a + b
        product = tf.matmul(a, b)  # an expensive kernel, alone: nothing for the pool to overlap
        products = [product, tf.matmul(b, a)]  # two independent ones: the pool overlaps them
    ones = np.ones((2, 2), np.float32)
    with tf.Session(graph=g) as sess:
        sess.run(plain, {a: ones, b: ones})
        assert runs == {"schedule": 1, "loop": 0}
        sess.run(plain, {a: ones, b: ones}, options=FULL_TRACE, run_metadata=tf.RunMetadata())
        assert runs == {"schedule": 1, "loop": 1}  # traced: the loop keeps the accounting
        handle = sess.partial_run_setup(plain, [a, b])
        sess.partial_run(handle, [], {a: ones})
        assert sess.partial_run(handle, plain, {b: ones}).sum() == 8  # fed later: the loop
        assert runs == {"schedule": 1, "loop": 2}
    pooled = tf.ConfigProto(inter_op_parallelism_threads=2)
    with tf.Session(graph=g, config=pooled) as sess:
        sess.run(products, {a: ones, b: ones})
        assert runs == {"schedule": 1, "loop": 3}
        sess.run(product, {a: ones, b: ones})
        assert runs == {"schedule": 2, "loop": 3}
        chain = tf.matmul(tf.matmul(a, b, name="first"), b, name="second")
        sess.run(chain, {a: ones, b: ones})  # one after the other: nothing to overlap
        assert runs == {"schedule": 3, "loop": 3}
    one_thread = tf.ConfigProto(inter_op_parallelism_threads=1)
    with tf.Session(graph=g, config=one_thread) as sess:
        sess.run(products, {a: ones, b: ones})
        assert runs == {"schedule": 4, "loop": 3}


def test_same_values_as_the_dispatch_loop(monkeypatch):
    rows = [np.arange(8, dtype=np.float32).reshape(2, 4), np.full((3, 4), -1.5, np.float32)]
    fixed, _ = _run_program(rows)
    _no_schedule(monkeypatch)
    looped, _ = _run_program(rows)
    assert len(fixed) == len(looped) == 2
    for got, want in zip(fixed, looped):
        assert got.keys() == want.keys()
        for key in want:
            np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(want[key]))
    assert fixed[1]["bump"].tolist() == [2.0] * 4  # two steps' assign_add, in order


def test_schedule_is_the_order_the_traced_loop_ran():
    g, x, init, fetches = _program()
    with tf.Session(graph=g) as sess:
        sess.run(init)
        md = tf.RunMetadata()
        sess.run(fetches, {x: np.ones((2, 4), np.float32)}, FULL_TRACE, md)
        sess.run(fetches, {x: np.ones((2, 4), np.float32)})  # builds the same plan's schedule
        (plan,) = [p for p in local_plans(sess) if p.schedule is not None and len(p.items) > 10]
        scheduled = [plan.items[nid].node.name for nid in plan.schedule.order]
    (dev,) = md.step_stats.dev_stats
    assert [ns.node_name for ns in dev.node_stats] == scheduled


def test_registers_are_reused_along_a_chain():
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [])
        y = a
        for _ in range(200):
            y = y + a
    with tf.Session(graph=g) as sess:
        assert sess.run(y, {a: 0.5}) == 100.5
        (plan,) = local_plans(sess)
    assert plan.schedule.registers <= 3  # a, the chain's value, scratch: not 200


@pytest.mark.parametrize("schedule", [True, False])
def test_a_value_dies_after_its_last_reader(monkeypatch, schedule):
    if not schedule:
        _no_schedule(monkeypatch)
    alive = []

    def produce():
        out = np.ones(1000, np.float32)
        alive.append(weakref.ref(out))
        return out

    def check(total):
        return np.float32(alive[0]() is None)

    g = tf.Graph()
    with g.as_default():
        big = tf.py_func(produce, [], tf.float32)
        total = tf.reduce_sum(big)  # the last reader of big
        dead = tf.py_func(check, [total], tf.float32)
    with tf.Session(graph=g) as sess:
        assert sess.run(dead) == 1.0


def test_a_failing_kernel_fails_and_cancels_the_step_as_on_the_loop(monkeypatch):
    cancelled = []
    cancel = Step.cancel
    monkeypatch.setattr(Step, "cancel", lambda self, e: (cancelled.append(e), cancel(self, e)))

    def failure():
        g = tf.Graph()
        with g.as_default():
            a = tf.placeholder(tf.float32, [None])
            out = tf.reshape(a, [2, 2]) + 1.0
        with tf.Session(graph=g) as sess, pytest.raises(errors.InvalidArgumentError) as info:
            sess.run(out, {a: np.ones(3, np.float32)})
        return info.value

    fixed = failure()
    assert len(cancelled) == 1 and isinstance(cancelled[0], errors.CancelledError)
    _no_schedule(monkeypatch)
    looped = failure()
    assert len(cancelled) > 1  # the loop cancels too
    assert fixed.message == looped.message and "Reshape" in fixed.message
    assert fixed.node_name == looped.node_name == "Reshape"


def _feed_plan():
    """(plan, feed key, fetch key) of a one-device graph y = x + 1."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [], name="x")
        y = x + 1.0
    sess = tf.Session(graph=g)
    sess.run(y, {x: 1.0})
    master = sess._local.master
    (ms,) = master._sessions.values()
    (step_plan,) = ms._plans.values()
    (plan,) = local_plans(sess)
    return sess, plan, step_plan.feed_keys[0], step_plan.fetch_keys[0]


class _LateRendezvous(LocalRendezvous):
    """Calls `then()` from another thread once a receiver waits for a value not yet there."""

    def __init__(self, then):
        super().__init__()
        self.then = then

    def recv_async(self, key, callback):
        super().recv_async(key, callback)
        threading.Thread(target=self.then).start()


def test_a_feed_that_arrives_during_the_step_is_waited_for():
    sess, plan, feed, fetch = _feed_plan()
    with sess:
        rendezvous = _LateRendezvous(lambda: rendezvous.send(feed, np.float32(41.0)))
        execute(plan, Step(1, rendezvous))
        assert rendezvous.try_take(fetch)[0] == 42.0


def test_a_missing_feed_times_out_and_a_cancelled_step_fails():
    sess, plan, _, _ = _feed_plan()
    with sess:
        with pytest.raises(errors.DeadlineExceededError):
            execute(plan, Step(1, LocalRendezvous(), timeout_ms=50))
        error = errors.CancelledError(None, None, "Session has been closed.")
        step = Step(2, _LateRendezvous(lambda: step.cancel(error)))
        with pytest.raises(errors.CancelledError):
            execute(plan, step)


def test_an_element_wise_kernel_called_directly_fails_with_the_kernels_error(monkeypatch):
    def failure():
        g = tf.Graph()
        with g.as_default():
            a = tf.placeholder(tf.float32, [None])
            b = tf.placeholder(tf.float32, [None])
            out = tf.negative(tf.add(a, b, name="the_add"))
        with tf.Session(graph=g) as sess:
            assert sess.run(out, {a: [1.0], b: [2.0]}).tolist() == [-3.0]
            (plan,) = local_plans(sess)
            with pytest.raises(errors.InvalidArgumentError) as info:
                sess.run(out, {a: np.ones(3, np.float32), b: np.ones(4, np.float32)})
        return plan.schedule, info.value

    schedule, fixed = failure()
    assert len(schedule.direct) == 2  # Add and Neg: their ufuncs, without the kernels
    _no_schedule(monkeypatch)
    _, looped = failure()
    assert fixed.message == looped.message and "Incompatible shapes: [3] vs. [4]" in fixed.message
    assert fixed.node_name == looped.node_name == "the_add"

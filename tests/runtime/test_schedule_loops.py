"""Loops on the fixed schedule (runtime/loop_blocks.py, step_code.py): each program runs once
with its loops compiled into the step function and once on the dispatch loop, and both give
the same values, errors, side effects and step-kernel tags; cancellation and deadlines end a
compiled loop."""

from __future__ import annotations

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.runtime.executor import execute
from flowgraph.runtime.rendezvous import LocalRendezvous
from flowgraph.runtime.schedule import Schedule
from flowgraph.runtime.step import Step, StepContext
from tests.helpers import local_plans


def _both(build, feeds=None, runs_per_session=1):
    """Runs `build()`'s (fetches, init) in a fresh graph with the fixed schedule and on the
    dispatch loop; returns both results (lists of per-run values), having checked that every
    plan with loops had a schedule in the first and none in the second."""
    results = []
    original = Schedule.build
    for scheduled in (True, False):
        g = tf.Graph()
        with g.as_default():
            fetches, init = build()
        if not scheduled:
            Schedule.build = staticmethod(lambda plan: None)
        try:
            with tf.Session(graph=g) as sess:
                if init is not None:
                    sess.run(init)
                out = [sess.run(fetches, feeds) for _ in range(runs_per_session)]
                loops = [p for p in local_plans(sess) if p.has_control_flow]
                assert loops and all((p.schedule is not None) == scheduled for p in loops)
        finally:
            Schedule.build = original
        results.append(out)
    return results


def _same(a, b):
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _same(a[key], b[key])
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_loop_runs_on_the_schedule_with_the_loops_values(runs):
    def build():
        i, total = tf.while_loop(
            lambda i, t: i < 10, lambda i, t: (i + 1, t + tf.cast(i, tf.float32)), [0, 0.0]
        )
        return [i, total], None

    fixed, looped = _both(build)
    assert fixed[0][0] == 10 and fixed[0][1] == 45.0
    _same(fixed, looped)
    assert runs["schedule"] == 1 and runs["loop"] == 1


def test_nested_loops_and_a_cond_in_a_loop():
    def build():
        def outer(i, acc):
            inner = tf.while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + j), [0, 0])[1]
            step = tf.cond(i % 2 > 0, lambda: inner * 10, lambda: -inner)
            return i + 1, acc + step

        return tf.while_loop(lambda i, acc: i < 6, outer, [0, 0]), None

    fixed, looped = _both(build)
    _same(fixed, looped)
    want = sum((10 if i % 2 else -1) * sum(range(i)) for i in range(6))
    assert fixed[0][1] == want


def test_a_loop_in_an_untaken_branch_is_dead_and_a_taken_one_runs():
    def build():
        p = tf.placeholder(tf.bool, [], name="p")

        def loop():
            return tf.while_loop(lambda i: i < 5, lambda i: i + 2, [tf.constant(1)])

        return tf.cond(p, loop, lambda: tf.constant(-1)), None

    for value, want in ((True, 5), (False, -1)):
        g = tf.Graph()
        with g.as_default():
            out, _ = build()
        with tf.Session(graph=g) as sess:
            p = g.get_tensor_by_name("p:0")
            assert sess.run(out, {p: value}) == want
            assert all(plan.schedule is not None for plan in local_plans(sess))


def test_gradients_of_a_while_loop():
    def build():
        x = tf.Variable(np.array([0.5, -1.5, 2.0], np.float32), name="x")
        _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * x + 1.0), [0, x])
        loss = tf.reduce_sum(y * y)
        (grad,) = tf.gradients(loss, [x])
        return [loss, grad], tf.global_variables_initializer()

    fixed, looped = _both(build)
    _same(fixed, looped)
    x = np.array([0.5, -1.5, 2.0])
    y3 = x**4 + x**2 + x + 1  # y <- y*x + 1 three times from y = x
    np.testing.assert_allclose(fixed[0][1], 2 * y3 * (4 * x**3 + 2 * x + 1), rtol=1e-5)


def test_a_tensor_array_written_in_a_loop():
    def build():
        ta = tf.TensorArray(tf.float32, size=5)

        def body(i, ta):
            return i + 1, ta.write(i, tf.fill([2], tf.cast(i * i, tf.float32)))

        _, ta = tf.while_loop(lambda i, ta: i < 5, body, [0, ta])
        return ta.stack(), None

    fixed, looped = _both(build)
    _same(fixed, looped)
    assert fixed[0][:, 0].tolist() == [0.0, 1.0, 4.0, 9.0, 16.0]


def test_side_effects_in_a_loop_run_once_per_iteration_over_steps():
    def build():
        v = tf.Variable(0, name="v")

        def body(i):
            with tf.control_dependencies([tf.assign_add(v, i)]):
                return i + 1

        n = tf.while_loop(lambda i: i < 4, body, [0], parallel_iterations=1)
        with tf.control_dependencies([n]):
            read = tf.identity(v.read_value())
        return read, tf.global_variables_initializer()

    fixed, looped = _both(build, runs_per_session=3)
    assert fixed == looped == [6, 12, 18]


def test_an_error_in_a_body_names_the_node_and_cancels_the_step():
    def build():
        x = tf.placeholder(tf.float32, [None], name="x")

        def body(i, acc):
            return i + 1, acc + tf.reduce_sum(tf.reshape(x, [2, -1], name="bad_reshape"))

        return tf.while_loop(lambda i, acc: i < 2, body, [0, 0.0])[1], x

    messages = []
    original = Schedule.build
    for scheduled in (True, False):
        g = tf.Graph()
        with g.as_default():
            out, x = build()
        if not scheduled:
            Schedule.build = staticmethod(lambda plan: None)
        try:
            with tf.Session(graph=g) as sess:
                assert sess.run(out, {x: np.ones(4, np.float32)}) == 8.0
                with pytest.raises(errors.InvalidArgumentError) as info:
                    sess.run(out, {x: np.ones(3, np.float32)})
                assert [p.schedule is not None for p in local_plans(sess)] == [scheduled]
        finally:
            Schedule.build = original
        assert "bad_reshape" in info.value.message
        messages.append((info.value.message, info.value.node_name))
    assert messages[0] == messages[1]


def test_a_deadline_ends_an_endless_loop():
    g = tf.Graph()
    with g.as_default():
        forever = tf.while_loop(lambda i: i >= 0, lambda i: i + 1, [0])
    with tf.Session(graph=g) as sess:
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(forever, options=tf.RunOptions(timeout_in_ms=100))
        assert all(plan.schedule is not None for plan in local_plans(sess))


def test_a_cancelled_step_stops_a_loop():
    g = tf.Graph()
    with g.as_default():
        forever = tf.while_loop(lambda i: i >= 0, lambda i: i + 1, [0])
    with tf.Session(graph=g) as sess:
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(forever, options=tf.RunOptions(timeout_in_ms=1))
        (plan,) = local_plans(sess)
        step = Step(7, LocalRendezvous())
        step.cancel(errors.CancelledError(None, None, "Session has been closed."))
        with pytest.raises(errors.CancelledError, match="closed"):
            execute(plan, step)


def test_parallel_iterations_and_maximum_iterations_give_the_loops_values():
    def build():
        outs = []
        for parallel in (1, 10):
            x = tf.while_loop(
                lambda i, x: i < 100,
                lambda i, x: (i + 1, tf.concat([x[1:], x[:1] * 2.0], 0)),
                [0, tf.constant([1.0, 2.0, 3.0])],
                parallel_iterations=parallel,
                maximum_iterations=7,
            )
            outs.append(x)
        return outs, None

    fixed, looped = _both(build)
    _same(fixed, looped)
    assert fixed[0][0][0] == 7


def test_step_kernels_in_nested_loops_get_the_dispatch_loops_frame_and_iteration(monkeypatch):
    tags = {True: set(), False: set()}  # scheduled? -> the (frame, iteration) tags made
    init, build_schedule = StepContext.__init__, Schedule.build

    def recording(self, step, frame_id, iter_id):
        tags[Schedule.build is build_schedule].add((frame_id, iter_id))
        init(self, step, frame_id, iter_id)

    monkeypatch.setattr(StepContext, "__init__", recording)

    def build():
        def inner(j, s):
            ta = tf.TensorArray(tf.float32, size=2).write(0, 1.0).write(1, tf.cast(j, tf.float32))
            return j + 1, s + tf.reduce_sum(ta.stack())

        def outer(i, acc):
            return i + 1, acc + tf.while_loop(lambda j, s: j < i, inner, [0, 0.0])[1]

        return tf.while_loop(lambda i, acc: i < 4, outer, [0, 0.0])[1], None

    fixed, looped = _both(build)
    _same(fixed, looped)
    assert fixed[0] == sum(j + 1.0 for i in range(4) for j in range(i))
    # the dispatch loop makes a context only where a step kernel runs (not in an iteration
    # whose body is dead); the schedule makes one per iteration
    assert tags[False] <= tags[True] and len({f for f, _ in tags[False]}) == 3

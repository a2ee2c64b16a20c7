"""Async kernels on the fixed schedule (runtime/schedule.py): one that finishes within its call
keeps the step on the schedule; one that must wait hands the rest of the step to the dispatch
loop, which behaves as if it had run the step from the start: blocking, closing, cancelling,
deadlines, Session.close and errors as on the loop."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.runtime import executor
from flowgraph.runtime import step as step_module
from flowgraph.runtime.schedule import Schedule
from tests.helpers import HANG_S, in_thread


@pytest.fixture
def handed_off(monkeypatch):
    """An Event set when a scheduled step hands itself to the dispatch loop (its async
    kernel waits), and the counts of schedule runs and hand-offs."""
    event = threading.Event()
    counts = {"schedule": 0, "hand_off": 0}
    resume, run = executor._resume, Schedule.run

    def on_resume(*args):
        counts["hand_off"] += 1
        event.set()
        return resume(*args)

    def on_run(self, plan, step, fail, resume_):
        counts["schedule"] += 1
        return run(self, plan, step, fail, resume_)

    monkeypatch.setattr(executor, "_resume", on_resume)
    monkeypatch.setattr(Schedule, "run", on_run)
    event.counts = counts
    return event


@pytest.fixture
def waits(monkeypatch):
    """An Event set when a step waits for a completion (on the loop or in place)."""
    event = threading.Event()
    wait = step_module.Step.wait

    def on_wait(self, completions):
        event.set()
        return wait(self, completions)

    monkeypatch.setattr(step_module.Step, "wait", on_wait)
    return event


def _queue_graph():
    """a -> x = 2a (before the dequeue), (f, i) = dequeue, y = x + f, z = 3i, w = a + 1
    (independent of the dequeue, after it in the schedule)."""
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [], name="a")
        x = a * 2.0
        q = tf.FIFOQueue(4, [tf.float32, tf.int32], shapes=[[], []])
        f, i = q.dequeue()
        y, z, w = x + f, i * 3, a + 1.0
        enqueue = q.enqueue([tf.constant(5.0), tf.constant(7)])
    return g, a, q, [y, z, w], enqueue


def test_an_element_that_is_there_keeps_the_step_on_the_schedule(handed_off):
    g, a, _, fetches, enqueue = _queue_graph()
    with tf.Session(graph=g) as sess:
        sess.run(enqueue)
        assert sess.run(fetches, {a: 1.0}) == [7.0, 21, 2.0]
    assert handed_off.counts == {"schedule": 2, "hand_off": 0}


def test_a_dequeue_that_waits_hands_the_rest_to_the_loop(handed_off):
    g, a, _, fetches, enqueue = _queue_graph()
    with tf.Session(graph=g) as sess:
        join = in_thread(lambda: sess.run(fetches, {a: 1.0}))
        assert handed_off.wait(HANG_S)
        sess.run(enqueue)
        assert join() == [7.0, 21, 2.0]  # values made before the hand-off and after it
    assert handed_off.counts == {"schedule": 2, "hand_off": 1}


def test_the_loop_runs_a_later_kernel_that_unblocks_the_waiting_one(handed_off):
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(4, tf.float32, shapes=[[]])
        taken = q.dequeue() + 1.0  # first in the schedule: the queue is empty
        enqueue = q.enqueue([tf.constant(2.0)])  # after it, independent of it
    with tf.Session(graph=g) as sess:
        assert sess.run([taken, enqueue])[0] == 3.0
    assert handed_off.counts == {"schedule": 1, "hand_off": 1}


def test_a_full_queue_enqueue_waits_in_place_for_a_dequeue(handed_off, waits):
    """The enqueue is the step's last node: nothing could run while it waits, so the schedule
    waits for it itself, without handing the step to the loop."""
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(1, tf.float32, shapes=[[]])
        enqueue = q.enqueue([tf.constant(1.0)])
        dequeue = q.dequeue()
    with tf.Session(graph=g) as sess:
        sess.run(enqueue)
        join = in_thread(lambda: sess.run(enqueue))
        assert waits.wait(HANG_S)
        assert sess.run(dequeue) == 1.0
        join()
        assert sess.run(q.size()) == 1
    assert handed_off.counts["hand_off"] == 0


@pytest.mark.parametrize("how", ["cancel_pending", "session_close", "deadline"])
def test_cancelling_or_a_deadline_ends_an_in_place_wait(handed_off, waits, how):
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(1, tf.float32, shapes=[[]])
        enqueue = q.enqueue([tf.constant(1.0)])
        close = q.close(cancel_pending_enqueues=True)
    sess = tf.Session(graph=g)
    sess.run(enqueue)
    if how == "deadline":
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(enqueue, options=tf.RunOptions(timeout_in_ms=50))
        sess.close()
        return
    join = in_thread(lambda: sess.run(enqueue))
    assert waits.wait(HANG_S)
    if how == "session_close":
        sess.close()
    else:
        sess.run(close)
        sess.close()
    with pytest.raises(errors.CancelledError):
        join()
    assert handed_off.counts["hand_off"] == 0


@pytest.mark.parametrize("how", ["close", "cancel_pending", "session_close"])
def test_closing_the_queue_or_the_session_ends_a_waiting_step(handed_off, how):
    g, a, q, fetches, _ = _queue_graph()
    with g.as_default():
        close = q.close(cancel_pending_enqueues=how == "cancel_pending")
    sess = tf.Session(graph=g)
    join = in_thread(lambda: sess.run(fetches, {a: 1.0}))
    assert handed_off.wait(HANG_S)
    if how == "session_close":
        sess.close()
        with pytest.raises(errors.CancelledError):
            join()
        return
    sess.run(close)
    with pytest.raises(errors.OutOfRangeError, match="closed"):
        join()
    sess.close()


def test_a_deadline_ends_a_waiting_step_and_withdraws_its_dequeue(handed_off):
    g, a, _, fetches, enqueue = _queue_graph()
    with tf.Session(graph=g) as sess:
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(fetches, {a: 1.0}, options=tf.RunOptions(timeout_in_ms=50))
        sess.run(enqueue)
        assert sess.run(fetches, {a: 2.0}) == [9.0, 21, 3.0]  # the element was not lost


def test_a_kernel_failing_after_the_hand_off_cancels_the_waiting_dequeue(handed_off):
    g, a, _, fetches, enqueue = _queue_graph()
    with g.as_default():
        n = tf.placeholder(tf.int32, [])
        bad = tf.reshape(tf.fill([n], a), [2, 2])  # after the dequeue, independent of it
    with tf.Session(graph=g) as sess:
        with pytest.raises(errors.InvalidArgumentError) as info:
            sess.run([fetches, bad], {a: 1.0, n: 3})
        assert info.value.node_name == bad.op.name
        sess.run(enqueue)
        assert sess.run(fetches, {a: 1.0}) == [7.0, 21, 2.0]
    assert handed_off.counts["hand_off"] == 1


@pytest.mark.parametrize("schedule", [True, False])
def test_an_async_kernel_error_reads_as_on_the_loop(monkeypatch, schedule):
    if not schedule:
        monkeypatch.setattr(Schedule, "build", staticmethod(lambda plan: None))
    g = tf.Graph()
    with g.as_default():
        v = tf.placeholder(tf.float32, [None])
        q = tf.FIFOQueue(4, tf.float32, shapes=[[2]])
        enqueue = q.enqueue([v])
    with tf.Session(graph=g) as sess:
        with pytest.raises(errors.InvalidArgumentError) as info:
            sess.run(enqueue, {v: np.ones(3, np.float32)})
        sess.run(enqueue, {v: np.ones(2, np.float32)})
        assert sess.run(q.size()) == 1
    assert info.value.node_name == enqueue.name
    assert "[2]" in info.value.message and "[3]" in info.value.message


def test_a_reader_read_runs_on_the_schedule(handed_off, waits, tmp_path):
    path = str(tmp_path / "lines.txt")
    with open(path, "w") as f:
        f.write("one\ntwo\n")
    g = tf.Graph()
    with g.as_default():
        files = tf.FIFOQueue(4, tf.string, shapes=[[]])
        add = files.enqueue([tf.constant(path)])
        _, line = tf.TextLineReader().read(files)
    with tf.Session(graph=g) as sess:
        sess.run(add)
        assert [sess.run(line) for _ in range(2)] == [b"one", b"two"]
        join = in_thread(lambda: sess.run(line))  # the file is done: it waits for work
        assert waits.wait(HANG_S)  # in place: only its fetch comes after the read
        sess.run(add)
        assert join() == b"one"
    assert handed_off.counts["hand_off"] == 0

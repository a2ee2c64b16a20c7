"""The local path of Session.run and callables (distributed/local_run.py): with a master of
this process, a cached signature runs on the master's own worker without requests, reusing
its steps, and still reports what the request path reports: errors naming the node and the
user's line, deadlines, Session.close ending a blocked step, plans changed by Extend."""

import threading
import time

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import CallableOptions, RunOptions


def _local_runs(sess):
    return [c.local for c in sess._runs.values() if c.local is not None]


def test_fetch_structures_and_feeds_through_the_run_cache():
    x = tf.placeholder(tf.float32, [None], name="x")
    y = x * 2.0
    s = tf.reduce_sum(y)
    noop = tf.no_op()
    with tf.Session() as sess:
        for k in range(3):
            v = np.arange(3, dtype=np.float32) + k
            out = sess.run([y, (s, noop), (s,)], {x: v})
            np.testing.assert_array_equal(out[0], v * 2)
            assert out[1][0] == (v * 2).sum() and out[1][1] is None and out[2] == (out[1][0],)
            assert sess.run([[s]], {x: v}) == [[(v * 2).sum()]]  # a list of lists: not cached
            assert sess.run(s, {x: v}) == (v * 2).sum()
            assert sess.run(noop) is None
            assert sess.run({"s": s}, {x: v}) == {"s": (v * 2).sum()}  # a dict: not cached
        runs = _local_runs(sess)
        assert len(runs) == 3 and all(r.worker is not None for r in runs)
        # a fetched array is the caller's: writing it changes nothing of the next run
        a = sess.run(y, {x: np.ones(2, np.float32)})
        a[:] = 7
        np.testing.assert_array_equal(sess.run(y, {x: np.ones(2, np.float32)}), [2, 2])


def test_errors_name_the_node_and_line_and_the_next_run_is_clean():
    x = tf.placeholder(tf.float32, [None], name="x")
    bad = tf.check_numerics(tf.log(x), "log of x", name="bad_log")
    with tf.Session() as sess:
        f = sess.make_callable(bad, [x])
        for run in (lambda v: sess.run(bad, {x: v}), f):
            assert run(np.ones(2, np.float32)).tolist() == [0.0, 0.0]
            with pytest.raises(tf.errors.InvalidArgumentError, match="bad_log") as e:
                run(np.zeros(2, np.float32))
            assert "test_local_run.py" in str(e.value)  # the user's line
            assert run(np.ones(2, np.float32)).tolist() == [0.0, 0.0]


def test_a_replaced_op_is_planned_again():
    a = tf.constant(1.0)
    b = tf.constant(10.0)
    c = tf.identity(a)
    with tf.Session() as sess:
        f = sess.make_callable(c)
        assert f() == 1.0 and sess.run(c) == 1.0
        c.op._update_input(0, b)  # an Extend that replaces a node drops the plans
        assert sess.run(c) == 10.0 and f() == 10.0  # (a call does not Extend: the Run did)


def test_threads_share_a_callable():
    x = tf.placeholder(tf.int64, [], name="x")
    y = x * 3
    with tf.Session() as sess:
        f = sess.make_callable(y, [x])
        bad = []

        def work(base):
            for k in range(200):
                if f(base + k) != 3 * (base + k):
                    bad.append(base + k)

        threads = [threading.Thread(target=work, args=(1000 * i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not bad and not any(t.is_alive() for t in threads)
        free = f.master_callable._local._free  # clean steps, kept for reuse: one per thread
        assert 1 <= len(free) <= 4


def test_a_callables_timeout_ends_a_blocked_dequeue_and_the_queue_works_after():
    q = tf.FIFOQueue(2, tf.float32)
    deq = q.dequeue()
    enq = q.enqueue(5.0)
    with tf.Session() as sess:
        f = sess._make_callable_from_options(
            CallableOptions(fetch=[deq.name], run_options=RunOptions(timeout_in_ms=50))
        )
        with pytest.raises(tf.errors.DeadlineExceededError):
            f()
        sess.run(enq)
        assert f() == [5.0]
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(deq, options=RunOptions(timeout_in_ms=50))


def test_close_ends_a_blocked_local_step():
    q = tf.FIFOQueue(2, tf.float32)
    deq = q.dequeue()
    sess = tf.Session()
    f = sess.make_callable(deq)
    f_started = threading.Event()
    caught = []

    def blocked(run):
        try:
            f_started.set()
            run()
        except tf.errors.CancelledError as e:
            caught.append(e)

    threads = [threading.Thread(target=blocked, args=(run,)) for run in (f, lambda: sess.run(deq))]
    for t in threads:
        t.start()
    f_started.wait(10)
    running = sess._master.session(sess._handle).running
    deadline = time.monotonic() + 10
    while len(running) < 2 and time.monotonic() < deadline:
        threading.Event().wait(0.001)  # polls until both steps are in flight
    sess.close()
    for t in threads:
        t.join(10)
    assert len(caught) == 2 and not any(t.is_alive() for t in threads)
    assert all("Session has been closed" in str(e) for e in caught)

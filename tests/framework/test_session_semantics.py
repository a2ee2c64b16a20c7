"""Session semantics found wrong by TF1 programs from the wild (issue 7): what fetches may alias,
TF1 reference-variable reads, threads, Ctrl-C, feeds (duplicates, structures, bad values) and
tensors inside loops. Expected behaviour is real TensorFlow 1.15's."""

from __future__ import annotations

import collections
import signal
import threading
import warnings

import numpy as np
import pytest

import flowgraph as tf


# -- defect 1: nothing fetched shares memory with state a later step reads -----------------------
def test_fetched_arrays_never_alias_constants_or_their_views():
    c = tf.constant([1, 2, 3])
    views = [
        c,
        tf.zeros([3], tf.int32),
        tf.ones([3], tf.int32),
        tf.reshape(c, [3, 1]),
        c[1:],
        tf.identity(c),
        tf.transpose(tf.reshape(c, [1, 3])),
    ]
    with tf.Session() as sess:
        before = sess.run(views)
        for t in views:
            got = sess.run(t)
            assert got.flags.writeable
            got[...] = 99
        after = sess.run(views)
        r = sess.run(c)
        r[0] = 99
        np.testing.assert_array_equal(sess.run(c * 2), [2, 4, 6])
    for b, a in zip(before, after):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("use_resource", [False, True])
def test_fetched_variable_values_never_change_later(use_resource):
    v = tf.Variable([1.0, 2.0], use_resource=use_resource)
    inc = tf.assign_add(v, [10.0, 10.0])
    with tf.Session() as sess:
        sess.run(v.initializer)
        got = sess.run(v)
        got[0] = -5.0  # the caller's array: the variable must not see this
        sess.run(inc)
        np.testing.assert_array_equal(got, [-5.0, 2.0])
        np.testing.assert_array_equal(sess.run(v), [11.0, 12.0])


# -- defect 2: reads of TF1 ref variables alias the buffer that updates write in place -----------
def test_control_dependencies_and_identity_read_after_an_update():
    v = tf.Variable(1.0)
    a = tf.assign(v, v * 3.0)
    with tf.control_dependencies([a]):
        r = tf.identity(v)
    w = tf.Variable([1.0, 2.0])
    aa = tf.assign_add(w, [1.0, 1.0])
    with tf.control_dependencies([aa]):
        rw = tf.identity(w)
        rr = w.read_value()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(r) == 3.0  # TF: 3.0 (the read of v aliases the buffer Assign writes)
        assert sess.run(r) == 9.0
        np.testing.assert_array_equal(sess.run([rw, rr]), [[2.0, 3.0], [2.0, 3.0]])
        kept = sess.run(w)
        sess.run(aa)
        np.testing.assert_array_equal(kept, [2.0, 3.0])  # fetched results never alias state


def test_identity_after_an_optimizer_step_and_a_scatter_sees_the_update():
    w = tf.Variable([1.0, 2.0])
    step = tf.train.GradientDescentOptimizer(0.5).minimize(tf.reduce_sum(w * w))
    with tf.control_dependencies([step]):
        after_step = tf.identity(w)
    e = tf.Variable([[1.0], [2.0], [3.0]])
    sc = tf.scatter_update(e, [1], [[7.0]])
    with tf.control_dependencies([sc]):
        after_scatter = tf.identity(e)
    counter = tf.Variable(0)
    up = tf.count_up_to(counter, 5)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(after_step), [0.0, 0.0])  # w - 0.5 * 2w
        np.testing.assert_array_equal(sess.run(after_scatter), [[1.0], [7.0], [3.0]])
        assert [sess.run(up) for _ in range(3)] == [0, 1, 2]  # the old value, not the new


def test_same_step_fetch_of_a_ref_variable_and_its_update_matches_tf():
    """TF returns the updated value: the fetched read aliases the buffer until the step ends."""
    v = tf.Variable(1.0)
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run([v, tf.assign(v, 5.0)]) == [5.0, 5.0]


def test_resource_variable_reads_are_snapshots():
    v = tf.Variable([1.0], use_resource=True)
    before = v.read_value()
    with tf.control_dependencies([before]):
        inc = v.assign_add([1.0])
    with tf.control_dependencies([inc]):
        after = v.read_value()
    with tf.Session() as sess:
        sess.run(v.initializer)
        b, a = sess.run([before, after])
        assert b[0] == 1.0 and a[0] == 2.0


# -- defect 3: every Session method is safe from many threads -------------------------------------
def _first_runs_at_once(sess, fetches):
    """Runs each fetch on its own thread, all released together; returns results, failures."""
    barrier = threading.Barrier(len(fetches))
    results, failures = {}, []

    def first_run(i):
        barrier.wait(timeout=30)
        try:
            results[i] = sess.run(fetches[i])
        except Exception as e:  # noqa: BLE001 - collected and reported by the caller
            failures.append(e)

    threads = [threading.Thread(target=first_run, args=(i,)) for i in range(len(fetches))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results, failures


def test_first_runs_from_many_threads_at_once():
    for _ in range(3):
        g = tf.Graph()
        with g.as_default():  # enough ops that one Extend takes a while
            xs = [tf.add_n([tf.constant(float(i))] * 2) for i in range(8)]
            for _ in range(300):
                tf.constant(0.0)
        with tf.Session(graph=g) as sess:
            results, failures = _first_runs_at_once(sess, xs)
        assert not failures, failures
        assert results == {i: 2.0 * i for i in range(len(xs))}


# -- defect 8: Ctrl-C during a kernel is a KeyboardInterrupt -------------------------------------
def test_keyboard_interrupt_in_a_kernel_reaches_the_caller():
    def interrupted():
        raise KeyboardInterrupt

    y = tf.py_func(interrupted, [], tf.float32)
    z = tf.constant(2.0) + 1.0
    with tf.Session() as sess:
        with pytest.raises(KeyboardInterrupt):
            sess.run(y)
        assert sess.run(z) == 3.0  # the session still works


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs POSIX signals")
def test_sigint_during_a_step_raises_keyboard_interrupt():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach only the main thread")

    main = threading.main_thread().ident

    def slow():
        # To the main thread itself, as a terminal's Ctrl-C reaches it: a process-directed
        # os.kill may land on another thread, leaving the main thread asleep in its wait.
        signal.pthread_kill(main, signal.SIGINT)
        threading.Event().wait(5)  # interrupted long before the timeout
        return np.float32(0)

    y = tf.py_func(slow, [], tf.float32)
    with tf.Session() as sess, pytest.raises(KeyboardInterrupt):
        sess.run(y)


def test_keyboard_interrupt_cancels_a_blocked_dequeue_of_the_step():
    """The interrupted step's dequeue is withdrawn: a later enqueue reaches the next dequeue."""
    q = tf.FIFOQueue(10, tf.float32, shapes=[[]])
    deq = q.dequeue()  # built first: it waits in the queue before the py_func runs

    def interrupt():
        raise KeyboardInterrupt

    stop = tf.py_func(interrupt, [], tf.float32)
    with tf.Session() as sess:
        with pytest.raises(KeyboardInterrupt):
            sess.run([deq, stop])
        sess.run(q.enqueue([5.0]))
        assert sess.run(deq, options=tf.RunOptions(timeout_in_ms=10000)) == 5.0


def test_a_kernel_error_cancels_a_blocked_dequeue_of_the_step():
    """An error in a kernel run inline used to leave the step waiting for the dequeue."""
    q = tf.FIFOQueue(10, tf.float32, shapes=[[]])
    deq = q.dequeue()

    def bad():
        raise ValueError("bad value")

    fail = tf.py_func(bad, [], tf.float32)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="bad value"):
            sess.run([deq, fail], options=tf.RunOptions(timeout_in_ms=20000))
        sess.run(q.enqueue([5.0]))
        assert sess.run(deq, options=tf.RunOptions(timeout_in_ms=10000)) == 5.0


# -- defect 11: duplicate feeds; tensors inside a loop --------------------------------------------
def test_one_tensor_fed_by_object_and_by_name_takes_the_last_value():
    x = tf.placeholder(tf.float32, [], name="x")
    y = x * 2.0
    with tf.Session() as sess:
        assert sess.run(y, {x: 1.0, "x:0": 5.0}) == 10.0
        assert sess.run(y, {"x:0": 5.0, x: 1.0}) == 2.0
        assert sess.make_callable(y, [x])(3.0) == 6.0


def test_tensors_inside_a_while_loop_cannot_be_fetched_or_fed():
    inside = []

    def body(i):
        inside.append(i + 1)
        return inside[-1]

    out = tf.while_loop(lambda i: i < 3, body, [tf.constant(0)])
    with tf.Session() as sess:
        assert sess.run(out) == 3
        with pytest.raises(ValueError, match="'while/add' has been marked as not fetchable"):
            sess.run(inside[0])
        with pytest.raises(ValueError, match="'while/add' has been marked as not fetchable"):
            sess.run([inside[0].op])
        with pytest.raises(ValueError, match="Tensor while/add:0 may not be fed"):
            sess.run(out, {inside[0]: 1})
    g = tf.get_default_graph()
    assert g.is_fetchable(out) and not g.is_feedable(inside[0])
    c = tf.constant(1.0)
    g.prevent_fetching(c.op)
    g.prevent_feeding(c)
    assert not g.is_fetchable(c) and not g.is_feedable(c)


def test_prevent_fetching_and_feeding_after_a_run_of_the_same_signature():
    """A Run signature cached by an earlier run still checks marks made after it."""
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder(tf.float32, [])
        c = p * 2.0
        d = c + 1.0
    with tf.Session(graph=g) as sess:
        assert sess.run(c, {p: 1.0}) == 2.0
        assert sess.run(d, {c: 3.0}) == 4.0
        g.prevent_fetching(c.op)
        with pytest.raises(ValueError, match="has been marked as not fetchable"):
            sess.run(c, {p: 1.0})
        g.prevent_feeding(c)
        with pytest.raises(ValueError, match="may not be fed"):
            sess.run(d, {c: 3.0})
        assert sess.run(d, {p: 1.0}) == 3.0


# -- defect 13: bad feed values raise TF's classes; no NumPy warnings --------------------------
def test_bad_feed_values_raise_tf_classes():
    p = tf.placeholder(tf.int32, [])
    f = tf.placeholder(tf.float32, [None])
    with tf.Session() as sess:
        for bad in (object(), {1: 2}):
            with pytest.raises(TypeError):
                sess.run(p, {p: bad})
        with pytest.raises(TypeError, match=r"larger type \(e\.g\. int64\)"):
            sess.run(p, {p: 2**40})
        with pytest.raises(TypeError, match="int64"):
            sess.run(f, {f: [2**2000]})
        with pytest.raises(ValueError, match="Tensor 'Placeholder:0' of dtype int32"):
            sess.run(p, {p: "abc"})
        assert sess.run(p, {p: 2**31 - 1}) == 2**31 - 1
        assert sess.run(p, {p: 1.5}) == 1  # truncated, as NumPy and TF do


def test_no_numpy_runtime_warnings_in_normal_runs():
    x = tf.placeholder(tf.float32, [None])
    i = tf.placeholder(tf.int32, [None])
    ys = [tf.log(x), x / x, tf.exp(x * 1e3), tf.cast(x, tf.int32), tf.sqrt(x - 1.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        tf.constant(np.array([np.nan, 1e300]), tf.int32)
        with tf.Session() as sess:
            sess.run(ys, {x: [0.0, 1.0, np.inf]})
            sess.run(i, {i: np.array([np.nan, np.inf])})  # cast as TF casts (np.asarray), silently


# -- defect 15: structured feed keys ------------------------------------------------------------
def test_nested_structures_of_tensors_as_feed_keys():
    State = collections.namedtuple("State", "c h")
    c = tf.placeholder(tf.float32, [2])
    h = tf.placeholder(tf.float32, [2])
    n = tf.placeholder(tf.float32, [])
    state = State(c, h)
    total = tf.reduce_sum(c + 2.0 * h) + n
    with tf.Session() as sess:
        fed = sess.run(state, {state: State(np.ones(2), np.zeros(2))})
        assert isinstance(fed, State)
        assert sess.run(total, {state: State(np.ones(2), np.ones(2)), n: 0.0}) == 6.0
        assert sess.run(total, {(state, n): ([np.ones(2), np.ones(2)], 1.0)}) == 7.0
        with pytest.raises(ValueError, match="Key had 2 elements, but value had 1 elements"):
            sess.run(total, {state: np.ones((2, 2)), n: 0.0})
        with pytest.raises(ValueError, match="Key had 2 elements, but value had 1"):
            sess.run(total, {(c, h): (np.ones(2),), n: 0.0})


def test_lstm_state_tuple_fed_back_as_the_next_initial_state():
    cell = tf.nn.rnn_cell.BasicLSTMCell(3)
    x = tf.placeholder(tf.float32, [1, 2, 4])
    init = cell.zero_state(1, tf.float32)
    _, final = tf.nn.dynamic_rnn(cell, x, initial_state=init)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        data = np.ones((1, 2, 4), np.float32)
        s1 = sess.run(final, {x: data})
        s2 = sess.run(final, {x: data, init: s1})
        s2_again = sess.run(final, {x: data, init: s1})
    assert type(s1).__name__ == "LSTMStateTuple"
    np.testing.assert_array_equal(s2.c, s2_again.c)
    assert not np.allclose(s1.c, s2.c)

"""Queues (§4.6): FIFO/Padding/RandomShuffle/Priority semantics against Python references,
blocking as async kernels (§5.3), close/cancel, timeouts and Session.close releasing a step."""

import numpy as np
import pytest

import flowgraph as tf
from tests.helpers import in_thread, until


def _waiters(sess, queue, side="_dequeuers"):
    """How many attempts wait on `queue` (reached through the session's device container)."""
    for d in next(iter(sess._local.workers.values())).devices:
        for c in d.resource_mgr.containers():
            try:
                q = d.resource_mgr.lookup(c, queue.queue_ref.op.name)
            except tf.errors.NotFoundError:
                continue
            with q.lock:
                return len(getattr(q, side))
    return 0


def test_fifo_order_and_shapes():
    q = tf.FIFOQueue(10, [tf.int32, tf.float32], shapes=[[], [2]])
    enq = q.enqueue_many([[1, 2, 3], [[1, 1], [2, 2], [3, 3]]])
    x, y = q.dequeue()
    xs, ys = q.dequeue_many(2)
    assert x.shape.as_list() == [] and y.shape.as_list() == [2]
    assert xs.shape.as_list() == [2] and ys.shape.as_list() == [2, 2]
    assert enq.name == "fifo_queue_EnqueueMany" and x.op.name == "fifo_queue_Dequeue"
    with tf.Session() as sess:
        sess.run(enq)
        assert sess.run(q.size()) == 3
        a, b = sess.run([x, y])
        assert a == 1 and b.tolist() == [1, 1] and b.dtype == np.float32
        a, b = sess.run([xs, ys])
        assert a.tolist() == [2, 3] and b.tolist() == [[2, 2], [3, 3]]
        assert sess.run(q.size()) == 0


def test_single_component_and_names():
    q = tf.FIFOQueue(5, tf.float32)
    with tf.Session() as sess:
        sess.run(q.enqueue(3.0))
        assert sess.run(q.dequeue()) == 3.0
    qn = tf.FIFOQueue(5, [tf.int32, tf.string], shapes=[[], []], names=["a", "b"])
    with tf.Session() as sess:
        sess.run(qn.enqueue({"a": 4, "b": "x"}))
        out = sess.run(qn.dequeue())
        assert out == {"a": 4, "b": b"x"}
    with pytest.raises(ValueError, match="must enqueue a dictionary"):
        qn.enqueue([1, "y"])
    with pytest.raises(ValueError, match="do not match names"):
        qn.enqueue({"a": 1, "c": "y"})


def test_static_and_runtime_shape_checks():
    q = tf.FIFOQueue(2, [tf.float32], shapes=[[2]])
    with pytest.raises(ValueError):
        q.enqueue([[1.0, 2.0, 3.0]])
    p = tf.placeholder(tf.float32)
    enq = q.enqueue([p])
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match=r"\[3\]"):
        sess.run(enq, {p: [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="fully defined"):
        tf.FIFOQueue(2, [tf.float32], shapes=[[None]])


def test_dequeue_many_requires_shapes():
    q = tf.FIFOQueue(2, [tf.float32])
    dm = q.dequeue_many(2)
    with tf.Session() as sess:
        sess.run(q.enqueue(1.0))
        sess.run(q.enqueue(2.0))
        with pytest.raises(tf.errors.InvalidArgumentError, match="specified shapes"):
            sess.run(dm)


def test_close_semantics():
    q = tf.FIFOQueue(2, [tf.float32], shapes=[[2]])
    e, d, dm, du = q.enqueue([[1.0, 2.0]]), q.dequeue(), q.dequeue_many(3), q.dequeue_up_to(3)
    with tf.Session() as sess:
        sess.run([e])
        sess.run(e)
        assert not sess.run(q.is_closed())
        sess.run(q.close())
        assert sess.run(q.is_closed())
        with pytest.raises(tf.errors.CancelledError, match="is closed"):
            sess.run(e)
        with pytest.raises(tf.errors.OutOfRangeError, match=r"requested 3, current size 2"):
            sess.run(dm)
        assert sess.run(du).tolist() == [[1, 2], [1, 2]]  # up_to returns what is left
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(d)
        with pytest.raises(tf.errors.CancelledError, match="already closed"):
            sess.run(q.close())
        sess.run(q.close(cancel_pending_enqueues=True))  # no error on a closed queue


def test_blocked_dequeue_is_served_by_later_enqueues():
    q = tf.FIFOQueue(2, [tf.int32], shapes=[[]])
    p = tf.placeholder(tf.int32, [])
    enq, dm = q.enqueue(p), q.dequeue_many(5)  # more than the capacity: taken as they come
    config = tf.ConfigProto(inter_op_parallelism_threads=1)
    with tf.Session(config=config) as sess:
        join = in_thread(lambda: sess.run(dm))
        until(lambda: _waiters(sess, q) == 1)
        for i in range(5):
            sess.run(enq, {p: i})  # the session still runs steps while one is blocked
        assert join().tolist() == [0, 1, 2, 3, 4]


def test_blocked_enqueue_waits_for_room_and_close_cancels_it():
    q = tf.FIFOQueue(1, [tf.int32], shapes=[[]])
    enq = q.enqueue_many([[1, 2, 3]])
    with tf.Session() as sess:
        join = in_thread(lambda: sess.run(enq))
        until(lambda: sess.run(q.size()) == 1)
        assert sess.run(q.dequeue()) == 1
        until(lambda: sess.run(q.size()) == 1)
        sess.run(q.close(cancel_pending_enqueues=True))
        with pytest.raises(tf.errors.CancelledError):
            join()
        assert sess.run(q.dequeue()) == 2  # what was pushed stays


def test_close_waits_behind_pending_enqueues():
    q = tf.FIFOQueue(1, [tf.int32], shapes=[[]])
    enq = q.enqueue_many([[1, 2]])
    with tf.Session() as sess:
        join_enqueue = in_thread(lambda: sess.run(enq))
        until(lambda: _waiters(sess, q, "_enqueuers") == 1)
        close = q.close()
        join_close = in_thread(lambda: sess.run(close))
        until(lambda: _waiters(sess, q, "_enqueuers") == 2)
        assert sess.run(q.dequeue()) == 1  # makes room for 2; then the close runs
        join_enqueue()  # each raises its step's error, if any
        join_close()
        assert sess.run(q.dequeue_up_to(5)).tolist() == [2]


def test_close_fails_blocked_dequeue_with_out_of_range():
    q = tf.FIFOQueue(3, [tf.float32], shapes=[[]])
    with tf.Session() as sess:
        d = q.dequeue()
        join = in_thread(lambda: sess.run(d))
        until(lambda: _waiters(sess, q) == 1)
        sess.run(q.close())
        with pytest.raises(tf.errors.OutOfRangeError):
            join()


def test_timeout_releases_step_and_withdraws_the_waiter():
    q = tf.FIFOQueue(3, [tf.float32], shapes=[[]])
    d = q.dequeue()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(d, options=tf.RunOptions(timeout_in_ms=50))
        assert _waiters(sess, q) == 0
        sess.run(q.enqueue(5.0))
        assert sess.run(d) == 5.0  # the element was not handed to the timed-out step


def test_session_close_releases_blocked_step():
    q = tf.FIFOQueue(3, [tf.float32], shapes=[[]])
    sess = tf.Session()
    d = q.dequeue()
    join = in_thread(lambda: sess.run(d))
    until(lambda: _waiters(sess, q) == 1)
    sess.close()
    with pytest.raises(tf.errors.CancelledError):
        join()


def test_many_blocked_steps_hold_no_threads():
    q = tf.FIFOQueue(100, [tf.int32], shapes=[[]])
    d = q.dequeue()
    config = tf.ConfigProto(inter_op_parallelism_threads=2)
    with tf.Session(config=config) as sess:
        joins = [in_thread(lambda: sess.run(d)) for _ in range(6)]  # more than the pool's threads
        until(lambda: _waiters(sess, q) == 6)
        sess.run(q.enqueue_many([np.arange(6, dtype=np.int32)]))
        assert sorted(join() for join in joins) == list(range(6))


def test_padding_fifo_queue_pads_batches():
    q = tf.PaddingFIFOQueue(5, [tf.int32, tf.string], shapes=[[None], [None]])
    p, s = tf.placeholder(tf.int32, [None]), tf.placeholder(tf.string, [None])
    enq = q.enqueue([p, s])
    out = q.dequeue_many(2)
    assert out[0].shape.as_list() == [2, None]
    with tf.Session() as sess:
        sess.run(enq, {p: [1, 2, 3], s: ["a"]})
        sess.run(enq, {p: [4], s: ["b", "c"]})
        a, b = sess.run(out)
        np.testing.assert_array_equal(a, [[1, 2, 3], [4, 0, 0]])
        assert b.tolist() == [[b"a", b""], [b"b", b"c"]]
    with pytest.raises(ValueError, match="Shapes must be provided"):
        tf.PaddingFIFOQueue(5, [tf.int32, tf.int32], shapes=[[None]])


def _shuffle_order(seed, graph_seed=None):
    g = tf.Graph()
    with g.as_default():
        if graph_seed is not None:
            tf.set_random_seed(graph_seed)
        q = tf.RandomShuffleQueue(20, 0, [tf.int32], shapes=[[]], seed=seed)
        enq = q.enqueue_many([np.arange(20, dtype=np.int32)])
        d = q.dequeue_many(20)
        with tf.Session(graph=g) as sess:
            sess.run(enq)
            return sess.run(d).tolist()


def test_random_shuffle_queue_is_a_seeded_permutation():
    a, b = _shuffle_order(7), _shuffle_order(7)
    assert a == b and sorted(a) == list(range(20)) and a != list(range(20))
    assert _shuffle_order(8) != a
    assert _shuffle_order(None, graph_seed=3) == _shuffle_order(None, graph_seed=3)


def test_random_shuffle_min_after_dequeue():
    q = tf.RandomShuffleQueue(10, 3, [tf.int32], shapes=[[]], seed=1)
    enq = q.enqueue_many([np.arange(4, dtype=np.int32)])
    d, du = q.dequeue(), q.dequeue_up_to(10)
    with tf.Session() as sess:
        sess.run(enq)
        first = sess.run(d)  # 4 > 3: one may leave
        with pytest.raises(tf.errors.DeadlineExceededError):  # 3 left: it would go below
            sess.run(d, options=tf.RunOptions(timeout_in_ms=30))
        sess.run(q.close())  # closing lifts min_after_dequeue
        rest = sess.run(du)
        assert sorted([first] + rest.tolist()) == [0, 1, 2, 3]


def test_priority_queue_orders_by_priority():
    q = tf.PriorityQueue(10, [tf.string], shapes=[[]])
    enq = q.enqueue_many([[5, 1, 3, 1], ["e", "a", "c", "b"]])
    prio, val = q.dequeue_many(4)
    with tf.Session() as sess:
        sess.run(enq)
        p, v = sess.run([prio, val])
        assert p.tolist() == [1, 1, 3, 5] and v.tolist() == [b"a", b"b", b"c", b"e"]
    assert q.dtypes == [tf.int64, tf.string]


def test_shared_name_shares_the_queue_and_checks_attrs():
    q1 = tf.FIFOQueue(5, [tf.int32], shapes=[[]], shared_name="shared_q")
    q2 = tf.FIFOQueue(5, [tf.int32], shapes=[[]], shared_name="shared_q")
    q3 = tf.FIFOQueue(5, [tf.float32], shapes=[[]], shared_name="shared_q")
    with tf.Session() as sess:
        sess.run(q1.enqueue(9))
        assert sess.run(q2.dequeue()) == 9
        with pytest.raises(tf.errors.InvalidArgumentError, match="component types"):
            sess.run(q3.size())


def test_from_list_selects_a_queue_at_run_time():
    qs = [tf.FIFOQueue(5, [tf.int32], shapes=[[]]) for _ in range(2)]
    idx = tf.placeholder(tf.int32, [])
    q = tf.QueueBase.from_list(idx, qs)
    with tf.Session() as sess:
        sess.run(q.enqueue(4), {idx: 1})
        assert sess.run(qs[1].size()) == 1 and sess.run(qs[0].size()) == 0
        assert sess.run(q.dequeue(), {idx: 1}) == 4
    with pytest.raises(TypeError, match="matching component dtypes"):
        tf.QueueBase.from_list(0, [qs[0], tf.FIFOQueue(5, [tf.float32])])


def test_enqueue_many_batch_mismatch():
    q = tf.FIFOQueue(5, [tf.int32, tf.int32], shapes=[[], []])
    a, b = tf.placeholder(tf.int32, [None]), tf.placeholder(tf.int32, [None])
    enq = q.enqueue_many([a, b])
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match="0th dim"):
        sess.run(enq, {a: [1, 2], b: [1]})


def test_dequeue_from_while_loop_body():
    q = tf.FIFOQueue(10, [tf.float32], shapes=[[]])
    enq = q.enqueue_many([[1.0, 2.0, 3.0]])
    total = tf.while_loop(
        lambda i, s: i < 3, lambda i, s: (i + 1, s + q.dequeue()), [tf.constant(0), 0.0]
    )[1]
    with tf.Session() as sess:
        sess.run(enq)
        assert sess.run(total) == 6.0


def test_v1_queue_ops_with_ref_string_handles():
    """Older GraphDefs hold FIFOQueue/QueueEnqueue/... with a Ref(string) handle."""
    from flowgraph.framework.apply_op import apply_op

    handle = apply_op("FIFOQueue", [], component_types=[tf.int32], shapes=[[]], capacity=5)
    handle = handle.outputs[0]
    assert handle.dtype == tf.string._as_ref
    enq = apply_op("QueueEnqueueMany", [handle, [tf.constant([1, 2, 3])]])
    deq = apply_op("QueueDequeueUpTo", [handle, tf.constant(5)], component_types=[tf.int32])
    size = apply_op("QueueSize", [handle]).outputs[0]
    close = apply_op("QueueClose", [handle])
    with tf.Session() as sess:
        sess.run(enq)
        assert sess.run(size) == 3
        sess.run(close)
        assert sess.run(deq.outputs[0]).tolist() == [1, 2, 3]
    graph_def = tf.get_default_graph().as_graph_def()
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(graph_def, name="")
        with tf.Session(graph=g) as sess:
            sess.run(enq.name)
            assert sess.run(size.name) == 3


def test_enqueue_of_a_variable_update_reads_its_value():
    """An async kernel reads a reference input (AssignAdd's output) like any kernel: its inputs
    follow the step and the continuation, and the queue handle is not mistaken for it."""
    v = tf.Variable(0)
    q = tf.FIFOQueue(5, tf.int32, shapes=[[]])
    enq = q.enqueue(tf.assign_add(v, 1))
    deq = q.dequeue()
    with tf.Session() as sess:
        sess.run(v.initializer)
        # Dequeued before the next update: the element shares the variable's buffer, as in TF
        # (three enqueues, then dequeue_many(3), give [3, 3, 3] there too).
        assert [sess.run(enq) or sess.run(deq) for _ in range(3)] == [1, 2, 3]


def test_random_shuffle_dequeues_are_uniform_and_seeded():
    """The uniform draws behind each dequeue come in blocks: every element is equally likely
    to leave first, and a seed fixes the order across more than one block."""
    q = tf.RandomShuffleQueue(1000, 0, [tf.int32], shapes=[[]], seed=5)
    enq = q.enqueue_many([np.arange(10, dtype=np.int32)])
    first = q.dequeue()
    rest = q.dequeue_many(9)
    counts = np.zeros(10, np.int64)
    with tf.Session() as sess:
        for _ in range(600):  # 6000 draws: more than 20 blocks
            sess.run(enq)
            head = sess.run(first)
            counts[head] += 1
            assert sorted([head] + sess.run(rest).tolist()) == list(range(10))
    assert counts.min() > 30 and counts.max() < 100  # 60 expected each; sd about 7
    q2 = tf.RandomShuffleQueue(1000, 0, [tf.int32], shapes=[[]], seed=5)
    enq2, all2 = q2.enqueue_many([np.arange(10, dtype=np.int32)]), q2.dequeue_many(10)
    with tf.Session() as sess:
        again = [sess.run([enq2, all2])[1].tolist() for _ in range(600)]
    with tf.Session() as sess:
        assert [sess.run([enq2, all2])[1].tolist() for _ in range(600)] == again

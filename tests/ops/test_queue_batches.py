"""Queues move elements in batches (kernels/cpu/queue_base.py, queue_kinds.py): an enqueue_many is
stored as one chunk and a dequeue_many is a slice or one take per component. These tests hold
that path to the element-by-element semantics: FIFO order across any mix of batch sizes, the
RandomShuffleQueue's seeded order against a one-element-at-a-time model, partial batches at
close, a batch pushed partly while the queue is full, every dtype a queue holds."""

import threading

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape
from flowgraph.kernels.cpu import queue_kinds
from tests.helpers import FIXED_SIZE_DTYPES, dtype_id

BOUNDED = tf.RunOptions(timeout_in_ms=20_000)  # a stuck step fails instead of hanging


def test_fifo_order_across_enqueue_many_and_dequeue_many_mixes():
    rng = np.random.RandomState(0)
    q = tf.FIFOQueue(1000, [tf.int64, tf.float32], shapes=[[], [3]])
    xs = tf.placeholder(tf.int64, [None])
    x1 = tf.placeholder(tf.int64, [])
    n = tf.placeholder(tf.int32, [])
    enq_many = q.enqueue_many([xs, tf.cast(tf.tile(tf.expand_dims(xs, 1), [1, 3]), tf.float32)])
    enq_one = q.enqueue([x1, tf.cast(tf.fill([3], x1), tf.float32)])
    deq_one = q.dequeue()
    deq_many = q.dequeue_many(n)
    deq_up_to = q.dequeue_up_to(n)
    model: list[int] = []
    nxt = 0
    with tf.Session() as sess:
        for _ in range(150):
            op = rng.randint(5)
            if op == 0:  # enqueue_many of 0..20 elements
                k = rng.randint(21)
                sess.run(enq_many, {xs: np.arange(nxt, nxt + k)})
                model.extend(range(nxt, nxt + k))
                nxt += k
            elif op == 1:
                sess.run(enq_one, {x1: nxt})
                model.append(nxt)
                nxt += 1
            elif op == 2 and model:
                a, b = sess.run(deq_one)
                assert a == model.pop(0) and b.tolist() == [a] * 3 and b.dtype == np.float32
            elif op in (3, 4) and model:
                k = rng.randint(len(model) + 1)
                a, b = sess.run(deq_many if op == 3 else deq_up_to, {n: k})
                want, model = model[:k], model[k:]
                assert a.tolist() == want and a.dtype == np.int64 and a.shape == (k,)
                assert b.shape == (k, 3) and (b == a[:, None]).all()
            assert sess.run(q.size()) == len(model)


def _shuffle_model(seed, seed2, ops, capacity):
    """What a RandomShuffleQueue gives for `ops` when each dequeued element is drawn alone: a
    uniform u picks slot int(u * size), the last element takes its place; uniforms come from
    default_rng([seed, seed2]) in blocks of 256, used from the end of each block."""
    rng = np.random.default_rng([seed, seed2])
    items, uniform, out = [], [], []
    for kind, arg in ops:
        if kind == "enqueue":
            items.extend(arg)
            assert len(items) <= capacity
            continue
        got = []
        for _ in range(arg):
            if not uniform:
                uniform = rng.random(256).tolist()
            k = min(int(uniform.pop() * len(items)), len(items) - 1)
            items[k], items[-1] = items[-1], items[k]
            got.append(items.pop())
        out.append(got)
    return out, items


@pytest.mark.parametrize("shaped", [True, False], ids=["arrays", "list"])
def test_random_shuffle_queue_matches_one_at_a_time_draws(shaped):
    rng = np.random.RandomState(1)
    ops, size, nxt = [], 0, 0
    for _ in range(120):
        if rng.rand() < 0.5 and size + 40 <= 300:
            k = rng.randint(41)
            ops.append(("enqueue", list(range(nxt, nxt + k))))
            size, nxt = size + k, nxt + k
        elif size:
            k = rng.randint(1, size + 1) if shaped else 1
            ops.append(("dequeue", k))
            size -= k
    want, left = _shuffle_model(7, 11, ops, 300)
    shapes = [TensorShape([]), TensorShape([2])] if shaped else []
    q = queue_kinds.RandomShuffleQueue("q", [dtypes.int64, dtypes.int32], shapes, 300, 0, 7, 11)
    got = []
    for kind, arg in ops:
        if kind == "enqueue":
            ids = np.array(arg, np.int64)
            pairs = np.stack([ids, -ids], 1).astype(np.int32)
            batch = q.validate([ids, pairs], batched=True)
            q.enqueue(None, batch, lambda *a: None)
        else:
            box = []
            q.dequeue(None, arg, lambda pieces=None, error=None: box.append((pieces, error)))
            ((pieces, error),) = box
            assert error is None
            a, b = q.batch(pieces) if shaped else [np.stack(c) for c in zip(q.element(pieces))]
            assert (b == np.stack([a, -a], 1)).all()
            got.append(a.tolist())
    assert got == want
    assert q.size() == len(left)


def test_random_shuffle_byte_moves_keep_every_component_of_mixed_dtypes():
    """The compiled take moves elements as byte rows of one buffer: components of different
    widths (an odd-sized int8 in front, an empty one) stay whole and aligned, across growth,
    and a dequeued batch owns its memory."""
    kinds = [dtypes.int8, dtypes.float64, dtypes.float32, dtypes.complex128]
    shapes = [TensorShape([]), TensorShape([3]), TensorShape([0]), TensorShape([2, 2])]
    q = queue_kinds.RandomShuffleQueue("q", kinds, shapes, 200, 0, 3, 0)
    ops = [("enqueue", list(range(7))), ("dequeue", 4), ("enqueue", list(range(7, 150)))]
    ops += [("dequeue", 64), ("enqueue", list(range(150, 190))), ("dequeue", 100)]
    want, left = _shuffle_model(3, 0, ops, 200)
    got, kept = [], []
    for kind, arg in ops:
        ids = np.array(arg, np.int64)
        if kind == "enqueue":
            comps = [
                (ids % 100).astype(np.int8),
                np.stack([ids * 0.5, -ids, ids + 0.25], 1),
                np.zeros((len(ids), 0), np.float32),
                (ids * (1 + 2j))[:, None, None] * np.ones((2, 2)),
            ]
            q.enqueue(None, q.validate(comps, batched=True), lambda *a: None)
            continue
        box = []
        q.dequeue(None, arg, lambda pieces=None, error=None: box.append(pieces))
        a, b, c, d = q.batch(box[0])
        for x in (a, b, c, d):
            assert x.flags.c_contiguous and x.flags.aligned and x.flags.writeable
        assert (a.dtype, b.shape, c.shape, d.shape) == (np.int8, (arg, 3), (arg, 0), (arg, 2, 2))
        n = (b[:, 1] * -1).astype(np.int64)
        assert (
            (a == n % 100).all()
            and (b[:, 0] == n * 0.5).all()
            and (d == n[:, None, None] * (1 + 2j)).all()
        )
        b[:] = -7.0  # the batch is the caller's: the queue's elements do not change
        got.append(n.tolist())
        kept.append(b)
    assert got == want and q.size() == len(left)


def test_dequeue_up_to_returns_partial_batches_after_close():
    q = tf.FIFOQueue(20, [tf.int32, tf.string], shapes=[[], []])
    n = tf.placeholder(tf.int32, [])
    up_to, many = q.dequeue_up_to(n), q.dequeue_many(n)
    words = np.array([b"w%d" % i for i in range(10)], dtype=object)
    with tf.Session() as sess:
        sess.run(q.enqueue_many([np.arange(10, dtype=np.int32), words]))
        sess.run(q.close())
        a, b = sess.run(up_to, {n: 4})
        assert a.tolist() == [0, 1, 2, 3] and b.tolist() == [b"w0", b"w1", b"w2", b"w3"]
        with pytest.raises(tf.errors.OutOfRangeError, match="requested 7, current size 6"):
            sess.run(many, {n: 7})
        assert sess.run(q.size()) == 6  # a failed dequeue_many gives its elements back
        a, _ = sess.run(many, {n: 2})
        assert a.tolist() == [4, 5]
        a, b = sess.run(up_to, {n: 10}, options=BOUNDED)
        assert a.tolist() == [6, 7, 8, 9] and b.tolist() == [b"w6", b"w7", b"w8", b"w9"]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(up_to, {n: 1})


def test_random_shuffle_dequeue_up_to_takes_the_rest_after_close():
    q = tf.RandomShuffleQueue(50, 10, [tf.int32], shapes=[[]], seed=3)
    with tf.Session() as sess:
        sess.run(q.enqueue_many([np.arange(25, dtype=np.int32)]))
        first = sess.run(q.dequeue_many(15))  # leaves min_after_dequeue
        sess.run(q.close())
        rest = sess.run(q.dequeue_up_to(20), options=BOUNDED)
    assert len(rest) == 10
    assert sorted(first.tolist() + rest.tolist()) == list(range(25))


def test_an_enqueue_many_larger_than_the_room_is_pushed_as_room_appears():
    q = tf.FIFOQueue(4, [tf.int32], shapes=[[]])
    n = tf.placeholder(tf.int32, [])
    deq = q.dequeue_many(n)
    with tf.Session() as sess:
        sess.run(q.enqueue_many([[0, 1, 2]]))
        done = threading.Event()
        box = {}

        def enqueue():
            try:
                sess.run(q.enqueue_many([np.arange(3, 10, dtype=np.int32)]), options=BOUNDED)
            except tf.errors.OpError as e:
                box["error"] = e
            done.set()

        t = threading.Thread(target=enqueue, daemon=True)
        t.start()
        got = []
        while len(got) < 10:  # each dequeue makes room for the rest of the waiting batch
            got.extend(sess.run(deq, {n: 2}, options=BOUNDED).tolist())
            assert sess.run(q.size()) <= 4
        assert done.wait(20) and "error" not in box
        t.join(10)
    assert got == list(range(10))


def test_a_timed_out_dequeue_many_gives_back_what_it_took_in_order():
    q = tf.FIFOQueue(10, [tf.int32], shapes=[[]])
    with tf.Session() as sess:
        sess.run(q.enqueue_many([[5, 6, 7]]))
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(q.dequeue_many(5), options=tf.RunOptions(timeout_in_ms=50))
        sess.run(q.enqueue(8))
        assert sess.run(q.dequeue_many(4)).tolist() == [5, 6, 7, 8]


def _values(dtype, n):
    if dtype is object:
        return np.array([b"s%d" % i for i in range(n * 2)], dtype=object).reshape(n, 2)
    if dtype == np.bool_:
        return (np.arange(n * 2) % 3 == 0).reshape(n, 2)
    return (np.arange(n * 2) % 50 + 1).astype(dtype).reshape(n, 2)


@pytest.mark.parametrize("dtype", [*FIXED_SIZE_DTYPES, object], ids=dtype_id)
@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
def test_every_dtype_passes_through_enqueue_many_and_dequeue_many(dtype, kind):
    tf_dtype = tf.string if dtype is object else tf.as_dtype(dtype)
    if kind == "fifo":
        q = tf.FIFOQueue(20, [tf_dtype], shapes=[[2]])
    else:
        q = tf.RandomShuffleQueue(20, 0, [tf_dtype], shapes=[[2]], seed=4)
    values = _values(dtype, 6)
    with tf.Session() as sess:
        sess.run(q.enqueue_many([values]))
        sess.run(q.enqueue(values[0]))
        batch = sess.run(q.dequeue_many(5))
        rest = sess.run(q.dequeue_up_to(1), options=BOUNDED)
        last = sess.run(q.dequeue(), options=BOUNDED)
    got = np.concatenate([batch, rest, last[None]])
    assert batch.dtype == values.dtype and batch.shape == (5, 2)
    want = np.concatenate([values, values[:1]])
    if kind == "fifo":
        assert got.tolist() == want.tolist()
    else:
        assert sorted(map(repr, got.tolist())) == sorted(map(repr, want.tolist()))


def test_enqueue_many_checks_element_shapes_and_batch_sizes():
    q = tf.FIFOQueue(10, [tf.float32, tf.float32], shapes=[[2], [2]])
    bad = tf.placeholder(tf.float32, [None, None])
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"Expected \[batch_size,2\]"):
            sess.run(q.enqueue_many([bad, bad]), {bad: np.zeros((3, 4), np.float32)})
        assert sess.run(q.size()) == 0
        other = tf.placeholder(tf.float32, [None, 2])
        feed = {bad: np.zeros((3, 2), np.float32), other: np.zeros((2, 2), np.float32)}
        with pytest.raises(tf.errors.InvalidArgumentError, match="same size in the 0th"):
            sess.run(q.enqueue_many([bad, other]), feed)
        assert sess.run(q.size()) == 0


def test_unshaped_queues_hold_elements_of_different_shapes():
    for q in (
        tf.FIFOQueue(10, [tf.float32]),
        tf.RandomShuffleQueue(10, 0, [tf.float32], seed=2),
    ):
        v = tf.placeholder(tf.float32)
        with tf.Session() as sess:
            for shape in ((), (2,), (1, 3)):
                sess.run(q.enqueue([v]), {v: np.ones(shape, np.float32)})
            got = sorted(sess.run(q.dequeue()).shape for _ in range(3))
        assert got == [(), (1, 3), (2,)]

"""The paths that keep a tf.data pipeline's cost off the training step (issue 11, bench I2d):
the dataset pool's hand-off and IteratorGetNext's take of a prefetched element."""

import threading

import pytest
from dataset_helpers import drain

import flowgraph as tf
from flowgraph.kernels.cpu.dataset_base import BackgroundPool

Dataset = tf.data.Dataset


def test_pool_runs_every_task_when_tasks_outnumber_workers():
    pool = BackgroundPool(2, "test_pool")
    done = threading.Semaphore(0)
    seen = []
    lock = threading.Lock()

    def task(i):
        with lock:
            seen.append(i)
        done.release()

    for i in range(50):
        pool.submit(lambda i=i: task(i))
    for _ in range(50):
        assert done.acquire(timeout=30)
    assert sorted(seen) == list(range(50))
    assert pool._workers <= 2


def test_pool_keeps_running_after_a_task_raises(monkeypatch):
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the expected report
    pool = BackgroundPool(1, "test_pool")
    done = threading.Event()

    def boom():
        raise RuntimeError("task failure")

    pool.submit(boom)
    pool.submit(done.set)
    assert done.wait(30)


def test_prefetched_elements_errors_and_end_through_get_next():
    def check(v):
        if v == 3:
            raise ValueError("three")
        return v

    ds = Dataset.range(6).map(lambda v: tf.py_func(check, [v], tf.int64)).prefetch(4)
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = [int(sess.run(nxt)) for _ in range(3)]
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(nxt)  # the buffered error, in its place
        got += [int(sess.run(nxt)) for _ in range(2)]
        for _ in range(2):  # the end is the end every time
            with pytest.raises(tf.errors.OutOfRangeError):
                sess.run(nxt)
    assert got == [0, 1, 2, 4, 5]
    assert [int(v) for v in drain(Dataset.range(5).prefetch(2))] == list(range(5))

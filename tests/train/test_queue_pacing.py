"""A QueueRunner's thread paces itself on its queue (QueueBase.pace): once full, the queue must
drain to its low mark before the producer runs again, and anything that needs the producer (a
waiting dequeue, a close, the session's end) releases it. The queue's own semantics stay."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.train import queue_runner
from tests.helpers import in_thread, until


def _filled(capacity, kind="fifo"):
    """A session, the queue op, its resource (full) and a dequeue_many(n) runner."""
    g = tf.Graph()
    with g.as_default():
        if kind == "fifo":
            q = tf.FIFOQueue(capacity, tf.int32, shapes=[[]])
        else:
            q = tf.RandomShuffleQueue(capacity, 4, tf.int32, shapes=[[]], seed=1)
        fill = q.enqueue_many(tf.range(capacity))
        n = tf.placeholder(tf.int32, [])
        take = q.dequeue_many(n)
        close = q.close(cancel_pending_enqueues=False)
    sess = tf.Session(graph=g)
    sess.run(fill)
    resource = queue_runner._local_queue(sess, q)
    return sess, q, resource, lambda k: sess.run(take, {n: k}), lambda: sess.run(close)


def _paced(resource):
    """pace() in a thread, returned once it waits on `resource`."""
    join = in_thread(resource.pace)
    until(lambda: resource._pacers, "pace did not wait on a full queue")
    return join


def test_pace_returns_at_once_while_there_is_room():
    sess, _, resource, take, _ = _filled(8)
    take(8)
    resource.pace()  # room for another enqueue like the latest (of 8): no wait
    assert not resource._pacers
    sess.close()


@pytest.mark.parametrize("kind, low", [("fifo", 4), ("shuffle", 6)])
def test_a_full_queue_releases_the_producer_at_its_low_mark(kind, low):
    # FIFO: half the capacity. Shuffle: half way between min_after_dequeue (4) and capacity.
    sess, _, resource, take, _ = _filled(8, kind)
    join = _paced(resource)
    take(8 - low - 1)
    assert resource._pacers, "released above the low mark"
    take(1)
    join()
    assert not resource._pacers
    sess.close()


def test_a_waiting_dequeue_releases_the_producer():
    sess, q, resource, take, _ = _filled(8)
    join = _paced(resource)
    got = in_thread(lambda: take(10))  # more than the queue holds: it waits for the producer
    join()
    with sess.graph.as_default():
        sess.run(q.enqueue_many([[8, 9]]))  # the producer's next run
    np.testing.assert_array_equal(got(), np.arange(10))
    sess.close()


def test_close_and_session_end_release_the_producer():
    sess, _, resource, _, close = _filled(8)
    join = _paced(resource)
    close()
    join()
    resource.pace()  # closed: never waits
    sess2, _, resource2, _, _ = _filled(8)
    join = _paced(resource2)
    sess2.close()  # the container drops the queue
    join()
    sess.close()


def test_paced_runners_deliver_every_element_in_order():
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(16, tf.int64, shapes=[[]])
        counter = tf.data.Dataset.range(10**9).make_one_shot_iterator().get_next()
        runner = tf.train.QueueRunner(q, [q.enqueue(counter)])
        take = q.dequeue_many(5)
    with tf.Session(graph=g) as sess:
        coord = tf.train.Coordinator()
        threads = runner.create_threads(sess, coord, start=True)
        got = np.concatenate([sess.run(take) for _ in range(40)])
        coord.request_stop()
        coord.join(threads)
    np.testing.assert_array_equal(got, np.arange(200))

"""Reinitializable and feedable iterators, and the asynchronous GetNext: a step waiting on a
prefetch parks no thread and is released by a timeout or Session.close (bounded waits)."""

import threading

import pytest

import flowgraph as tf

Dataset = tf.data.Dataset


def test_reinitializable_iterator_switches_datasets():
    train = Dataset.range(10).map(lambda v: v * 2)
    val = Dataset.range(3)
    it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
    nxt = it.get_next()
    init_train, init_val = it.make_initializer(train), it.make_initializer(val)
    with tf.Session() as sess:
        sess.run(init_train)
        assert [sess.run(nxt) for _ in range(3)] == [0, 2, 4]
        sess.run(init_val)
        assert [sess.run(nxt) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(nxt)
        sess.run(init_train)
        assert sess.run(nxt) == 0
    with pytest.raises(TypeError, match="types"):
        it.make_initializer(Dataset.from_tensors(1.0))
    assert it.output_classes is tf.Tensor


def test_feedable_iterator_follows_the_fed_handle():
    a = Dataset.range(100).make_one_shot_iterator()
    b = Dataset.range(100, 200).make_initializable_iterator()
    handle = tf.placeholder(tf.string, [])
    it = tf.data.Iterator.from_string_handle(handle, a.output_types, a.output_shapes)
    nxt = it.get_next()
    with tf.Session() as sess:
        ha, hb = sess.run([a.string_handle(), b.string_handle()])
        sess.run(b.initializer)
        got = [sess.run(nxt, {handle: h}) for h in (ha, ha, hb, ha, hb)]
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(nxt, {handle: b"garbage"})
    assert got == [0, 1, 100, 2, 101]


def test_get_next_waiting_on_prefetch_times_out_and_keeps_the_element():
    release = threading.Event()

    def slow(v):
        assert release.wait(30)  # bounded: the test sets it below
        return v

    ds = Dataset.range(3).map(lambda v: tf.py_func(slow, [v], tf.int64)).prefetch(1)
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(nxt, options=tf.RunOptions(timeout_in_ms=200))
        release.set()
        assert [sess.run(nxt) for _ in range(3)] == [0, 1, 2]  # no element lost


def test_session_close_releases_a_waiting_get_next():
    release = threading.Event()
    ds = (
        Dataset.range(2)
        .map(lambda v: tf.py_func(lambda x: (release.wait(30), x)[1], [v], tf.int64))
        .prefetch(1)
    )
    nxt = ds.make_one_shot_iterator().get_next()
    sess = tf.Session()
    outcome = {}

    def run():
        try:
            sess.run(nxt)
        except tf.errors.CancelledError as e:
            outcome["error"] = e

    t = threading.Thread(target=run)
    t.start()
    # No sleep: close as soon as the step is in flight; either way it must end promptly.
    sess.close()
    release.set()
    t.join(30)
    assert not t.is_alive()


def test_concurrent_get_next_calls_share_one_sequence():
    nxt = Dataset.range(200).prefetch(8).make_one_shot_iterator().get_next()
    got = []
    lock = threading.Lock()
    with tf.Session() as sess:

        def worker():
            for _ in range(50):
                v = sess.run(nxt)
                with lock:
                    got.append(int(v))

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert sorted(got) == list(range(200))


def test_iterator_string_handle_is_a_resource_handle_proto():
    from flowgraph.core.protos import ResourceHandleProto

    it = Dataset.range(2).make_initializable_iterator(shared_name="shared_it")
    with tf.Session() as sess:
        raw = sess.run(it.string_handle())
    proto = ResourceHandleProto.FromString(raw)
    assert proto.name == "shared_it" and proto.device.endswith("CPU:0")
    assert isinstance(raw, bytes)

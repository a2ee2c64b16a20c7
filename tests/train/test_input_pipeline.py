"""Queue runners, the Coordinator, input producers and the batch family (§4.5, §4.6)."""

import threading

import numpy as np
import pytest

import flowgraph as tf
from tests.helpers import HANG_S


def _drain(sess, fetch):
    """Runs `fetch` until OutOfRangeError with queue runners and a coordinator."""
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess, coord)
    out = []
    try:
        while not coord.should_stop():
            out.append(sess.run(fetch))
    except tf.errors.OutOfRangeError:
        pass
    finally:
        coord.request_stop()
    coord.join(threads, stop_grace_period_secs=10)
    return out


def _session():
    sess = tf.Session()
    sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
    return sess


# -- Coordinator -----------------------------------------------------------------------------------
def test_coordinator_reraises_the_first_exception_in_join():
    coord = tf.train.Coordinator()
    started = threading.Event()

    def worker():
        with coord.stop_on_exception():
            started.set()
            raise ValueError("boom")

    t = threading.Thread(target=worker)
    coord.register_thread(t)
    t.start()
    with pytest.raises(ValueError, match="boom"):
        coord.join(stop_grace_period_secs=HANG_S)
    assert coord.should_stop() and coord.joined


def test_coordinator_clean_stop_and_clear():
    coord = tf.train.Coordinator()
    coord.request_stop(tf.errors.OutOfRangeError(None, None, "end"))
    assert coord.should_stop() and coord.wait_for_stop(0)
    coord.join([])  # OutOfRange is a clean stop: nothing re-raised
    coord.clear_stop()
    assert not coord.should_stop()


def test_coordinator_reports_stragglers():
    coord = tf.train.Coordinator()
    release = threading.Event()
    t = threading.Thread(target=release.wait, daemon=True)
    t.start()
    coord.request_stop()
    with pytest.raises(RuntimeError, match="threads still running"):
        coord.join([t], stop_grace_period_secs=0.01)
    release.set()


def test_looper_thread_runs_until_stop():
    coord = tf.train.Coordinator()
    calls = []
    done = threading.Event()

    def tick():
        calls.append(1)
        if len(calls) == 3:
            done.set()

    coord.loop(0.001, tick)
    assert done.wait(HANG_S)
    coord.request_stop()
    coord.join(stop_grace_period_secs=HANG_S)
    assert len(calls) >= 3


# -- QueueRunner -------------------------------------------------------------------------------------
def test_queue_runner_fills_and_closes_the_queue():
    src = tf.train.range_input_producer(5, num_epochs=1, shuffle=False)
    q = tf.FIFOQueue(10, [tf.int32], shapes=[[]])
    qr = tf.train.QueueRunner(q, [q.enqueue(src.dequeue())] * 2)
    tf.train.add_queue_runner(qr)
    assert qr in tf.get_default_graph().get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    with _session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        got = []
        with pytest.raises(tf.errors.OutOfRangeError):
            while True:
                got.append(sess.run(q.dequeue()))
        coord.request_stop()
        coord.join(threads)
        assert sorted(got) == [0, 1, 2, 3, 4]


def test_queue_runner_error_goes_to_coordinator():
    q = tf.FIFOQueue(10, [tf.float32], shapes=[[]])
    bad = tf.check_numerics(tf.constant(np.nan, tf.float32), "bad input")
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [q.enqueue(bad)]))
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        with pytest.raises(tf.errors.InvalidArgumentError, match="bad input"):
            coord.join(threads, stop_grace_period_secs=10)


def test_queue_runner_proto_round_trip():
    q = tf.FIFOQueue(10, [tf.float32], shapes=[[]])
    qr = tf.train.QueueRunner(q, [q.enqueue(1.0)])
    proto = qr.to_proto()
    assert proto.queue_name == q.name and proto.queue_closed_exception_types == [11]
    qr2 = tf.train.QueueRunner.from_proto(proto)
    assert qr2.enqueue_ops[0].name == qr.enqueue_ops[0].name
    assert qr2.queue_closed_exception_types == (tf.errors.OutOfRangeError,)


def test_start_queue_runners_needs_a_session():
    with pytest.raises(ValueError, match="No default session"):
        tf.train.start_queue_runners()


# -- producers -------------------------------------------------------------------------------------
def test_string_input_producer_epochs_and_order():
    q = tf.train.string_input_producer(["a", "b", "c"], num_epochs=2, shuffle=False)
    with _session() as sess:
        got = _drain(sess, q.dequeue())
    assert got == [b"a", b"b", b"c"] * 2


def test_string_input_producer_shuffles_each_epoch_reproducibly():
    def run():
        g = tf.Graph()
        with g.as_default():
            tf.set_random_seed(5)
            q = tf.train.string_input_producer([str(i) for i in range(8)], num_epochs=3)
            with _session() as sess:
                return _drain(sess, q.dequeue())

    a = run()
    assert a == run()
    assert sorted(a[:8]) == sorted(a[8:16]) and a[:8] != a[8:16]


def test_string_input_producer_rejects_empty():
    with pytest.raises(ValueError, match="non-null"):
        tf.train.string_input_producer([])


def test_limit_epochs_counts_evaluations():
    x = tf.train.limit_epochs(tf.constant([1, 2]), num_epochs=2)
    with _session() as sess:
        sess.run(x)
        sess.run(x)
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(x)
    with pytest.raises(ValueError, match="num_epochs must be > 0"):
        tf.train.limit_epochs(tf.constant(1), 0)


def test_slice_input_producer_keeps_rows_together():
    xs = np.arange(12, dtype=np.float32).reshape(6, 2)
    ys = np.arange(6, dtype=np.int64)
    x, y = tf.train.slice_input_producer([xs, ys], num_epochs=1, seed=3)
    with _session() as sess:
        got = _drain(sess, [x, y])
    assert sorted(int(b) for _, b in got) == list(range(6))
    for a, b in got:
        np.testing.assert_array_equal(a, xs[b])


# -- batching --------------------------------------------------------------------------------------
def test_batch_with_smaller_final_batch_and_dict():
    x, y = tf.train.slice_input_producer(
        [np.arange(10, dtype=np.int32), np.arange(10, dtype=np.float32) * 2],
        num_epochs=1,
        shuffle=False,
    )
    b = tf.train.batch({"x": x, "y": y}, 4, allow_smaller_final_batch=True)
    assert set(b) == {"x", "y"} and b["x"].shape.as_list() == [None]
    with _session() as sess:
        got = _drain(sess, b)
    assert [g["x"].tolist() for g in got] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    np.testing.assert_array_equal(got[2]["y"], [16.0, 18.0])


def test_batch_drops_the_partial_batch_by_default():
    (x,) = tf.train.slice_input_producer([np.arange(10, dtype=np.int32)], 1, shuffle=False)
    b = tf.train.batch([x], 4)
    assert b.shape.as_list() == [4]
    with _session() as sess:
        assert len(_drain(sess, b)) == 2


def test_batch_enqueue_many_and_threads():
    data = np.arange(20, dtype=np.int32).reshape(10, 2)
    (x,) = tf.train.slice_input_producer([data], 1, shuffle=False)
    rows = tf.reshape(x, [1, 2])
    b = tf.train.batch([rows], 5, num_threads=2, enqueue_many=True, capacity=8)
    with _session() as sess:
        got = np.concatenate(_drain(sess, b))
    assert sorted(got[:, 0].tolist()) == list(range(0, 20, 2))


def test_batch_dynamic_pad():
    (n,) = tf.train.slice_input_producer([np.array([1, 3, 2], np.int32)], 1, shuffle=False)
    v = tf.range(n)
    b = tf.train.batch([v], 3, dynamic_pad=True)
    assert b.shape.as_list() == [3, None]
    with _session() as sess:
        (got,) = _drain(sess, b)
    np.testing.assert_array_equal(got, [[0, 0, 0], [0, 1, 2], [0, 1, 0]])


def test_maybe_batch_filters_with_a_vector():
    data = np.arange(6, dtype=np.int32)
    keep = data % 2 == 0
    b = tf.train.maybe_batch([tf.constant(data)], tf.constant(keep), 3, enqueue_many=True)
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        assert sess.run(b).tolist() == [0, 2, 4]
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)


def test_shuffle_batch_is_a_seeded_shuffle():
    def run():
        g = tf.Graph()
        with g.as_default():
            (x,) = tf.train.slice_input_producer([np.arange(32, dtype=np.int32)], 1, shuffle=False)
            # min_after_dequeue=31: the first element leaves once all 32 are in, so the draws do
            # not depend on how the enqueue thread and the dequeue interleave (nor in TF).
            b = tf.train.shuffle_batch([x], 8, capacity=40, min_after_dequeue=31, seed=4)
            with _session() as sess:
                return np.concatenate(_drain(sess, b)).tolist()

    a = run()
    assert sorted(a) == list(range(32)) and a != list(range(32))
    assert a == run()
    with pytest.raises(ValueError, match="must be bigger than min_after_dequeue"):
        tf.train.shuffle_batch([tf.constant(1)], 2, capacity=5, min_after_dequeue=5)


def test_batch_join_and_shuffle_batch_join():
    (a,) = tf.train.slice_input_producer([np.zeros(4, np.int32)], 1, shuffle=False)
    (b,) = tf.train.slice_input_producer([np.ones(4, np.int32)], 1, shuffle=False)
    joined = tf.train.batch_join([[a], [b]], 8)
    with _session() as sess:
        (got,) = _drain(sess, joined)
    assert sorted(got.tolist()) == [0] * 4 + [1] * 4
    tf.reset_default_graph()
    (a,) = tf.train.slice_input_producer([np.zeros(4, np.int32)], 1, shuffle=False)
    (b,) = tf.train.slice_input_producer([np.ones(4, np.int32)], 1, shuffle=False)
    sj = tf.train.shuffle_batch_join([[a], [b]], 8, capacity=10, min_after_dequeue=2, seed=1)
    with _session() as sess:
        (got,) = _drain(sess, sj)
    assert sorted(got.tolist()) == [0] * 4 + [1] * 4


def test_maybe_join_forms_filter_and_every_batcher_names_its_queue_and_summary():
    """The eight batchers share one body: each keeps only `keep_input` rows, makes one enqueue
    op per thread (batch, shuffle_batch) or per input list (the _join forms), and summarizes
    how full its queue is, as TF names the summaries."""
    lists = [
        [tf.constant(np.arange(4, dtype=np.int32))],
        [tf.constant(np.arange(4, 8, dtype=np.int32))],
    ]
    keep = tf.constant([True, False, True, False])
    mj = tf.train.maybe_batch_join(lists, keep, 4, enqueue_many=True, name="mj")
    msj = tf.train.maybe_shuffle_batch_join(
        lists, 4, capacity=10, min_after_dequeue=3, keep_input=keep, enqueue_many=True, seed=2
    )
    ms = tf.train.maybe_shuffle_batch(
        lists[0], 2, 10, 1, keep, num_threads=3, enqueue_many=True, seed=3
    )
    runners = {r.queue.name.split("/")[0]: r for r in tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)}
    assert {name: len(r.enqueue_ops) for name, r in runners.items()} == {
        "mj": 2,
        "shuffle_batch_join": 2,
        "shuffle_batch": 3,
    }
    summaries = sorted(
        op.name for op in tf.get_default_graph().get_operations() if op.type == "ScalarSummary"
    )
    assert summaries == [
        "mj/fraction_of_32_full",
        "shuffle_batch/fraction_over_1_of_9_full",
        "shuffle_batch_join/fraction_over_3_of_7_full",
    ]
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        assert set(sess.run(mj).tolist()) <= {0, 2, 4, 6}
        assert set(sess.run(msj).tolist()) <= {0, 2, 4, 6}
        assert set(sess.run(ms).tolist()) <= {0, 2}
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)


def test_batch_rejects_inconsistent_types_in_join():
    with pytest.raises(TypeError, match="consistent"):
        tf.train.batch_join([[tf.constant(1)], [tf.constant(1.0)]], 2)


def test_batch_of_sparse_tensors_goes_through_a_tensors_map():
    records = []
    for tags in ([1], [], [2, 3, 4], [5, 6]):
        ex = tf.train.Example()
        ex.features.feature["tags"].int64_list.value.extend(tags)
        ex.features.feature["n"].int64_list.value.append(len(tags))
        records.append(ex.SerializeToString())
    (record,) = tf.train.slice_input_producer([np.array(records, dtype=object)], 1, shuffle=False)
    parsed = tf.parse_single_example(
        record, {"tags": tf.VarLenFeature(tf.int64), "n": tf.FixedLenFeature([], tf.int64)}
    )
    batched = tf.train.batch(parsed, 2, num_threads=1)
    assert isinstance(batched["tags"], tf.SparseTensor)
    with _session() as sess:
        got = _drain(sess, batched)
    first, second = got
    assert first["n"].tolist() == [1, 0] and second["n"].tolist() == [3, 2]
    np.testing.assert_array_equal(first["tags"].indices, [[0, 0]])
    np.testing.assert_array_equal(first["tags"].dense_shape, [2, 1])
    np.testing.assert_array_equal(second["tags"].indices, [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1]])
    np.testing.assert_array_equal(second["tags"].values, [2, 3, 4, 5, 6])
    np.testing.assert_array_equal(second["tags"].dense_shape, [2, 3])


def test_batch_enqueue_many_of_a_sparse_tensor():
    st = tf.SparseTensor([[0, 0], [2, 1], [2, 3]], tf.constant([1.0, 2.0, 3.0]), [3, 4])
    b = tf.train.batch([st], 3, enqueue_many=True)  # one component comes back bare, as in TF1
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        got = sess.run(b)
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)
    np.testing.assert_array_equal(got.indices, [[0, 0], [2, 1], [2, 3]])
    np.testing.assert_array_equal(got.values, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(got.dense_shape, [3, 4])

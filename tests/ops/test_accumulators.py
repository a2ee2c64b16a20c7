"""ConditionalAccumulator, SparseConditionalAccumulator, Barrier and StagingArea (§4.6):
values against NumPy, staleness, blocking takes released by other steps, timeouts, close."""

import numpy as np
import pytest

import flowgraph as tf
from tests.helpers import in_thread, until


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["MEAN", "SUM"])
def test_conditional_accumulator_mean_sum_and_staleness(dtype, reduction):
    acc = tf.ConditionalAccumulator(tf.as_dtype(dtype), shape=[3], reduction_type=reduction)
    g = tf.placeholder(tf.as_dtype(dtype), [3])
    step = tf.placeholder(tf.int64, [])
    apply = acc.apply_grad(g, local_step=step)
    take = acc.take_grad(2)
    grads = np.random.RandomState(0).rand(3, 3).astype(dtype)
    with tf.Session() as sess:
        sess.run(apply, {g: grads[0], step: 0})
        sess.run(apply, {g: grads[1], step: 0})
        assert sess.run(acc.num_accumulated()) == 2
        want = grads[:2].sum(0) / (2 if reduction == "MEAN" else 1)
        got = sess.run(take)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)
        sess.run(apply, {g: grads[2], step: 0})  # global step is now 1: stale, dropped
        assert sess.run(acc.num_accumulated()) == 0
        sess.run(acc.set_global_step(5))
        sess.run(apply, {g: grads[2], step: 4})
        assert sess.run(acc.num_accumulated()) == 0
        loose = tf.placeholder(tf.as_dtype(dtype))
        with pytest.raises(tf.errors.InvalidArgumentError, match="Shape mismatch"):
            sess.run(acc.apply_grad(loose, 9), {loose: [1.0, 2.0]})


def test_take_grad_waits_for_gradients_and_times_out():
    acc = tf.ConditionalAccumulator(tf.float32, shape=[])
    take = acc.take_grad(2)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(take, options=tf.RunOptions(timeout_in_ms=30))
        join = in_thread(lambda: sess.run(take))
        sess.run(acc.apply_grad(1.0))
        sess.run(acc.apply_grad(3.0))
        assert join() == 2.0
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be positive"):
            sess.run(acc.take_grad(0))


def test_sparse_accumulator_averages_per_row():
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=[5, 2])
    with tf.Session() as sess:
        sess.run(acc.apply_grad([0, 3], [[1.0, 1.0], [2.0, 4.0]], grad_shape=[5, 2]))
        sess.run(
            acc.apply_indexed_slices_grad(
                tf.IndexedSlices(
                    tf.constant([[4.0, 8.0]]),
                    tf.constant([3], tf.int64),
                    tf.constant([5, 2], tf.int64),
                )
            )
        )
        got = sess.run(acc.take_indexed_slices_grad(2))
        np.testing.assert_array_equal(got.indices, [0, 3])
        np.testing.assert_allclose(got.values, [[1.0, 1.0], [3.0, 6.0]])
        np.testing.assert_array_equal(got.dense_shape, [5, 2])


@pytest.mark.parametrize(
    "shape, grad_shape, want",
    [
        ((), [4, 3], [-1, 3]),  # rank 0 (SyncReplicasOptimizer's) constrains nothing
        ((None,), None, [-1, 3]),
        ((4, 3), [4, 3], [4, 3]),
        ((5, 3), None, [5, 3]),
        ((5, 3), [4, 3], "expected shape dim 0 to be 5, got 4"),
        ((2, 3), None, "index of slice 1 exceeded limits of shape; index is 2 exceeded 2"),
        ((None, 2), [4, 3], "expected shape dim 1 to be 2, got 3"),
        ((None, 2), None, "expected values dim 1 to be 2, got 3"),
        ((None, None, 3), [4, 3], "expected shape rank at least 3, got 2"),
        ((None, None, 3), None, "expected values rank at least 3, got 2"),
    ],
)
def test_sparse_accumulator_checks_shapes_as_tensorflow(shape, grad_shape, want):
    """Cases and messages of TF's SparseConditionalAccumulator::ValidateShape (checked against
    TF 2's kernel): the declared shape bounds the given shape, the indices and the values."""
    acc = tf.SparseConditionalAccumulator(tf.float32, shape=shape)
    apply = acc.apply_grad(tf.constant([0, 2], tf.int64), tf.ones([2, 3]), grad_shape=grad_shape)
    with tf.Session() as sess:
        if isinstance(want, str):
            with pytest.raises(tf.errors.InvalidArgumentError, match=f"Shape mismatch: {want}"):
                sess.run(apply)
            return
        sess.run(apply)
        got = sess.run(acc.take_indexed_slices_grad(1))
        np.testing.assert_array_equal(got.dense_shape, want)
        np.testing.assert_array_equal(got.indices, [0, 2])
        # Later gradients must match the first one's row shape (step 1 after the take).
        sess.run(acc.apply_grad([0], tf.ones([1, 3]), local_step=1))
        with pytest.raises(tf.errors.InvalidArgumentError, match="expected values dim 1 to be 3"):
            sess.run(acc.apply_grad([1], tf.ones([1, 2]), local_step=1))


def test_set_global_step_may_go_back_as_in_tensorflow():
    """A chief restored from an older checkpoint sets a smaller step: TF warns and sets it."""
    acc = tf.ConditionalAccumulator(tf.float32, shape=[])
    step = tf.placeholder(tf.int64, [])
    with tf.Session() as sess:
        sess.run(acc.set_global_step(5))
        sess.run(acc.apply_grad(1.0, local_step=step), {step: 4})  # stale: dropped
        assert sess.run(acc.num_accumulated()) == 0
        sess.run(acc.set_global_step(3))
        sess.run(acc.apply_grad(1.0, local_step=step), {step: 4})
        assert sess.run(acc.num_accumulated()) == 1


def test_barrier_joins_components_in_arrival_order():
    b = tf.Barrier([tf.int32, tf.string], shapes=[[], []])
    with tf.Session() as sess:
        sess.run(b.insert_many(0, ["x", "y", "z"], [1, 2, 3]))
        assert sess.run([b.ready_size(), b.incomplete_size()]) == [0, 3]
        sess.run(b.insert_many(1, ["z", "x"], ["cz", "cx"]))
        indices, keys, (ints, strs) = sess.run(b.take_many(2))
        assert keys.tolist() == [b"x", b"z"] and ints.tolist() == [1, 3]
        assert strs.tolist() == [b"cx", b"cz"] and indices.tolist() == [0, 2]
        with pytest.raises(tf.errors.InvalidArgumentError, match="duplicate"):
            sess.run(b.insert_many(0, ["y"], [5]))
        take = b.take_many(1)
        join = in_thread(lambda: sess.run(take))
        sess.run(b.insert_many(1, ["y"], ["cy"]))
        assert join()[1].tolist() == [b"y"]
        sess.run(b.insert_many(0, ["w"], [7]))
        sess.run(b.close(cancel_pending_enqueues=True))  # drops the incomplete "w"
        assert sess.run(b.incomplete_size()) == 0
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(b.take_many(1))
        with pytest.raises(tf.errors.CancelledError):
            sess.run(b.insert_many(0, ["new"], [1]))


def test_barrier_close_lets_incomplete_keys_finish():
    b = tf.Barrier([tf.int32, tf.int32], shapes=[[], []])
    with tf.Session() as sess:
        sess.run(b.insert_many(0, ["a", "b"], [1, 2]))
        sess.run(b.close())
        sess.run(b.insert_many(1, ["a", "b"], [10, 20]))
        _, keys, _ = sess.run(b.take_many(5, allow_small_batch=True))
        assert keys.tolist() == [b"a", b"b"]


def test_staging_area_put_get_peek_capacity_and_clear():
    area = tf.contrib.staging.StagingArea([tf.float32, tf.int32], shapes=[[2], []], capacity=2)
    x = tf.placeholder(tf.float32, [2])
    i = tf.placeholder(tf.int32, [])
    put = area.put([x, i])
    full_put = area.put([[7.0, 7.0], 7])
    with tf.Session() as sess:
        for k in range(2):
            sess.run(put, {x: [k, k], i: k})
        assert sess.run(area.size()) == 2
        join = in_thread(lambda: sess.run(full_put))  # full: waits for a get
        first = sess.run(area.get())
        join()  # raises the put's error, if any
        assert first[1] == 0
        assert sess.run(area.peek(1))[1] == 7
        assert [sess.run(area.get())[1] for _ in range(2)] == [1, 7]
        peek = area.peek(0)
        join = in_thread(lambda: sess.run(peek))  # waits for an element
        sess.run(put, {x: [9.0, 9.0], i: 9})
        assert join()[1] == 9
        assert sess.run(area.size()) == 1
        sess.run(put, {x: [1.0, 1.0], i: 1})
        sess.run(area.clear())
        assert sess.run(area.size()) == 0
    named = tf.contrib.staging.StagingArea([tf.int32], shapes=[[]], names=["a"])
    with tf.Session() as sess:
        sess.run(named.put({"a": 4}))
        assert sess.run(named.get()) == {"a": 4}


def test_session_close_releases_a_blocked_take_and_get():
    acc = tf.ConditionalAccumulator(tf.float32, shape=[])
    area = tf.contrib.staging.StagingArea([tf.float32], shapes=[[]])
    sess = tf.Session()
    fetches = [acc.take_grad(1), area.get()]
    joins = [in_thread(lambda f=f: sess.run(f)) for f in fetches]
    worker = next(iter(sess._local.workers.values()))
    until(lambda: len(worker._steps) == 2, "both steps in the runtime (blocked or about to)")
    sess.close()
    for join in joins:
        with pytest.raises(tf.errors.CancelledError):
            join()

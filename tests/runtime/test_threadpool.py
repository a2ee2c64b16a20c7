"""The device pool (runtime/threadpool.py): shards cover their range once, run on several
threads, never wait on a busy pool, and raise the first failure; sharded kernels match NumPy."""

import threading

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.framework.apply_op import apply_op
from flowgraph.kernels.cpu import linalg
from flowgraph.runtime.threadpool import MIN_SHARD_COST, DevicePool

BIG = float(MIN_SHARD_COST)  # cost per unit: every unit is worth a shard


@pytest.fixture
def pool():
    p = DevicePool(2, 2, name="test")
    yield p
    p.close()


def test_blocks_cover_the_range_once(pool):
    seen = []
    lock = threading.Lock()

    def fn(lo, hi):
        with lock:
            seen.append((lo, hi))

    pool.parallel_for(10, BIG, fn)
    covered = sorted(i for lo, hi in seen for i in range(lo, hi))
    assert covered == list(range(10)) and len(seen) == pool.num_shards(10, BIG) > 1


def test_shards_run_on_two_threads_at_once(pool):
    # whoever takes block 0 waits until another thread has run a later block
    later_ran = threading.Event()
    waited = []

    def fn(lo, hi):
        if lo == 0:
            waited.append(later_ran.wait(timeout=30))
        else:
            later_ran.set()

    pool.parallel_for(4, BIG, fn)
    assert waited == [True]


def test_small_work_runs_inline(pool):
    assert pool.num_shards(1000, 1.0) == 1
    threads = []
    pool.parallel_for(1000, 1.0, lambda lo, hi: threads.append((threading.get_ident(), lo, hi)))
    assert threads == [(threading.get_ident(), 0, 1000)]


def test_a_busy_pool_runs_the_kernel_whole_on_the_caller():
    """With every worker taken (by independent kernels), a kernel is not split: its shards
    would only add per-shard costs, and it never waits for the pool."""
    pool = DevicePool(1, 2, name="busy")
    release = threading.Event()
    pool.submit(release.wait, 30)  # the only worker is held
    try:
        assert pool.idle_workers() == 0
        calls = []
        pool.parallel_for(8, BIG, lambda lo, hi: calls.append((threading.get_ident(), lo, hi)))
        assert calls == [(threading.get_ident(), 0, 8)]
    finally:
        release.set()
        pool.close()


def test_shards_count_only_idle_workers():
    pool = DevicePool(3, 4, name="counted")
    release = threading.Event()
    pool.submit(release.wait, 30)
    try:
        assert pool.idle_workers() == 2
        # the caller and the 2 idle workers: 2 shards each
        assert pool.num_shards(100, BIG, 1 + pool.idle_workers()) == 6
        assert pool.num_shards(100, BIG) == 8
    finally:
        release.set()
        pool.close()


def test_first_failure_is_raised(pool):
    def fn(lo, hi):
        if lo == 0:
            raise ValueError("shard 0 failed")

    with pytest.raises(ValueError, match="shard 0 failed"):
        pool.parallel_for(4, BIG, fn)


def test_bad_thread_counts():
    with pytest.raises(ValueError, match="positive"):
        DevicePool(0, 1)


def _run(build, *feeds, threads=2):
    config = tf.ConfigProto(intra_op_parallelism_threads=threads)
    with tf.Graph().as_default():
        placeholders = [tf.placeholder(tf.as_dtype(f.dtype), f.shape) for f in feeds]
        out = build(*placeholders)
        with tf.Session(config=config) as sess:
            return sess.run(out, dict(zip(placeholders, feeds, strict=True)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.complex64])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("m,k,n", [(300, 200, 150), (40, 300, 500)])  # blocks of rows, columns
def test_sharded_matmul_matches_numpy(dtype, ta, tb, m, k, n, monkeypatch):
    monkeypatch.setattr(linalg, "MIN_BLAS_SHARD_MACS", 2)  # shard these small products too
    rng = np.random.RandomState(0)
    a = (rng.rand(m, k) * 4).astype(dtype)
    b = (rng.rand(k, n) * 4).astype(dtype)
    a_in, b_in = (a.T.copy() if ta else a), (b.T.copy() if tb else b)
    got = _run(lambda x, y: tf.matmul(x, y, transpose_a=ta, transpose_b=tb), a_in, b_in)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5)
    assert got.dtype == dtype


def test_small_blas_products_run_whole(monkeypatch):
    """A float product under MIN_BLAS_SHARD_MACS (W6b's 256^3) is one BLAS call on the calling
    thread; an integer one of the same size (no BLAS) is still sharded."""
    calls = []
    monkeypatch.setattr(linalg, "parallel_for", lambda *args: calls.append(args) or args[3](0, 1))
    rng = np.random.RandomState(3)
    a, b = rng.rand(256, 256).astype(np.float32), rng.rand(256, 256).astype(np.float32)
    np.testing.assert_allclose(_run(tf.matmul, a, b), a @ b, rtol=1e-5)
    assert not calls
    ai, bi = (a * 4).astype(np.int32), (b * 4).astype(np.int32)
    _run(tf.matmul, ai, bi)
    assert len(calls) == 1


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_sharded_batch_matmul_broadcasts(threads):
    rng = np.random.RandomState(1)
    x = rng.rand(6, 1, 40, 50).astype(np.float32)
    y = rng.rand(3, 50, 60).astype(np.float32)
    got = _run(tf.matmul, x, y, threads=threads)
    np.testing.assert_allclose(got, np.matmul(x, y), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_sharded_convolutions_match_one_thread(dtype, padding):
    """Conv2D and both backprops split the batch over the pool (big enough to shard); one
    intra-op thread computes them unsharded (checked against NumPy in tests/ops)."""
    rng = np.random.RandomState(2)
    x = (rng.rand(16, 64, 64, 8) * 0.1).astype(dtype)  # float16 filter grads stay finite
    f = (rng.rand(3, 3, 8, 32) * 0.1).astype(dtype)  # above windows.INLINE_COST as Winograd

    def build(xt, ft):
        y = tf.nn.conv2d(xt, ft, [1, 1, 1, 1], padding)
        return [y, *tf.gradients(tf.reduce_sum(y * y), [xt, ft])]

    sharded = _run(build, x, f, threads=2)
    single = _run(build, x, f, threads=1)
    tol = 1e-2 if dtype == np.float16 else 1e-5
    for got, want in zip(sharded, single, strict=True):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_sharded_cnn_layer_kernels_match_one_thread(threads, data_format):
    """BiasAdd, Relu, MaxPool (3x3/2 SAME: padded, overlapping windows) and their gradients
    (BiasAddGrad, ReluGrad, MaxPoolGrad) split their work over the pool when large enough:
    the same values as one thread, which runs them whole; the forward also against NumPy."""
    rng = np.random.RandomState(3)
    shape = (16, 80, 78, 16) if data_format == "NHWC" else (16, 16, 80, 78)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, 16).astype(np.float32)
    dy_scale = rng.uniform(0.5, 1.5, (16, 40, 39, 16)).astype(np.float32)
    if data_format == "NCHW":
        dy_scale = np.ascontiguousarray(dy_scale.transpose(0, 3, 1, 2))
    ksize = [1, 3, 3, 1] if data_format == "NHWC" else [1, 1, 3, 3]
    strides = [1, 2, 2, 1] if data_format == "NHWC" else [1, 1, 2, 2]

    def build(xt, bt, st):
        h = tf.nn.relu(tf.nn.bias_add(xt, bt, data_format=data_format))
        y = tf.nn.max_pool(h, ksize, strides, "SAME", data_format=data_format)
        return [h, y, *tf.gradients(tf.reduce_sum(y * st), [xt, bt])]

    sharded = _run(build, x, b, dy_scale, threads=threads)
    single = _run(build, x, b, dy_scale, threads=1)
    for got, want in zip(sharded, single, strict=True):
        np.testing.assert_array_equal(got, want)
    channel = b.reshape(-1, 1, 1) if data_format == "NCHW" else b
    np.testing.assert_array_equal(sharded[0], np.maximum(x + channel, 0))


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.float64])
def test_sharded_relu_grad_keeps_dtype(dtype):
    rng = np.random.RandomState(4)
    x = (rng.uniform(-3, 3, (300, 400))).astype(dtype)
    dy = (rng.uniform(-3, 3, (300, 400))).astype(dtype)
    got = _run(lambda a, c: apply_op("ReluGrad", [a, c]).outputs[0], dy, x)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, dy * (x > 0).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.complex64])
@pytest.mark.parametrize("channels", [3, 64, 2000])
def test_sharded_bias_add_matches_numpy(dtype, channels):
    """BiasAdd over rows of channels in blocks: the compiled loop (float32/64) and the tiled
    NumPy path (others), rows not a multiple of the tiling."""
    rng = np.random.RandomState(5)
    value = (rng.uniform(-4, 4, (7, 31, 200_000 // (31 * 7 * channels) + 1, channels))).astype(
        dtype
    )
    bias = rng.uniform(-4, 4, channels).astype(dtype)
    got = _run(tf.nn.bias_add, value, bias)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, value + bias)


def test_a_worker_keeps_no_finished_task_alive():
    """A worker drops a task once it has run, not when the next one arrives: a kernel's shard
    closure holds its arrays (a product's output), which would otherwise outlive the step."""
    freed = threading.Event()

    class Held:
        def __del__(self):
            freed.set()

    def submit_holding(pool: DevicePool, ran: threading.Event) -> None:
        held = Held()
        pool.submit(lambda: ran.set() if held else None)

    pool = DevicePool(1, 1)
    ran = threading.Event()
    try:
        submit_holding(pool, ran)
        assert ran.wait(timeout=60)
        assert freed.wait(timeout=60), "the idle worker still holds the finished task"
    finally:
        pool.close()

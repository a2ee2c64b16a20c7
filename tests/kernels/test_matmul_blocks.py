"""linalg.blas_blocks and linalg.product_tiles: MatMul and the fused weight updates split large
products into blocks that depend only on the work, so that a product gives the same bits
whatever the pool's size (OpenBLAS's Haswell sgemm rounds the last rows of each call
differently; runtime/blas.py), and the blocks together (a long product's tail tiles included)
equal NumPy's product on every dtype MatMul claims."""

from __future__ import annotations

import threading
import types

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.kernels.cpu import linalg
from flowgraph.runtime.threadpool import DevicePool

# MatMul's types; bfloat16 has its own kernel (kernels/cpu/bfloat16.py)
DTYPES = [np.float16, np.float32, np.float64, np.int32, np.int64, np.complex64, np.complex128]


@pytest.fixture(params=[False, True], ids=["blocks", "tail"])
def small_blocks(request, monkeypatch):
    """Blocks from a few multiply-adds, so that small test products are split; with "tail",
    every product counts as long, so that it also ends in tail tiles."""
    monkeypatch.setattr(linalg, "MIN_BLAS_SHARD_MACS", 2)
    if request.param:
        monkeypatch.setattr(linalg, "_LONG_SHARE_MACS", 1)


def _operand(rng, shape, dtype):
    x = rng.rand(*shape) * 4 - 2
    if np.dtype(dtype).kind == "c":
        x = x + 1j * (rng.rand(*shape) * 4 - 2)
    return x.astype(dtype)


def _matmul(a, b, ta, tb, threads):
    config = tf.ConfigProto(intra_op_parallelism_threads=threads)
    with tf.Graph().as_default():
        x, y = tf.placeholder(tf.as_dtype(a.dtype), a.shape), tf.placeholder(b.dtype, b.shape)
        out = tf.matmul(x, y, transpose_a=ta, transpose_b=tb)
        with tf.Session(config=config) as sess:
            return sess.run(out, {x: a, y: b})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("m,k,n", [(301, 70, 150), (40, 90, 501)])  # blocks of rows, columns
def test_blocks_equal_numpys_product(small_blocks, dtype, ta, tb, m, k, n):
    rng = np.random.RandomState(0)
    a, b = _operand(rng, (m, k), dtype), _operand(rng, (k, n), dtype)
    a_in, b_in = (a.T.copy() if ta else a), (b.T.copy() if tb else b)
    got = _matmul(a_in, b_in, ta, tb, threads=2)
    assert got.dtype == dtype and got.shape == (m, n)
    tol = {np.float16: 2e-2, np.float32: 1e-5, np.complex64: 1e-5}.get(dtype, 1e-12)
    np.testing.assert_allclose(got, a @ b, rtol=tol, atol=tol * k)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("m,n", [(1000, 300), (64, 1000)])
def test_a_product_has_the_same_bits_on_any_pool(small_blocks, dtype, m, n):
    rng = np.random.RandomState(1)
    a, b = _operand(rng, (m, 200), dtype), _operand(rng, (200, n), dtype)
    first = _matmul(a, b, False, False, threads=1)
    for threads in (2, 3, 2):
        np.testing.assert_array_equal(_matmul(a, b, False, False, threads), first)


def test_fused_weight_updates_have_the_same_bits_on_any_pool(small_blocks):
    rng = np.random.RandomState(2)
    x = _operand(rng, (256, 300), np.float32)
    dy = _operand(rng, (256, 200), np.float32)

    def step(threads):
        config = tf.ConfigProto(intra_op_parallelism_threads=threads)
        with tf.Graph().as_default():
            w = tf.Variable(np.ones((300, 200), np.float32))
            xt, dyt = tf.constant(x), tf.constant(dy)
            loss = tf.reduce_sum(tf.matmul(xt, w) * dyt)  # d loss / dw = x^T @ dy
            train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
            with tf.Session(config=config) as sess:
                sess.run(tf.global_variables_initializer())
                sess.run(train)
                return sess.run(w)

    first = step(1)
    np.testing.assert_allclose(first, 1 - 0.5 * (x.T @ dy), rtol=1e-4, atol=1e-3)
    for threads in (2, 3):
        np.testing.assert_array_equal(step(threads), first)


def _blocks(n, macs_per_unit):
    calls = []
    no_device = types.SimpleNamespace(device=None)  # as in constant folding: blocks inline
    linalg.blas_blocks(no_device, n, macs_per_unit, lambda lo, hi: calls.append((lo, hi)))
    return calls


def test_block_counts_follow_the_work_and_the_cores(monkeypatch):
    monkeypatch.setattr(linalg, "_CORES", 2)
    assert _blocks(256, 256 * 256) == [(0, 256)]  # W6b's 256^3: whole
    assert _blocks(1024, 256 * 784) == [(0, 256), (256, 512), (512, 768), (768, 1024)]  # W4
    assert _blocks(2048, 2048 * 2048) == [(0, 1024), (1024, 2048)]  # W7: one per core
    assert _blocks(3, 10**9) == [(0, 1), (1, 3)]  # long shares: one per core
    monkeypatch.setattr(linalg, "_CORES", 8)
    assert len(_blocks(1024, 256 * 784)) == 8


def _covers_once(tiles, m, n):
    seen = np.zeros((m, n), int)
    for r0, r1, c0, c1 in tiles:
        seen[r0:r1, c0:c1] += 1
    return bool((seen == 1).all())


def test_long_products_end_in_tail_tiles(monkeypatch):
    monkeypatch.setattr(linalg, "_CORES", 2)
    w7 = linalg.product_tiles(2048, 2048, 2048**3)
    assert w7[:2] == [(0, 960, 0, 2048), (960, 1920, 0, 2048)]  # one row block per core
    assert w7[2:] == [(1920, 2048, c, c + 512) for c in range(0, 2048, 512)]  # 4 tail tiles
    wide = linalg.product_tiles(300, 4000, 300 * 4000 * 2000)  # blocks of columns
    assert wide[:2] == [(0, 300, 0, 1875), (0, 300, 1875, 3750)]
    assert wide[2:] == [(r0, r1, 3750, 4000) for r0, r1 in linalg._cuts(0, 300, 4)]
    w4 = linalg.product_tiles(256, 1024, 256 * 784 * 1024)  # not long: 4 blocks, no tail
    assert w4 == [(0, 256, c, c + 256) for c in range(0, 1024, 256)]
    for m, n, macs in [
        (2048, 2048, 2048**3),
        (300, 4000, 2.4e9),
        (4000, 7, 1e10),
        (256, 1024, 2e8),
    ]:
        assert _covers_once(linalg.product_tiles(m, n, macs), m, n)
    monkeypatch.setattr(linalg, "_CORES", 1)
    assert linalg.product_tiles(2048, 2048, 2048**3) == [(0, 2048, 0, 2048)]


def test_a_free_thread_takes_the_tiles_a_slow_one_leaves():
    """Tiles are claimed one at a time: while the caller is held in its first block, the pool's
    helper runs every other tile (a thread slowed by the OS slows the product in proportion)."""
    pool = DevicePool(2, 2)
    ctx = types.SimpleNamespace(device=types.SimpleNamespace(pool=pool))
    tiles = [(i,) for i in range(10)]
    ran, others_done = {}, threading.Event()

    def fn(i):
        ran[i] = threading.current_thread()
        if i == 0:
            assert others_done.wait(timeout=60), "the helper did not take the other tiles"
        elif len(ran) == len(tiles):
            others_done.set()

    try:
        linalg._run_tiles(ctx, tiles, 1e12, fn)
    finally:
        pool.close()
    assert sorted(ran) == list(range(10))
    assert len({ran[i] for i in range(1, 10)}) == 1 and ran[1] is not ran[0]

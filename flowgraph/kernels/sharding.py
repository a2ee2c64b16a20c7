"""Intra-op parallelism for kernels (whitepaper §5.4; TensorFlow's `Shard` over the device's
Eigen pool): a kernel cuts its work into contiguous blocks that the device's pool runs in
parallel (runtime/threadpool.py). NumPy and BLAS release the GIL in the calls a block makes, so
blocks overlap on the cores. Small work stays on the calling thread.
"""

from __future__ import annotations

from collections.abc import Callable

# Work below this many "cost units" (about one multiply-add each) runs inline, and a shard has
# at least this much: a shard handed to another thread costs ~10-20 us of queueing and
# wake-up (measured on 2 cores), about 1M multiply-adds of single-threaded SGEMM; a shard of
# 2M is ~40 us of BLAS work.
MIN_SHARD_COST = 2_000_000
# The cost units (single-threaded SGEMM multiply-adds, 0.02 ns each on the developers' cores) of
# one element of a memory-bound pass: 0.1 ns in the compiled ReLU and BiasAdd loops, 0.3-0.5 ns
# in np.add or np.maximum over float32; so an element-wise kernel shards from about 400,000
# elements (2 * MIN_SHARD_COST).
ELEMENT_COST = 10


def parallel_for(ctx, n: int, cost_per_unit: float, fn: Callable[[int, int], None]) -> None:
    """Calls fn(lo, hi) over blocks covering range(n) on the pool of the kernel's device, or
    fn(0, n) where there is no device (constant folding) or too little work.

    `cost_per_unit` is about the multiply-adds of one unit of n (a row of a matmul, one image of
    a batch): the pool compares n * cost_per_unit with its inline threshold.
    """
    device = ctx.device
    if device is None or n <= 1:
        fn(0, n)
        return
    device.pool.parallel_for(n, cost_per_unit, fn)

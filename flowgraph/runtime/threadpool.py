"""One thread pool per device for all its parallel work (whitepaper §3.1, §5.4; TensorFlow's
Eigen ThreadPoolDevice).

The pool serves both kinds of parallelism, so they never oversubscribe the cores:
- inter-op: the executor hands independent expensive kernels to `submit`;
- intra-op: a kernel with enough work splits it into shards with `parallel_for`.

BLAS runs single-threaded (runtime/blas.py): a library's private threads spin and wait on each
other, and collapse 10-100x when another process holds a core. Here the shards of one kernel
are claimed dynamically from a shared counter by the calling thread and by helper tasks queued
on the pool; the caller never waits for a shard nobody has started (it runs unclaimed shards
itself), so a busy core or a pool busy with other kernels slows a kernel in proportion and can
never deadlock it. A helper that starts after all shards are claimed returns at once.

The queue is one FIFO shared by the workers (measured on 2 cores: work stealing would add
per-task cost in Python for no gain at this scale).

A kernel shards only over the workers that are idle when it starts: when the pool is already
running independent kernels (inter-op parallelism, e.g. 8 matmul chains), splitting a kernel
adds per-shard costs (BLAS re-packs the shared operand for each block, queueing, wake-ups) for
no gain, since every core is taken. W3 (8 chains of 256x256 matmuls) took 10 ms more CPU per
step sharded than the same matmuls whole.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable

from flowgraph.kernels.sharding import MIN_SHARD_COST

# Shards per participating thread: more than one, so a thread slowed by a busy core takes
# fewer of them (dynamic balancing), few enough that each stays an efficient library call.
SHARDS_PER_THREAD = 2


class DevicePool:
    """`num_threads` worker threads, started on first use, taking tasks from one FIFO queue.

    `intra_op_threads` bounds the threads working on one kernel (the caller included).
    """

    def __init__(self, num_threads: int, intra_op_threads: int, name: str = "pool"):
        if num_threads < 1 or intra_op_threads < 1:
            raise ValueError(
                f"thread counts must be positive, got {num_threads} and {intra_op_threads}"
            )
        self.num_threads = num_threads
        self.intra_op_threads = intra_op_threads
        self.name = name
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []  # guarded by _lock
        self._lock = threading.Lock()
        self._closed = False
        self._running = 0  # tasks submitted and not finished; guarded by _count_lock
        self._count_lock = threading.Lock()

    def _start(self) -> None:
        with self._lock:
            if self._threads or self._closed:
                return
            for i in range(self.num_threads):
                t = threading.Thread(target=self._work, name=f"{self.name}_{i}", daemon=True)
                t.start()
                self._threads.append(t)

    def _work(self) -> None:
        get = self._tasks.get
        while True:
            task = get()
            if task is None:
                return
            fn, args = task
            del task
            try:
                fn(*args)
            finally:
                # not kept while waiting for the next task: a kernel's shard closure holds its
                # arrays (a product's 16 MiB output), which would outlive the step
                del fn, args
                with self._count_lock:
                    self._running -= 1

    def submit(self, fn: Callable, *args) -> None:
        """Runs fn(*args) on a worker (inter-op). fn must not raise: it reports its own outcome."""
        if not self._threads:
            self._start()
        with self._count_lock:
            self._running += 1
        self._tasks.put((fn, args))

    def idle_workers(self) -> int:
        """Workers with no task submitted for them (a hint: it may change at once)."""
        return max(0, self.num_threads - self._running)

    def parallel_for(self, n: int, cost_per_unit: float, fn: Callable[[int, int], None]) -> None:
        """Calls fn(lo, hi) over contiguous blocks covering range(n), in parallel when the work
        (n * cost_per_unit) is large enough; returns when all are done, raising the first error.
        """
        shards = self.num_shards(n, cost_per_unit, 1 + self.idle_workers())
        if shards <= 1:
            fn(0, n)
            return
        bounds = [n * i // shards for i in range(shards + 1)]
        claim = itertools.count().__next__  # atomic under the GIL
        done = threading.Event()
        left = [shards]  # guarded by lock
        failures: list[BaseException] = []
        lock = threading.Lock()

        def run_shards() -> None:
            while True:
                i = claim()
                if i >= shards:
                    return
                try:
                    fn(bounds[i], bounds[i + 1])
                except BaseException as e:  # noqa: BLE001 - the caller raises it
                    failures.append(e)
                with lock:
                    left[0] -= 1
                    if not left[0]:
                        done.set()

        helpers = min(self.intra_op_threads - 1, self.idle_workers(), shards - 1)
        for _ in range(helpers):
            self.submit(run_shards)
        run_shards()
        done.wait()
        if failures:
            raise failures[0]

    def num_shards(self, n: int, cost_per_unit: float, available: int | None = None) -> int:
        """How many blocks `parallel_for` cuts range(n) into when `available` threads (the
        caller included; default: every worker) can take them: 1 below MIN_SHARD_COST."""
        threads = min(self.intra_op_threads, self.num_threads + 1)
        if available is not None:
            threads = min(threads, available)
        if threads <= 1 or n <= 1 or n * cost_per_unit < 2 * MIN_SHARD_COST:
            return 1
        by_cost = int(n * cost_per_unit // MIN_SHARD_COST)
        return max(1, min(n, threads * SHARDS_PER_THREAD, by_cost))

    def close(self) -> None:
        """Stops the workers after the tasks already queued (does not wait for them)."""
        with self._lock:
            self._closed = True
            for _ in self._threads:
                self._tasks.put(None)

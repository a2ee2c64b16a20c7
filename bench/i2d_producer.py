"""I2d's input pipeline alone (issue 11): the tf.data producer's CPU per 64-record batch and
IteratorGetNext's cost on the consumer's thread, with the CNN step absent.

Phase 1 drains batches back to back and reads the CPU clocks of the dataset pool's threads
(pthread CPU clocks, exact) over N batches: the producer's CPU per batch. Phase 2 lets the
prefetch buffer fill before each run, so that IteratorGetNext takes a ready element, and
times the iterator resource's get_next on the consumer's thread (thread_time), beside the
whole run's CPU. Usage: PYTHONPATH=$PWD python bench/i2d_producer.py [N]
"""

from __future__ import annotations

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import workloads  # noqa: F401 (first: it imports input_workloads, which imports it back)

# isort: split
import input_workloads as iw

import flowgraph as tf
from flowgraph.kernels.cpu import dataset_iterators
from flowgraph.kernels.cpu.dataset_transforms import _MapIterator


def pool_cpu() -> dict:
    """CPU seconds of each of the dataset pool's threads so far."""
    return {
        t.ident: time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        for t in threading.enumerate()
        if t.name.startswith("tf_data")
    }


def spent_since(before: dict) -> float:
    """CPU seconds the pool's threads spent since `before` (pool_cpu())."""
    return sum(c - before.get(i, 0.0) for i, c in pool_cpu().items())


def build(tmp):
    xs, ys = iw._digits()
    paths = []
    for shard in range(2):
        paths.append(os.path.join(tmp, f"digits-{shard}.tfrecord"))
        iw._write(tf, paths[-1], xs[shard::2], ys[shard::2])
    features = {"x": tf.FixedLenFeature([64], tf.float32), "y": tf.FixedLenFeature([], tf.int64)}
    g = tf.Graph()
    with g.as_default():
        ds = tf.data.TFRecordDataset(paths).shuffle(4 * iw.I2_BATCH, seed=1).repeat()
        ds = ds.batch(iw.I2_BATCH).map(lambda r: tf.parse_example(r, features)).prefetch(2)
        it = tf.data.make_one_shot_iterator(ds)
        nxt = it.get_next()
    return g, nxt


def _us(times: list) -> str:
    a = np.array(times) * 1e6
    return f"median {np.median(a):.1f} us, mean {a.mean():.1f} us"


def main():
    import tempfile

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    tmp = tempfile.mkdtemp(prefix="fg_i2d_prod_")
    g, nxt = build(tmp)
    fetch = [nxt["x"], nxt["y"]]
    takes = []  # IteratorResource.get_next on the consumer's thread, with the done it calls
    chain = []  # the producer's passes through map <- batch <- repeat <- shuffle <- source,
    # per batch (a pass makes the batches a refill has room for: Iterator.get_ahead)
    take, map_ahead = dataset_iterators.IteratorResource.get_next, _MapIterator.get_ahead

    def timed_take(self, step, done):
        t0 = time.thread_time()
        take(self, step, done)
        takes.append(time.thread_time() - t0)

    async def timed_map(self, k):
        t0 = time.thread_time()
        out = await map_ahead(self, k)  # never suspends: the chain below the prefetch is sync
        chain.extend([(time.thread_time() - t0) / max(1, len(out))] * len(out))
        return out

    dataset_iterators.IteratorResource.get_next = timed_take
    _MapIterator.get_ahead = timed_map
    with tf.Session(graph=g) as sess:
        for _ in range(200):
            sess.run(fetch)
        chain.clear()
        c0, w0 = pool_cpu(), time.perf_counter()
        for _ in range(n):
            sess.run(fetch)
        print(
            f"drained: the chain {_us(chain)} per batch; pool threads' CPU "
            f"{spent_since(c0) / n * 1e6:.1f} us per batch (with the step completions they run "
            f"for a waiting consumer); "
            f"wall {(time.perf_counter() - w0) / n * 1e6:.1f} us per batch"
        )
        chain.clear()
        takes.clear()
        runs = []
        c0 = pool_cpu()
        for _ in range(n):
            time.sleep(0.0015)  # a training step: get_next then takes a ready element
            t0 = time.thread_time()
            sess.run(fetch)
            runs.append(time.thread_time() - t0)
        print(
            f"paced (1.5 ms between runs): the chain {_us(chain)} per batch; pool threads' CPU "
            f"{spent_since(c0) / n * 1e6:.1f} us per batch"
        )
        print(
            f"IteratorGetNext's take (and the done it runs): {_us(takes)}; the whole run's "
            f"CPU {_us(runs)}; load {os.getloadavg()[0]:.2f}"
        )


if __name__ == "__main__":
    main()

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


def main():
    import tempfile

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    tmp = tempfile.mkdtemp(prefix="fg_i2d_prod_")
    g, nxt = build(tmp)
    fetch = [nxt["x"], nxt["y"]]
    spent = [0.0, 0]
    orig = dataset_iterators.IteratorResource.get_next

    def timed(self, step, done):
        t0 = time.thread_time()
        orig(self, step, done)
        spent[0] += time.thread_time() - t0
        spent[1] += 1

    dataset_iterators.IteratorResource.get_next = timed
    with tf.Session(graph=g) as sess:
        for _ in range(200):
            sess.run(fetch)
        per = []
        for _ in range(5):
            c0, w0 = pool_cpu(), time.perf_counter()
            for _ in range(n // 5):
                sess.run(fetch)
            per.append((spent_since(c0) / (n // 5), (time.perf_counter() - w0) / (n // 5)))
        per = np.array(per) * 1e6
        print(
            f"producer CPU per batch: median {np.median(per[:, 0]):.1f} us "
            f"(min {per[:, 0].min():.1f}, max {per[:, 0].max():.1f}); "
            f"drain wall per batch {np.median(per[:, 1]):.1f} us"
        )
        m = min(n, 1000)
        spent[:] = [0.0, 0]
        run_cpu = 0.0
        p0 = pool_cpu()
        for _ in range(m):
            time.sleep(0.0015)  # the prefetch buffer refills: get_next takes a ready element
            c0 = time.thread_time()
            sess.run(fetch)
            run_cpu += time.thread_time() - c0
        print(
            f"paced (a 1.5 ms step between runs): producer CPU per batch "
            f"{spent_since(p0) / m * 1e6:.1f} us"
        )
        print(
            f"IteratorGetNext (resource.get_next, ready element): {spent[0] / spent[1] * 1e6:.1f}"
            f" us; whole run CPU {run_cpu / m * 1e6:.1f} us; load {os.getloadavg()[0]:.2f}"
        )


if __name__ == "__main__":
    main()

"""Step time with first-fit placement and with the cost model's simulated placement
(whitepaper §3.2.1) on two CPU devices, for K independent MatMul chains written without any
tf.device (variables, so nothing folds): first-fit puts everything on CPU:0, the simulation spreads the chains. Each device
has its own executor and thread pool, so the chains then also run in parallel across devices
(with one inter-op thread per device, the default here, only across devices).

Usage: python bench/cost_placement.py [--chains 4] [--n 384] [--length 4] [--steps 10]
       [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

import flowgraph as tf


def build(chains: int, n: int, length: int):
    rng = np.random.RandomState(0)
    outs = []
    for k in range(chains):
        a = tf.Variable(rng.rand(n, n).astype(np.float32) / n).read_value()
        h = a
        for _ in range(length):
            h = tf.matmul(h, a)
        outs.append(tf.reduce_sum(h))
    return tf.add_n(outs)


def measure(cost_model: bool, args) -> tuple:
    tf.reset_default_graph()
    out = build(args.chains, args.n, args.length)
    config = tf.ConfigProto(device_count={"CPU": 2}, inter_op_parallelism_threads=args.threads)
    config.experimental.cost_model_placement = cost_model
    times = []
    with tf.Session(config=config) as s:
        s.run(tf.global_variables_initializer())
        md = tf.RunMetadata()
        value = s.run(out, options=tf.RunOptions(output_partition_graphs=True), run_metadata=md)
        devices = {n.device.split("device:")[-1] for g in md.partition_graphs for n in g.node}
        for _ in range(args.steps):
            t0 = time.perf_counter()
            s.run(out)
            times.append(time.perf_counter() - t0)
    return statistics.median(times), sorted(devices), value


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--n", type=int, default=384)
    parser.add_argument("--length", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="inter-op threads per device")
    args = parser.parse_args()
    first_fit = measure(False, args)
    simulated = measure(True, args)
    print(f"{args.chains} chains of {args.length} MatMuls {args.n}x{args.n}, 2 CPU devices")
    print(f"{'placement':<12} {'devices used':<14} {'step ms':>8}")
    for name, (seconds, devices, _) in (("first-fit", first_fit), ("cost model", simulated)):
        print(f"{name:<12} {','.join(devices):<14} {seconds * 1e3:>8.1f}")
    print(f"ratio cost model / first-fit: {simulated[0] / first_fit[0]:.2f}")
    assert np.isclose(first_fit[2], simulated[2], rtol=1e-4), "results differ"


if __name__ == "__main__":
    main()

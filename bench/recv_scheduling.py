"""Peak memory per device with and without Recv scheduling (whitepaper §5.2), on a
model-parallel graph: CPU:0 makes K large tensors early, CPU:1 consumes one per stage of a long
chain. Without scheduling every _Recv on CPU:1 takes its tensor as soon as CPU:0 sent it, so all
K sit in CPU:1's memory; with `graph_options.enable_recv_scheduling` each waits (by a control edge)
until just before its stage.

A received tensor counts on the receiving device from when its _Recv finished until its last
reader there finished (StepStats of a traced step; TensorFlow's allocation records leave received
tensors out, as CPU-to-CPU transfers alias the sender's buffer, but on a GPU they are allocated
there). Usage: python bench/recv_scheduling.py [--stages 8] [--mb 4] [--steps 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import flowgraph as tf

RECV_SUFFIX = "/_recv_"


def build(stages: int, elements: int):
    with tf.device("/cpu:0"):
        sent = [tf.random_uniform([elements], seed=i) * float(i + 1) for i in range(stages)]
    with tf.device("/cpu:1"):
        h = tf.zeros([elements])
        for i, x in enumerate(sent):
            h = h + x
            for j in range(4):  # the stage's own work, which takes a while
                h = tf.tanh(h * 0.5, name=f"stage{i}_{j}")
        return tf.reduce_sum(h)


def peak_per_device(md) -> dict:
    """Peak live bytes per device: allocation records plus received tensors (see above)."""
    peaks = {}
    for dev in md.step_stats.dev_stats:
        events = []
        end_of = {}
        readers: dict[str, list] = {}
        for ns in dev.node_stats:
            end = ns.all_start_micros + ns.all_end_rel_micros
            end_of[ns.node_name] = end
            label = ns.timeline_label
            args = label[label.find("(") + 1 : label.rfind(")")]
            for arg in args.split(", "):
                if RECV_SUFFIX in arg:
                    readers.setdefault(arg.split(":")[0], []).append(ns.node_name)
            for m in ns.memory:
                events += [(r.alloc_micros, r.alloc_bytes) for r in m.allocation_records]
        for ns in dev.node_stats:
            if RECV_SUFFIX in ns.node_name and ns.output and ns.node_name in readers:
                nbytes = ns.output[0].tensor_description.allocation_description.requested_bytes
                last = max(end_of[r] for r in readers[ns.node_name])
                events += [(end_of[ns.node_name], nbytes), (last, -nbytes)]
        live = peak = 0
        for _, nbytes in sorted(events, key=lambda e: (e[0], -e[1])):
            live += nbytes
            peak = max(peak, live)
        peaks[dev.device.split("device:")[-1]] = peak
    return peaks


def measure(stages: int, elements: int, steps: int) -> dict:
    """{scheduled: (peak bytes per device, median step seconds, value)}; the two sessions take
    turns step by step, so that both see the same machine load."""
    tf.reset_default_graph()
    out = build(stages, elements)
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    sessions, peaks, times, values = {}, {}, {}, {}
    for scheduled in (False, True):
        config = tf.ConfigProto(device_count={"CPU": 2})
        config.graph_options.enable_recv_scheduling = scheduled
        sessions[scheduled] = tf.Session(config=config)
        sessions[scheduled].run(out)  # warm-up: plans built
        peaks[scheduled], times[scheduled] = [], []
    for _ in range(steps):
        for scheduled, s in sessions.items():
            md = tf.RunMetadata()
            values[scheduled] = s.run(out, options=opts, run_metadata=md)
            peaks[scheduled].append(peak_per_device(md))
            t0 = time.perf_counter()
            s.run(out)
            times[scheduled].append(time.perf_counter() - t0)
    for s in sessions.values():
        s.close()
    return {
        k: ({d: max(p[d] for p in peaks[k]) for d in peaks[k][0]}, statistics.median(times[k]), v)
        for k, v in values.items()
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stages", type=int, default=8)
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    elements = int(args.mb * 2**20 / 4)
    got = measure(args.stages, elements, args.steps)
    rows = [("off", *got[False]), ("on", *got[True])]
    print(f"{args.stages} tensors of {args.mb:g} MB from CPU:0 to CPU:1 (max over {args.steps})")
    print(f"{'recv scheduling':<16} {'peak CPU:0 MB':>14} {'peak CPU:1 MB':>14} {'step ms':>9}")
    for name, peaks, seconds, _ in rows:
        cpu0, cpu1 = peaks.get("CPU:0", 0) / 2**20, peaks.get("CPU:1", 0) / 2**20
        print(f"{name:<16} {cpu0:>14.1f} {cpu1:>14.1f} {seconds * 1e3:>9.1f}")
    assert abs(rows[0][3] - rows[1][3]) <= 1e-3 * abs(rows[0][3]), "results differ"


if __name__ == "__main__":
    main()

"""Per-kernel table of one workload's step (issue 9): each node's kernel time on one thread,
flowgraph beside TensorFlow.

flowgraph: every registered kernel is wrapped to add its thread CPU time (time.thread_time) to
its node, so the column is the kernels' own CPU time in the real step (caches as the step leaves
them), without the executor around them; a kernel's `direct` ufunc form is not used, so
element-wise nodes are timed too. TensorFlow: the median over steps of each node's op time in
the step stats of RunOptions FULL_TRACE (wall time of the op on its one thread; TF's fused
nodes, e.g. conv + bias + ReLU, carry the time of the fusion under the last node's name).
Both sessions run with one inter-op and one intra-op thread.

    python bench/kernel_table.py P1 [--steps 200] [--top 30] [--no-tf]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WARMUP_RUNS = 2  # Case steps (each several Session.run calls) before timing


def _one_thread(workloads) -> None:
    workloads.THREADS = 1  # read by workloads.session when the case is built


def flowgraph_times(key: str, runs: int) -> tuple[dict, int]:
    """{node: (op type, total thread CPU seconds)} over `runs` Case steps, and the number of
    Session.run calls they made."""
    sys.path.insert(0, os.path.dirname(HERE))
    import workloads

    import flowgraph as tf
    from flowgraph.kernels import base

    totals: dict = {}

    def wrap(kdef) -> None:
        fn = kdef.fn

        @functools.wraps(fn)
        def timed(ctx, *args, **kwargs):
            t0 = time.thread_time()
            try:
                return fn(ctx, *args, **kwargs)
            finally:
                entry = totals.setdefault(ctx.name, [ctx.op_type, 0.0])
                entry[1] += time.thread_time() - t0

        timed.__dict__.pop("direct", None)  # wraps copied it: the schedule would call it
        object.__setattr__(kdef, "fn", timed)  # KernelDef is frozen

    seen = set()
    for tables in base._INDEX.values():
        for _, table in tables:
            for kdef in table.values():
                if id(kdef) not in seen:
                    seen.add(id(kdef))
                    wrap(kdef)
    _one_thread(workloads)
    calls = [0]
    run = tf.Session.run

    def counted(self, *args, **kwargs):  # patched before the build, which may bind sess.run
        calls[0] += 1
        return run(self, *args, **kwargs)

    tf.Session.run = counted
    case = workloads.BY_KEY[key].build(tf)
    for _ in range(WARMUP_RUNS):
        case.step()
    totals.clear()
    calls[0] = 0
    for _ in range(runs):
        case.step()
    tf.Session.run = run
    if case.close:
        case.close()
    return totals, calls[0]


def tf_side(key: str, steps: int) -> None:
    """In TensorFlow's interpreter: prints {node: [op, median seconds]} of FULL_TRACE steps."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow.compat.v1 as tf

    tf.disable_v2_behavior()
    import workloads

    _one_thread(workloads)
    samples: dict = {}
    tracing = [False]
    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    run = tf.Session.run

    def traced(self, fetches, feed_dict=None, **kwargs):  # patched before the build
        if not tracing[0]:
            return run(self, fetches, feed_dict=feed_dict, **kwargs)
        metadata = tf.RunMetadata()
        out = run(self, fetches, feed_dict=feed_dict, options=options, run_metadata=metadata)
        for dev in metadata.step_stats.dev_stats:
            for ns in dev.node_stats:
                op = ns.timeline_label.split("= ")[-1].split("(")[0].strip()
                seconds = (ns.op_end_rel_micros - ns.op_start_rel_micros) * 1e-6
                samples.setdefault(ns.node_name, [op, []])[1].append(seconds)
        return out

    tf.Session.run = traced
    case = workloads.BY_KEY[key].build(tf)
    for _ in range(WARMUP_RUNS):
        case.step()
    tracing[0] = True
    while min((len(v[1]) for v in samples.values()), default=0) < steps:
        case.step()
    tf.Session.run = run
    print(json.dumps({k: [op, statistics.median(v)] for k, (op, v) in samples.items()}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="?", default="P1")
    parser.add_argument("--runs", type=int, default=4, help="timed Case steps (flowgraph)")
    parser.add_argument("--steps", type=int, default=100, help="traced steps (TensorFlow)")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--no-tf", action="store_true")
    parser.add_argument("--tf-python", default="/opt/tfbench/bin/python")
    parser.add_argument("--tf-side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    if args.tf_side:
        tf_side(args.workload, args.steps)
        return 0
    theirs = {}
    if not args.no_tf:
        cmd = [args.tf_python, __file__, args.workload, "--tf-side", "--steps", str(args.steps)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        theirs = json.loads(out.strip().splitlines()[-1])
    ours, calls = flowgraph_times(args.workload, args.runs)
    total = sum(t for _, t in ours.values())
    print(f"{args.workload}: {calls} Session.run calls; kernel CPU time per call, 1 thread (us)")
    print(f"{'node':58} {'op':26} {'flowgraph':>9} {'share':>6} {'TF':>7}")
    rows = sorted(ours.items(), key=lambda item: -item[1][1])
    for name, (op, seconds) in rows[: args.top]:
        tf_us = f"{theirs[name][1] * 1e6:7.1f}" if name in theirs else "      -"
        print(f"{name[-58:]:58} {op[:26]:26} {seconds / calls * 1e6:9.1f} "
              f"{seconds / total:6.1%} {tf_us}")  # fmt: skip
    tf_total = sum(t for _, t in theirs.values()) * 1e6
    print(f"all {len(ours)} kernels: {total / calls * 1e6:.0f} us"
          + (f"; TensorFlow's {len(theirs)} ops: {tf_total:.0f} us" if theirs else ""))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

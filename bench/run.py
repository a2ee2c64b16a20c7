"""Benchmarks flowgraph against TensorFlow and the NumPy floor, and prints one table of ratios.

flowgraph and the NumPy floor run in this process; TensorFlow runs the same workload functions
in its own interpreter (`tf_side.py`), found from --tf-python, $FLOWGRAPH_BENCH_TF_PYTHON or
/opt/tfbench/bin/python. The peers take turns workload by workload, never running at the same
time, so that each gets the whole machine. With --busy every workload runs a second time,
right after its quiet turn, while a CPU-bound process started by the driver holds one core (as
on any shared machine), and a second table gives the busy ratios. See bench/README.md.

Usage: python bench/run.py [--quick] [--no-tf] [--busy] [--tf-python PATH] [--only W1,W4]
                           [--profile W4] [--json results.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, REPO_ROOT)  # flowgraph from this checkout, even when not installed

import harness
import numpy as np
import workloads
from floors import FLOORS
from harness import Result
from tf_side import META_PREFIX, RESULT_PREFIX

DEFAULT_TF_PYTHON = "/opt/tfbench/bin/python"
TF_START_TIMEOUT_S = 120  # importing TensorFlow
TF_STEP_TIMEOUT_S = 300  # one workload, all its repetitions


def find_tf_python(explicit: str | None) -> str | None:
    """--tf-python, then $FLOWGRAPH_BENCH_TF_PYTHON, then the default venv if it exists."""
    path = explicit or os.environ.get("FLOWGRAPH_BENCH_TF_PYTHON")
    if path:
        return path
    return DEFAULT_TF_PYTHON if os.path.exists(DEFAULT_TF_PYTHON) else None


class TFPeer:
    """The TensorFlow interpreter running tf_side.py, asked for one workload at a time.

    `failure` is set (and every later answer is an error) once the peer cannot start, exits,
    or gives no answer within its time limit.
    """

    def __init__(self, tf_python: str):
        self.meta: dict = {}
        self.failure: str | None = None
        self._lines: queue.Queue = queue.Queue()
        try:
            self._proc = subprocess.Popen(
                [tf_python, os.path.join(BENCH_DIR, "tf_side.py")],
                cwd=REPO_ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        except OSError as e:
            self._proc = None
            self.failure = harness.describe_error(e)
            return
        threading.Thread(target=self._pump, daemon=True).start()
        meta = self._answer(META_PREFIX, TF_START_TIMEOUT_S)
        if meta is not None:
            self.meta = json.loads(meta)

    def _pump(self) -> None:
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put(None)  # end of output: the peer exited

    def _answer(self, prefix: str, timeout_s: float) -> str | None:
        """The payload of the next line with `prefix`; None (and `failure` set) on exit/timeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                self._fail(f"TimeoutError: no answer from TensorFlow within {timeout_s} s")
                return None
            if line is None:
                self._fail(f"ChildProcessError: TensorFlow exited ({self._proc.wait()})")
                return None
            if line.startswith(prefix):
                return line[len(prefix) :]

    def _fail(self, message: str) -> None:
        self.failure = message
        self._proc.kill()

    def measure(self, key: str, quick: bool) -> Result:
        return self.measure_group([key], quick)[0]

    def measure_group(self, keys: list[str], quick: bool) -> list[Result]:
        """One workload, or several measured interleaved (harness.measure_interleaved)."""
        request = ",".join(keys)
        if self.failure is None:
            try:
                self._proc.stdin.write(f"{request} quick\n" if quick else f"{request}\n")
                self._proc.stdin.flush()
            except OSError as e:
                self._fail(harness.describe_error(e))
        results = []
        for key in keys:
            payload = None if self.failure else self._answer(RESULT_PREFIX, TF_STEP_TIMEOUT_S)
            results.append(
                Result(key, error=self.failure)
                if payload is None
                else Result.from_dict(json.loads(payload))
            )
        return results

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()


# The busy core's load: a plain Python loop, CPU-bound and single-threaded.
BUSY_LOOP = "while True:\n    pass\n"


class BusyCore:
    """A CPU-bound process holding one core while the `with` block runs; killed at its end."""

    def __enter__(self):
        self._proc = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
        return self

    def __exit__(self, *exc) -> None:
        self._proc.kill()
        self._proc.wait()


def run_all(keys, quick: bool, tf_peer: TFPeer | None, busy: bool = False):
    """Measures workload by workload: flowgraph, then NumPy, then TF, so that the three columns
    of one row are taken close together in time (the machine's background load varies).

    Returns {"quiet": (fg, np, tf)} and, with `busy`, also "busy": the same three peers measured
    again right after the quiet turn of each workload, while a BusyCore runs."""
    import flowgraph as tf

    modes = ("quiet", "busy") if busy else ("quiet",)
    results = {mode: ({}, {}, {}) for mode in modes}
    for group in measured_together(keys):
        for mode in modes:
            fg, np_res, tf_res = results[mode]
            with BusyCore() if mode == "busy" else contextlib.nullcontext():
                for r in harness.measure_group([workloads.BY_KEY[k] for k in group], tf, quick):
                    fg[r.key] = r
                    _progress("flowgraph", r, mode)
                for key in group:
                    if key in FLOORS:
                        with numpy_default_threads():
                            np_res[key] = harness.measure(workloads.BY_KEY[key], FLOORS[key], quick)
                        _progress("numpy", np_res[key], mode)
                if tf_peer is not None:
                    for r in tf_peer.measure_group(group, quick):
                        tf_res[r.key] = r
                        _progress("TF", r, mode)
    return results


def measured_together(keys) -> list[list[str]]:
    """The selected workloads in the order to measure them: one at a time, except those of one
    `workloads.INTERLEAVED` group, measured together where the first of them comes."""
    units, seen = [], set()
    for key in keys:
        if key in seen:
            continue
        group = next((g for g in workloads.INTERLEAVED if key in g), (key,))
        unit = [k for k in group if k in keys]
        seen.update(unit)
        units.append(unit)
    return units


def numpy_default_threads():
    """BLAS at NumPy's default thread count (one per core) while a floor runs: flowgraph's
    Session limits the process's BLAS to one thread (runtime/blas.py), the floor is plain NumPy."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(os.cpu_count() or 1, user_api="blas")


def _progress(peer: str, r: Result, mode: str) -> None:
    shown = f"{r.median_s:.6f} s/step" if r.error is None else r.error
    print(f"  {mode} {peer} {r.key}: {shown}", file=sys.stderr, flush=True)


# -- the table --------------------------------------------------------------------------------
def per_unit(workload, r: Result | None) -> float | None:
    """The median in the workload's unit (us/... or ms/...), or None without a measurement."""
    if r is None or r.error is not None or r.median_s is None:
        return None
    scale = 1e6 if workload.unit.startswith("us") else 1e3
    return r.median_s * scale / workload.units


def _cell(value: float | None, r: Result | None, missing: str) -> str:
    if r is not None and r.error is not None:
        return r.error.split(":")[0]
    return missing if value is None else f"{value:.4g}"


def verdict(workload, fg: float | None, tf_value: float | None) -> str:
    """'yes'/'no' against the target; 'n/a' when the peer the target needs was not measured."""
    target = workload.target
    if fg is None:
        return "no"
    if target.per_unit_us is not None:
        us = fg if workload.unit.startswith("us") else fg * 1e3
        return "yes" if us <= target.per_unit_us else "no"
    if tf_value is None:
        return "n/a"
    return "yes" if fg / tf_value <= target.ratio else "no"


def table_rows(keys, fg, tf_res, np_res, tf_missing: str) -> list[list[str]]:
    rows = []
    for key in keys:
        w = workloads.BY_KEY[key]
        f, t, n = (per_unit(w, d.get(key)) for d in (fg, tf_res, np_res))
        rows.append(
            [
                key,
                w.title,
                w.unit,
                _cell(f, fg.get(key), "n/a"),
                _cell(t, tf_res.get(key), tf_missing),
                _cell(n, np_res.get(key), "n/a"),
                f"{f / t:.2f}" if f is not None and t else "-",
                f"{f / n:.1f}" if f is not None and n else "-",
                w.target.describe(),
                verdict(w, f, t),
            ]
        )
    return rows


def same_peer_ratios(keys, quiet) -> list[str]:
    """`workloads.SAME_PEER_RATIOS` for each peer that measured both workloads, and W2j (fused)
    against TF's plain W2, the target of compiled fusion."""
    fg, _, tf_res = quiet
    lines = []
    pairs = [(a, b, bound, what) for a, b, bound, what in workloads.SAME_PEER_RATIOS]
    for a, b, bound, what in pairs:
        if a not in keys or b not in keys:
            continue
        for peer, res in (("flowgraph", fg), ("TF", tf_res)):
            x, y = (per_unit(workloads.BY_KEY[k], res.get(k)) for k in (a, b))
            if x is None or not y:
                continue
            paired = interleaved(a, b) and harness.paired_ratios(res.get(a), res.get(b))
            if paired:  # round by round: the median ratio and its quartiles
                q1, mid, q3 = (
                    statistics.quantiles(paired, n=4, method="inclusive")
                    if len(paired) > 1
                    else paired * 3
                )
                spread = f" [{q1:.3f}..{q3:.3f}] over {len(paired)} rounds"
            else:
                mid, spread = x / y, ""
            met = "yes" if mid <= bound else "no"
            lines.append(f"  {peer:9} {a}/{b} = {mid:.3f}{spread}  (<= {bound:g}: {met})  {what}")
    if "W2j" in keys and "W2" in keys:
        x, y = (
            per_unit(workloads.BY_KEY["W2j"], fg.get("W2j")),
            per_unit(workloads.BY_KEY["W2"], tf_res.get("W2")),
        )
        if x is not None and y:
            met = "yes" if x / y <= 1.0 else "no"
            lines.append(f"  fg W2j / TF W2 = {x / y:.3f}  (<= 1: {met})  fused vs TF's plain W2")
    return lines


def interleaved(a: str, b: str) -> bool:
    return any(a in g and b in g for g in workloads.INTERLEAVED)


TABLE_HEADER = ["id", "workload", "unit", "flowgraph", "TF", "NumPy", "fg/TF", "fg/NumPy"]
BUSY_HEADER = ["id", "workload", "quiet fg/TF", "busy fg/TF", "busy/quiet", "busy target", "met"]


def busy_rows(keys, quiet, busy) -> list[list[str]]:
    """Per workload: fg/TF quiet and busy, and the busy target of issue 9: the busy ratio at
    most twice the quiet one and at most 2.5x TensorFlow's busy time."""
    rows = []
    for key in keys:
        w = workloads.BY_KEY[key]
        ratios = []
        for fg, _, tf_res in (quiet, busy):
            f, t = per_unit(w, fg.get(key)), per_unit(w, tf_res.get(key))
            ratios.append(f / t if f is not None and t else None)
        q, b = ratios
        met = "n/a" if q is None or b is None else "yes" if b <= min(2 * q, 2.5) else "no"
        rows.append(
            [
                key,
                w.title,
                "-" if q is None else f"{q:.2f}",
                "-" if b is None else f"{b:.2f}",
                "-" if q is None or b is None else f"{b / q:.2f}",
                "<= 2x quiet, <= 2.5x TF",
                met,
            ]
        )
    return rows


def format_table(rows, header=None) -> str:
    header = header or [*TABLE_HEADER, "target", "met"]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(str(c).ljust(wd) for c, wd in zip(r, widths)).rstrip() for r in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * wd for wd in widths))
    return "\n".join(lines)


def environment(
    tf_meta: dict, tf_python: str | None, tf_failure: str | None, load_at_start: float
) -> list[str]:
    """The lines above the table: everything needed to reproduce or compare a run."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
    tf_line = "TensorFlow: not run (--no-tf or no interpreter found)"
    if tf_python and tf_meta:
        tf_line = (
            f"TensorFlow {tf_meta['tf_version']} via tensorflow.compat.v1 + disable_v2_behavior "
            f"({tf_python}, NumPy {tf_meta['numpy_version']}); "
            f"TF_ENABLE_ONEDNN_OPTS={tf_meta['TF_ENABLE_ONEDNN_OPTS']} (unset = TF default, on)"
        )
        if tf_failure:
            tf_line += f"; then failed: {tf_failure}"
    elif tf_python:
        tf_line = f"TensorFlow ({tf_python}) failed: {tf_failure}"
    versions = (
        f"flowgraph {commit or '?'}; Python {sys.version.split()[0]}; NumPy {np.__version__} "
        f"with {blas.get('name', '?')} {blas.get('version', '')}"
    )
    load = (
        f"{os.cpu_count()} CPUs; 1-min load average {load_at_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end (other processes' load skews BLAS timings)"
    )
    return [
        versions,
        load,
        f"both Sessions: inter_op = intra_op = {workloads.THREADS} threads",
        tf_line,
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 warm-up + 2 steps (smoke test)")
    parser.add_argument("--no-tf", action="store_true", help="skip TensorFlow (column says n/a)")
    parser.add_argument(
        "--busy", action="store_true", help="also measure with one core held by another process"
    )
    parser.add_argument("--tf-python", help="the Python of a virtualenv with tensorflow")
    parser.add_argument("--only", default="", help="comma-separated workload ids, e.g. W1,W4")
    parser.add_argument("--profile", default="", help="cProfile these ids on flowgraph instead")
    parser.add_argument("--profile-steps", type=int, default=3)
    parser.add_argument("--json", help="also write all results to this file")
    args = parser.parse_args(argv)

    all_keys = [w.key for w in workloads.WORKLOADS]
    keys = [k for k in args.only.split(",") if k] or all_keys
    unknown = [k for k in keys + args.profile.split(",") if k and k not in workloads.BY_KEY]
    if unknown:
        parser.error(f"unknown workload id(s) {unknown}; known: {all_keys}")
    if args.profile:
        return profile_main([k for k in args.profile.split(",") if k], args.profile_steps)

    started = time.time()
    load_at_start = os.getloadavg()[0]
    tf_python = None if args.no_tf else find_tf_python(args.tf_python)
    tf_peer = TFPeer(tf_python) if tf_python else None
    tf_failure = tf_peer.failure if tf_peer is not None else None
    try:
        results = run_all(keys, args.quick, None if tf_failure else tf_peer, args.busy)
    finally:
        if tf_peer is not None:
            tf_peer.close()
    tf_meta = tf_peer.meta if tf_peer is not None else {}
    tf_failure = tf_peer.failure if tf_peer is not None else None

    print("\n".join(environment(tf_meta, tf_python, tf_failure, load_at_start)))
    mode = "quick (timings not meaningful)" if args.quick else "median of repetitions after warm-up"
    print(f"mode: {mode}; total {time.time() - started:.0f} s\n")
    for mode, (fg, np_res, tf_res) in results.items():
        if mode == "busy":
            print("\nbusy: the same workloads while a CPU-bound process holds one core\n")
        print(format_table(table_rows(keys, fg, tf_res, np_res, "n/a")))
    ratio_lines = same_peer_ratios(keys, results["quiet"])
    if ratio_lines:
        print("\nratios of two workloads on one peer (quiet):")
        print("\n".join(ratio_lines))
    if "busy" in results:
        print()
        print(format_table(busy_rows(keys, results["quiet"], results["busy"]), BUSY_HEADER))
    errors = [
        (mode, peer, r)
        for mode, (fg, _, tf_res) in results.items()
        for peer, res in (("flowgraph", fg), ("TF", tf_res))
        for r in res.values()
        if r.error
    ]
    if errors:
        print("\nerrors:")
        for mode, peer, r in errors:
            print(f"  {r.key} {peer} ({mode}): {r.error}")
    if args.json:
        dump = {"tf_meta": tf_meta, "tf_failure": tf_failure}
        for mode, (fg, np_res, tf_res) in results.items():
            prefix = "" if mode == "quiet" else "busy "
            for peer, res in (("flowgraph", fg), ("tensorflow", tf_res), ("numpy", np_res)):
                dump[prefix + peer] = {k: r.to_dict() for k, r in res.items()}
        with open(args.json, "w") as f:
            json.dump(dump, f, indent=1)
    return 0


def profile_main(keys, steps: int) -> int:
    """Prints cProfile tables of the flowgraph side of each workload (where its time goes).

    cProfile sees only the thread that enabled it, so the Sessions get one inter-op and one
    intra-op thread: every kernel then runs inline, unsharded, on the profiled thread.
    """
    import flowgraph as tf

    workloads.THREADS = 1

    for key in keys:
        workload = workloads.BY_KEY[key]
        print(harness.profile(workload, lambda w=workload: w.build(tf), steps, top=25))
    return 0


if __name__ == "__main__":
    sys.exit(main())

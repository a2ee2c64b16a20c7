"""Timing protocol shared by every peer: build (untimed), warm up, then the median of repetitions.

Each peer (flowgraph and NumPy in the driver's process, TensorFlow in its own interpreter) goes
through `measure`, so all columns of the table come from the same protocol. A failure in one
workload becomes an error string in its result, never an exception that stops the run.
"""

from __future__ import annotations

import contextlib
import cProfile
import gc
import io
import pstats
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from workloads import Case, Workload

QUICK_WARMUP, QUICK_REPS = 1, 2


@dataclass
class Result:
    """One peer's outcome on one workload: the median seconds of a step, or an error."""

    key: str
    median_s: float | None = None
    samples: list[float] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Result:
        return cls(d["key"], d.get("median_s"), list(d.get("samples") or []), d.get("error"))


def describe_error(e: BaseException) -> str:
    """The error class first (what the table shows), then the start of the message."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg[:200]}" if msg else type(e).__name__


def repetitions(workload: Workload, quick: bool) -> tuple[int, int]:
    """(warm-up steps, measured steps) for this workload in this mode."""
    if quick:
        return QUICK_WARMUP, QUICK_REPS
    return workload.warmup, workload.reps


def measure(workload: Workload, make_case: Callable[[], Case], quick: bool) -> Result:
    """Builds the case, runs the warm-up steps, and returns the median of the measured steps.

    The garbage collector is collected before each step (outside the timed part) so that a
    collection triggered by an earlier workload's garbage does not land inside a later one.
    """
    warmup, reps = repetitions(workload, quick)
    try:
        case = make_case()
    except Exception as e:  # noqa: BLE001 - any failure is reported in the row
        return Result(workload.key, error=describe_error(e))
    try:
        for _ in range(warmup):
            gc.collect()
            case.step()
        samples = []
        for _ in range(reps):
            gc.collect()
            samples.append(case.step())
        return Result(workload.key, statistics.median(samples), samples)
    except Exception as e:  # noqa: BLE001
        return Result(workload.key, error=describe_error(e))
    finally:
        with contextlib.suppress(Exception):  # a failed close must not hide the measurement
            case.close()


def measure_interleaved(
    group: list[Workload], make_cases: list[Callable[[], Case]], quick: bool
) -> list[Result]:
    """`measure` for workloads compared with one another (a ratio of two of them is the
    result, as I2/I2f): all their cases are built first, then their steps take turns, one
    step of each per round, the order rotated every round, so that a slow phase of the machine
    or of the process (another process's burst, a different BLAS or thread-pool choice) falls
    on all of them alike. Sample i of every workload comes from round i (`paired_ratios`).
    The rounds are the first workload's measured steps."""
    warmup, reps = repetitions(group[0], quick)
    results: list[Result | None] = [None] * len(group)
    cases: list[Case | None] = [None] * len(group)
    try:
        for i, (workload, make_case) in enumerate(zip(group, make_cases)):
            try:
                cases[i] = make_case()
            except Exception as e:  # noqa: BLE001
                results[i] = Result(workload.key, error=describe_error(e))
        live = [i for i, case in enumerate(cases) if case is not None]
        samples: dict[int, list[float]] = {i: [] for i in live}
        for r in range(warmup + reps):
            for i in live[r % len(live) :] + live[: r % len(live)]:
                if results[i] is not None:
                    continue
                gc.collect()
                try:
                    seconds = cases[i].step()
                except Exception as e:  # noqa: BLE001
                    results[i] = Result(group[i].key, error=describe_error(e))
                    continue
                if r >= warmup:
                    samples[i].append(seconds)
        for i in live:
            if results[i] is None:
                results[i] = Result(group[i].key, statistics.median(samples[i]), samples[i])
        return results
    finally:
        for case in cases:
            if case is not None:
                with contextlib.suppress(Exception):
                    case.close()


def measure_group(group: list[Workload], tf, quick: bool) -> list[Result]:
    """The peer `tf`'s results on `group`: one workload alone (`measure`), several interleaved."""
    builds = [lambda w=w: w.build(tf) for w in group]
    if len(group) == 1:
        return [measure(group[0], builds[0], quick)]
    return measure_interleaved(group, builds, quick)


def paired_ratios(a: Result | None, b: Result | None) -> list[float]:
    """a's samples over b's, round by round, when both come from one `measure_interleaved`
    (the same number of samples); [] otherwise."""
    if a is None or b is None or a.error or b.error or len(a.samples) != len(b.samples):
        return []
    return [x / y for x, y in zip(a.samples, b.samples) if y > 0]


def profile(workload: Workload, make_case: Callable[[], Case], steps: int, top: int) -> str:
    """cProfile of `steps` steps after one warm-up step: the top functions by own time and by
    cumulative time, as text."""
    case = make_case()
    try:
        case.step()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(steps):
            case.step()
        prof.disable()
    finally:
        case.close()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out).strip_dirs()
    out.write(f"== {workload.key}: {steps} step(s), sorted by own time ==\n")
    stats.sort_stats("tottime").print_stats(top)
    out.write(f"== {workload.key}: sorted by cumulative time ==\n")
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()

"""Whether a plan's steps overlap their expensive kernels on the device's inter-op pool or run
them one after the other on the calling thread (whitepaper §3.1, §5.4), decided per plan by
timing steps both ways.

Overlap pays when the kernels it overlaps release the GIL for long enough: W3's eight chains of
256x256 products (BLAS, GIL released) run ~2x faster on 2 cores. It costs when they are short or
hold the GIL: each hand-off to a worker is two thread wake-ups (~25 us of CPU each on 2 shared
cores) and the workers contend with the scheduling thread for the GIL. P1 (the digits CNN,
~130 nodes, a dozen expensive kernels of 50-500 us written as many NumPy calls) took 4.95 ms
per step through the pool and 2.56 ms on one thread. TensorFlow decides per kernel from its cost
(a C++ hand-off costs ~1 us); here how long a kernel holds the GIL matters as much as how long it
runs, and no static estimate knows that, so the choice is measured: a trial alternates the two
ways step by step (the dispatch loop with the pool, the fixed schedule inline; both give the
same values) and keeps the faster. Kernels large enough still shard on the pool either way
(intra-op, kernels/sharding.py), so a step run inline still uses every core for them.

The choice is tried again when the chosen way's step time drifts (the inputs' shapes or the
machine's load changed) and, less and less often, when it was right the last time.
"""

from __future__ import annotations

import statistics
import threading

# Pairs of steps timed in a trial (one step each way, the pool first), after one untimed pair
# (the first step each way: caches, pool threads, page faults). The two steps of a pair run
# back to back, so their ratio is little moved by a load that changes more slowly.
TRIAL_PAIRS = 4
# The pool is kept only when the median ratio of its step time to the inline one is below
# this: running inline costs less CPU, which other processes and threads get back.
PAYS = 0.9
# A new trial starts when the smoothed time of the chosen way's steps leaves
# [reference / DRIFT, reference * DRIFT] (reference: its median in the trial) ...
DRIFT = 2.0
SMOOTHING = 0.1  # the weight of a new step time in the smoothed one: one outlier moves it little
# ... or after this many steps, doubled each time a trial confirms the choice (up to LAST_RETRY):
# a trial costs TRIAL_PAIRS + 1 steps the slower way.
FIRST_RETRY = 256
LAST_RETRY = 8192


class OverlapChoice:
    """The way one plan's steps run: `pooled()` says which way to run the next step, `record`
    takes how long it took (wall seconds; a step that failed is not recorded)."""

    __slots__ = ("_last", "_lock", "_times", "chosen", "interval", "left", "reference", "smoothed")

    def __init__(self):
        self._lock = threading.Lock()
        self._times: tuple[list, list] = ([], [])  # a trial's step times: inline, pooled
        self.chosen: bool | None = None  # True: the pool; None: during a trial
        self._last: bool | None = None  # the choice before the running trial, if any
        self.reference = 0.0  # the chosen way's median step time in its trial
        self.smoothed = 0.0
        self.interval = FIRST_RETRY
        self.left = 0  # steps until the next trial

    def pooled(self) -> bool:
        """Whether the next step overlaps its kernels on the pool. A trial alternates, the pool
        first, so that a plan run only once runs as it did before trials existed."""
        chosen = self.chosen
        if chosen is not None:
            return chosen
        inline, pooled = self._times
        return len(pooled) <= len(inline)

    def record(self, pooled: bool, seconds: float) -> None:
        with self._lock:
            if self.chosen is None:
                self._try(pooled, seconds)
            elif pooled == self.chosen:
                self._watch(seconds)

    def _try(self, pooled: bool, seconds: float) -> None:
        self._times[pooled].append(seconds)
        inline, pooled_times = self._times
        if len(inline) <= TRIAL_PAIRS or len(pooled_times) <= TRIAL_PAIRS:
            return
        pairs = zip(pooled_times[1:], inline[1:])
        chosen = statistics.median(p / max(i, 1e-9) for p, i in pairs) < PAYS
        confirmed = chosen == self._last
        self.interval = min(2 * self.interval, LAST_RETRY) if confirmed else FIRST_RETRY
        self.left = self.interval
        self.reference = self.smoothed = statistics.median((pooled_times if chosen else inline)[1:])
        self._times = ([], [])
        self.chosen = chosen

    def _watch(self, seconds: float) -> None:
        self.smoothed += SMOOTHING * (seconds - self.smoothed)
        self.left -= 1
        drifted = not self.reference / DRIFT <= self.smoothed <= self.reference * DRIFT
        if drifted or self.left <= 0:
            self._last = self.chosen
            self.chosen = None

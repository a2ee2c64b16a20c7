"""Dataset kernels that overlap work (whitepaper §4.6: a stage decoupled from the next one):
prefetching into a buffer filled in the background, and map functions applied to several
elements at once on the dataset pool. A consumer that finds no element ready awaits a
`Pending` and parks no thread (dataset_base.py); the producer that completes it resumes it."""

from __future__ import annotations

import collections
import os
import threading

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.dataset_base import (
    AUTOTUNE,
    ElementCheck,
    Function,
    Pending,
    background_pool,
    drive,
    scalar,
)
from flowgraph.kernels.cpu.dataset_batch import BatchDataset
from flowgraph.kernels.cpu.dataset_transforms import (
    FlatMapDataset,
    MapDataset,
    Unary,
    UnaryIterator,
)

_END = object()  # a slot's value past the end of the input
_AUTOTUNE_BUFFER = 4  # prefetch buffer chosen for AUTOTUNE
_AHEAD = 4  # elements a prefetch asks for at once (Iterator.get_ahead): a pass through a
# parse-only map's chain costs about as much for 2 to 4 batches as for 1; more would only
# delay the first to a waiting consumer


def _out(ctx):
    return ctx.attrs["output_types"], ctx.attrs["output_shapes"]


class PrefetchDataset(Unary):
    def __init__(self, input_dataset, buffer_size, types, shapes):
        super().__init__(input_dataset, types, shapes)
        if buffer_size < 0 and buffer_size != AUTOTUNE:
            raise errors.InvalidArgumentError(
                None, None, f"buffer_size must be >= 0 or AUTOTUNE (-1), got {buffer_size}"
            )
        self.buffer_size = _AUTOTUNE_BUFFER if buffer_size == AUTOTUNE else buffer_size

    def make_iterator(self, env):
        it = self.input.make_iterator(env)
        return _PrefetchIterator(it, self.buffer_size) if self.buffer_size else it


class _PrefetchIterator(UnaryIterator):
    """Up to `size` elements produced ahead by a producer task on the dataset pool. The
    producer stops when the buffer is full and is restarted by the consumer that leaves it
    at `low` elements or fewer (half of what it holds beyond one); a consumer that finds the
    buffer empty waits as a Pending, served before the buffer. Every field below is guarded
    by `lock`.

    Why not restart at every element taken, as TF does: a restart wakes a pool thread (a
    futex call on the consumer's thread, the training step's) and runs the chain once from
    cold caches. In I2d (prefetch(2) under a 1.6 ms step) the chain costs ~2x its warm cost
    after a step's pause; refilling both slots in one go pays that once per two batches, and
    the step finds a batch ready whenever producing one takes less than a step, as before.
    And a refill asks its input for all it has room for (up to _AHEAD) by one get_ahead: a
    parse-only map over a batch makes them in one pass through its chain, so the cold pass
    is paid once per refill, not once per element. The outcomes may exceed the room by one
    (an error met after the last element asked for)."""

    def __init__(self, input_iterator, size):
        super().__init__(input_iterator)
        self.size = size
        self.low = (size - 1) // 2
        self.lock = threading.Lock()
        self.buffer = collections.deque()  # ready outcomes: (element, error)
        self.waiters = collections.deque()  # Pendings of waiting consumers, in order
        self.producing = False
        self.finished = False  # the producer reached the end of the input
        self.closed = False

    async def get_next(self):
        with self.lock:
            if self.buffer:
                element, error = self.buffer.popleft()
                pending = None
            elif self.finished:
                return None
            else:
                pending = Pending()
                self.waiters.append(pending)
            self._start_locked()
        if pending is not None:
            element, error = await pending
        if error is not None:
            raise error
        return element

    def poll(self):
        with self.lock:
            if self.buffer:
                outcome = self.buffer.popleft()
                self._start_locked()
                return outcome
            return (None, None) if self.finished else None

    def _start_locked(self):
        if not (self.producing or self.finished or self.closed) and len(self.buffer) <= self.low:
            self.producing = True
            background_pool().submit(self._produce)

    def _produce(self):
        while True:
            k = min(_AHEAD, self.size - len(self.buffer))  # the buffer only shrinks meanwhile
            result = drive(self.input.get_ahead(max(1, k)), self._produced_later)
            if result is None:  # the input waits: _produced_later continues
                return
            if not self._deliver(result.value, result.error):
                return

    def _produced_later(self, outcomes, error):
        if self._deliver(outcomes, error):
            background_pool().submit(self._produce)

    def _deliver(self, outcomes, error) -> bool:
        """Hands the outcomes of a get_ahead (its list, or the error it raised) to the
        waiting consumers in order, the rest to the buffer; [] is the end. Returns whether
        to produce more."""
        if error is not None:
            outcomes = [(None, error)]
        with self.lock:
            if self.closed:
                self.producing = False
                return False
            served = []
            if not outcomes:
                self.finished = True
                served = [(w, (None, None)) for w in self.waiters]
                self.waiters = collections.deque()
            for outcome in outcomes:
                if self.waiters:
                    served.append((self.waiters.popleft(), outcome))
                else:
                    self.buffer.append(outcome)
            more = bool(outcomes) and len(self.buffer) < self.size
            self.producing = more
        for w, outcome in served:
            w.set_result(outcome)
        return more

    def close(self):
        with self.lock:
            self.closed = True
            waiters, self.waiters = list(self.waiters), collections.deque()
            self.buffer.clear()
        cancelled = errors.CancelledError(None, None, "The iterator was re-initialized or closed")
        for w in waiters:
            w.set_result((None, cancelled))
        super().close()


@register_kernel("PrefetchDataset")
def prefetch_dataset(ctx, input_dataset, buffer_size):
    return PrefetchDataset(input_dataset, scalar(buffer_size, "buffer_size"), *_out(ctx))


class ParallelMapDataset(MapDataset):
    def __init__(self, input_dataset, func, num_parallel_calls, types, shapes):
        super().__init__(input_dataset, func, types, shapes)
        if num_parallel_calls == AUTOTUNE:
            num_parallel_calls = os.cpu_count() or 1
        if num_parallel_calls <= 0:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"num_parallel_calls must be positive or AUTOTUNE, got {num_parallel_calls}",
            )
        self.num_parallel_calls = num_parallel_calls

    def make_iterator(self, env):
        if self.num_parallel_calls == 1:
            return super().make_iterator(env)
        return _ParallelMapIterator(
            self.input.make_iterator(env), self.func.instantiate(env), self.num_parallel_calls, self
        )


class _ParallelMapIterator(UnaryIterator):
    """Up to `n` calls in flight, results returned in input order.

    `slots` holds one Pending per element in flight, in input order; `unfed` are the slots
    whose input element is still to be read (reads are serialized by `fetching`); `queued`
    maps a slot to its element while its call has not started. Calls run on up to n - 1
    workers of the dataset pool, each taking queued calls until none is left, and on the
    consumer itself: a consumer whose next slot's call has not started runs it instead of
    waiting (so with the GIL held by Python kernels, parallel calls cost no more than serial
    ones). A slot's value is the mapped element, its error, or _END past the end of the
    input. Fields guarded by `lock`."""

    def __init__(self, input_iterator, fn, n, ds):
        super().__init__(input_iterator)
        self.fn = fn
        self.n = n
        self.check = ElementCheck(ds.output_types, ds.output_shapes, "map function")
        self.lock = threading.Lock()
        self.slots = collections.deque()
        self.unfed = collections.deque()
        self.queued: dict = {}  # slot -> element, in the order their calls should start
        self.workers = 0
        self.fetching = False
        self.input_done = False
        self.closed = False

    async def get_next(self):
        with self.lock:
            self._add_slots_locked()
            if not self.slots:
                return None
            slot = self.slots.popleft()
            self._add_slots_locked()
            fetch = self.unfed and not self.fetching
            if fetch:
                self.fetching = True
        if fetch:
            self._fetch()
        with self.lock:
            element = self.queued.pop(slot, None)
        if element is not None:  # not started yet: run it here rather than wait for it
            self._call(slot, element)
        value = await slot
        return None if value is _END else value

    def _add_slots_locked(self):
        while len(self.slots) < self.n and not self.input_done and not self.closed:
            slot = Pending()
            self.slots.append(slot)
            self.unfed.append(slot)

    def _fetch(self):
        """Reads input elements for the unfed slots, in order, starting their calls."""
        while True:
            with self.lock:
                if not self.unfed or self.closed:
                    self.fetching = False
                    return
                slot = self.unfed[0]
            result = drive(
                self.input.get_next(), lambda e, err, slot=slot: self._fetched_later(slot, e, err)
            )
            if result is None:
                return
            self._fetched(slot, result.value, result.error)

    def _fetched_later(self, slot, element, error):
        self._fetched(slot, element, error)
        self._fetch()

    def _fetched(self, slot, element, error):
        rest = []
        with self.lock:
            self.unfed.popleft()
            if element is None and error is None:
                self.input_done = True
                rest, self.unfed = list(self.unfed), collections.deque()
        if error is not None:
            slot.set_error(error)
        elif element is None:
            for s in [slot] + rest:
                s.set_result(_END)
        else:
            with self.lock:
                self.queued[slot] = element
                start = self.workers < self.n - 1
                if start:
                    self.workers += 1
            if start:
                background_pool().submit(self._work)

    def _work(self):
        """A pool worker: runs queued calls, latest first, until none is left."""
        while True:
            with self.lock:
                if not self.queued or self.closed:
                    self.workers -= 1
                    return
                slot = next(reversed(self.queued))  # the latest: the consumer takes the head
                element = self.queued.pop(slot)
            self._call(slot, element)

    def _call(self, slot, element):
        try:
            out = self.check(self.fn(element))
        except BaseException as e:  # noqa: BLE001 (the consumer of this element raises it)
            slot.set_error(e)
            return
        slot.set_result(out)

    def close(self):
        with self.lock:
            self.closed = True
            slots = list(self.slots)
            self.slots, self.unfed, self.queued = collections.deque(), collections.deque(), {}
        cancelled = errors.CancelledError(None, None, "The iterator was re-initialized or closed")
        for s in slots:
            s.set_error(cancelled)
        super().close()


@register_kernel("ParallelMapDataset")
def parallel_map_dataset(ctx, input_dataset, *args):
    *captured, n = args
    return ParallelMapDataset(
        input_dataset,
        Function(ctx.attrs["f"], captured),
        scalar(n, "num_parallel_calls"),
        *_out(ctx),
    )


@register_kernel("MapAndBatchDataset")
def map_and_batch_dataset(ctx, input_dataset, *args):
    """tf.data.experimental.map_and_batch: a parallel map then a batch (the same elements)."""
    *captured, batch_size, n, drop_remainder = args
    types, shapes = _out(ctx)
    item_shapes = [s[1:] if s.ndims else s for s in shapes]
    mapped = ParallelMapDataset(
        input_dataset,
        Function(ctx.attrs["f"], captured),
        scalar(n, "num_parallel_calls"),
        types,
        item_shapes,
    )
    return BatchDataset(
        mapped, scalar(batch_size, "batch_size"), bool(drop_remainder), types, shapes
    )


@register_kernel("ParallelInterleaveDatasetV2")
def parallel_interleave_dataset(ctx, input_dataset, *args):
    """interleave(num_parallel_calls=...): the elements and their order are InterleaveDataset's
    (sloppy=False); the cycle's datasets are advanced one at a time."""
    *captured, cycle, block, n = args
    if scalar(n, "num_parallel_calls") <= 0 and scalar(n, "num_parallel_calls") != AUTOTUNE:
        raise errors.InvalidArgumentError(None, None, "num_parallel_calls must be positive")
    return FlatMapDataset(
        input_dataset,
        Function(ctx.attrs["f"], captured),
        scalar(cycle, "cycle_length"),
        scalar(block, "block_length"),
        *_out(ctx),
    )


@register_kernel("ParallelMapDatasetV2")
def parallel_map_dataset_v2(ctx, input_dataset, *args):
    """TF 2's form of ParallelMapDataset (an int64 num_parallel_calls); results stay in input
    order whatever `deterministic` says, which every setting allows."""
    return parallel_map_dataset(ctx, input_dataset, *args)


@register_kernel("ParallelInterleaveDatasetV4")
def parallel_interleave_dataset_v4(ctx, input_dataset, *args):
    """TF 2's parallel interleave: InterleaveDataset's elements and order (which every
    `deterministic` setting allows); the buffering hints only tune TF's prefetching."""
    *captured, cycle, block, _buffer_output, _prefetch_input, n = args
    return parallel_interleave_dataset(ctx, input_dataset, *captured, cycle, block, n)

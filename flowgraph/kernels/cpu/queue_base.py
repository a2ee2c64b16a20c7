"""Queues (whitepaper §4.6): resources in a device's containers (§4.7) that decouple the stages of
a pipeline. Enqueue and dequeue are asynchronous (§5.3): a request that cannot be served now is
kept as an *attempt* with its continuation, and served when another step makes room or brings
elements, so a step blocked on a queue parks no thread.

Attempts are served strictly in arrival order on each side, as in TensorFlow's QueueBase: the
head dequeue attempt takes elements as they become available (so `dequeue_many(n)` may exceed
the capacity) and gives them back if it is cancelled; the head enqueue attempt pushes elements
while there is room. A non-cancelling `close` is itself an enqueue-side attempt, so it takes
effect after the enqueues already waiting. Once closed, waiting dequeues that can never be
satisfied fail with OutOfRangeError and new enqueues with CancelledError.

Elements travel in *batches*: a tuple with one array per component whose first axis counts
elements (an enqueue is a batch of one). The queue moves as many elements of a batch at a time
as the room allows, and a dequeue takes *pieces* (batches again) that `batch` joins, so an
enqueue_many or dequeue_many costs a few array operations, not a Python step per element: with
reader threads feeding a training step on the same cores, the queue's CPU per element is what
the step pays (bench I2). Capacity still counts elements. How a kind stores its elements is in
queue_kinds.py.

The common cases take shortcuts through this machinery, since the trainer's thread dequeues
every step and each reader thread enqueues every batch: an enqueue or dequeue that can be
served at once makes no attempt, an enqueue into a full queue that nothing else waits on parks
without a serving pass, and the dequeue that then makes room serves only the waiting enqueues.

A producer thread (a QueueRunner's) may `pace` itself between its enqueue runs: once the
queue is full it waits until the queue has drained to its low mark, half way down from the
capacity to what a dequeue must leave, so that it then refills it in a burst of enqueues.
Refilling after every dequeue runs the producer's Python once per training step, each time
with caches the step has just filled with its own work, at 3-4x the cost of the same enqueue
run in a burst (bench I2). Pacing changes no queue semantics: a blocked enqueue is still
served as soon as there is room; only the producer's next run waits.

Every field below is guarded by `QueueBase.lock`; continuations run after the lock is released.
"""

from __future__ import annotations

import collections
import functools
import threading

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.cpu.blocking import CancelHook

ENQUEUE, CLOSE, DEQUEUE = 0, 1, 2


def rows(batch: tuple) -> int:
    """The number of elements in a batch."""
    return len(batch[0])


class Attempt:
    """One waiting request. Enqueue: the rows [lo, hi) of `batch` still to push. Dequeue: `n`
    elements wanted, `got` so far in the pieces `taken`, `allow_small` for DequeueUpTo."""

    __slots__ = ("allow_small", "batch", "done", "got", "hi", "hook", "kind", "lo", "n", "taken")

    def __init__(self, kind, done, batch=(), n=0, allow_small=False):
        self.kind = kind
        self.done = done
        self.batch = batch
        self.lo = 0
        self.hi = rows(batch) if batch else 0
        self.n = n
        self.got = 0
        self.taken: list = []
        self.allow_small = allow_small
        self.hook = None


class QueueBase:
    """The attempt machinery shared by every queue; subclasses say how elements are stored."""

    kind = "Queue"
    _peekers: list | tuple = ()  # peeks waiting for an element (StagingArea only)

    def __init__(self, name: str, dtypes: list, shapes: list, capacity: int):
        self.name = name
        self.dtypes = list(dtypes)
        self.shapes = list(shapes)  # TensorShapes; empty when the queue has no shapes
        # The fully defined shapes as tuples (None where partial): the fast check of elements.
        self._exact = [tuple(s.as_list()) if s.is_fully_defined() else None for s in shapes]
        self._all_exact = bool(shapes) and None not in self._exact
        self._passed: list = []  # the component shapes of the last enqueue_many that passed
        self.capacity = capacity  # < 0: unbounded
        self.lock = threading.Lock()
        self.closed = False  # guarded by lock
        self._enqueuers: collections.deque = collections.deque()  # guarded by lock
        self._dequeuers: collections.deque = collections.deque()  # guarded by lock
        self._pacers: list[threading.Event] = []  # producers waiting in pace; guarded by lock
        self._last_put = 1  # the rows of the latest enqueue: what "full" means in pace
        self._dropped = False  # by its container: pace never waits; guarded by lock

    # -- storage, overridden by each queue kind (called with lock held) ---------------------
    def _size(self) -> int:
        raise NotImplementedError

    def _put(self, batch: tuple, lo: int, hi: int) -> None:
        """Stores the rows [lo, hi) of `batch` (the caller checked the room)."""
        raise NotImplementedError

    def _take(self, k: int, taken: list) -> None:
        """Removes `k` elements (at most `_poppable()`), appending them to `taken` as pieces."""
        raise NotImplementedError

    def _poppable(self) -> int:
        """How many elements a dequeue may take now."""
        return self._size()

    def _room(self, batch: tuple, lo: int) -> int:
        """How many rows of `batch` from `lo` on fit now."""
        if self.capacity < 0:
            return rows(batch) - lo
        return self.capacity - self._size()

    def _restore(self, pieces: list) -> None:
        """Gives back the pieces taken by a cancelled or failed dequeue."""
        for p in pieces:
            self._put(p, 0, rows(p))

    def batch(self, pieces: list) -> list:
        """One array per component: the pieces' elements in order along the first axis."""
        if not pieces:
            return [
                np.zeros((0, *s.as_list()), dtype=d.as_numpy_dtype)
                for d, s in zip(self.dtypes, self.shapes)
            ]
        return [np.concatenate(c) for c in zip(*pieces)]

    @staticmethod
    def element(pieces: list) -> tuple:
        """The components of the one element a Dequeue took."""
        return tuple(c[0, ...] for c in pieces[0])

    # -- checks -------------------------------------------------------------------------------
    def matches(self, kind: str, dtypes: list, shapes: list, capacity: int) -> None:
        """A shared queue found in a container must be the one this op asks for."""
        if kind != self.kind:
            raise errors.InvalidArgumentError(
                None, None, f"Shared queue '{self.name}' is a {self.kind}, not a {kind}"
            )
        if list(dtypes) != self.dtypes:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shared queue '{self.name}' has component types "
                f"{[d.name for d in self.dtypes]} but requested component types "
                f"{[d.name for d in dtypes]}",
            )
        if [s.as_list() for s in shapes] != [s.as_list() for s in self.shapes]:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shared queue '{self.name}' has component shapes "
                f"{[str(s) for s in self.shapes]} but requested component shapes "
                f"{[str(s) for s in shapes]}",
            )
        if capacity != self.capacity:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shared queue '{self.name}' has capacity {self.capacity} but requested "
                f"capacity was {capacity}",
            )

    def _check_shape(self, i: int, shape: tuple, batched: bool) -> None:
        if not self.shapes:
            return
        exact = self._exact[i]
        if exact is not None and exact == (shape[1:] if batched else shape):
            return
        want = self.shapes[i]
        if batched:
            ok = want.is_compatible_with(shape[1:]) if shape else False
        else:
            ok = want.is_compatible_with(shape)
        if not ok:
            expect = ("[batch_size," if batched else "[") + str(want.as_list())[1:]
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Shape mismatch in tuple component {i}. Expected {expect}, got {list(shape)}",
            )

    def validate(self, components: list, batched: bool) -> tuple:
        """The batch of an enqueue (one element) or enqueue_many (the components as given)."""
        if len(components) != len(self.dtypes):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"{self.kind} '{self.name}' expects {len(self.dtypes)} components, "
                f"got {len(components)}",
            )
        comps = [np.asarray(c) for c in components]
        if batched and self._all_exact:
            # A producer enqueues batches of one shape again and again: the shapes that passed
            # last time pass at once (one comparison instead of the checks below).
            shapes = [c.shape for c in comps]
            if shapes == self._passed:
                return tuple(comps)
            first = shapes[0][:1]
            if first and all(s[:1] == first and s[1:] == e for s, e in zip(shapes, self._exact)):
                self._passed = shapes
                return tuple(comps)
        for i, c in enumerate(comps):
            self._check_shape(i, c.shape, batched)
        if not batched:
            return tuple(c[np.newaxis] for c in comps)
        if any(c.ndim == 0 for c in comps):
            raise errors.InvalidArgumentError(
                None, None, "EnqueueMany requires components with at least one dimension"
            )
        n = comps[0].shape[0]
        for i, c in enumerate(comps[1:], 1):
            if c.shape[0] != n:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"All input tensors must have the same size in the 0th dimension. "
                    f"Component 0 has {n}, and component {i} has {c.shape[0]}",
                )
        return tuple(comps)

    def check_batchable(self, op: str) -> None:
        if not self.shapes or any(not s.is_fully_defined() for s in self.shapes):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"{self.kind}'s DequeueMany and DequeueUpTo require the components to have "
                f"specified shapes.",
            )

    # -- the operations -------------------------------------------------------------------------
    def size(self) -> int:
        with self.lock:
            return self._size()

    def is_closed(self) -> bool:
        with self.lock:
            return self.closed

    def enqueue(self, step, batch: tuple, done) -> None:
        """Pushes the elements of `batch`; done() when all are in, done(None, error) if they
        cannot be."""
        ready = parked = None
        n = rows(batch)
        with self.lock:
            # The common case needs no attempt: no enqueue waits before this one, the queue
            # is open and has room for all of it. It is pushed as the head attempt would be.
            fits = not self._enqueuers and not self.closed and self._room(batch, 0) >= n
            self._last_put = n or 1
            if fits:
                if n:
                    self._put(batch, 0, n)
                if self._dequeuers or self._peekers:
                    ready = []
                    self._flush(ready)
            elif not (self._enqueuers or self._dequeuers or self.closed or self._room(batch, 0)):
                # A reader's usual wait: the queue is full and nothing else waits, so serving
                # would move nothing. It waits as the head attempt without a serving pass.
                parked = Attempt(ENQUEUE, done, batch=batch)
                parked.hook = CancelHook(step, functools.partial(self._cancel, parked))
                self._enqueuers.append(parked)
        if parked is not None:
            parked.hook.arm()
        elif not fits:
            self._submit(step, Attempt(ENQUEUE, done, batch=batch))
        else:
            if ready:
                run_ready(ready)
            done()

    def dequeue(self, step, n: int, done, allow_small: bool = False) -> None:
        """done(pieces) with `n` elements (fewer only if allow_small and closed)."""
        self._dequeue(step, n, done, allow_small, None)

    def dequeue_many(self, step, n: int, done, allow_small: bool = False) -> None:
        """done(outputs): a DequeueMany's or DequeueUpTo's, one array per component (the array
        itself for one component)."""
        self._dequeue(step, n, done, allow_small, self._give_batch)

    def _dequeue(self, step, n, done, allow_small, finish) -> None:
        ready = None
        with self.lock:
            # The common case needs no attempt: no dequeue waits before this one and the
            # elements are there. Taking them may make room for a waiting enqueue.
            fits = not self._dequeuers and self._poppable() >= n
            if fits:
                taken: list = []
                if n:
                    self._take(n, taken)
                if self._pacers and self._size() <= self._low_mark():
                    self._wake_pacers()
                if self._enqueuers:  # the wait of a reader for room
                    ready = []
                    if self._peekers:
                        self._flush(ready)
                    else:  # no dequeue waits (nor did): only enqueues can move
                        self._push_waiting(ready)
        if not fits:
            if finish is not None:
                done = functools.partial(finish, done)
            self._submit(step, Attempt(DEQUEUE, done, n=n, allow_small=allow_small))
            return
        if ready:
            run_ready(ready)
        if finish is None:
            done(taken)
        else:
            finish(done, taken)

    def _give_batch(self, done, pieces=None, error=None) -> None:
        if error is None:
            try:
                out = self.batch(pieces)
            except (ValueError, TypeError) as e:  # a bad batch fails the step, not the queue
                error = e
        if error is not None:
            done(None, error)
        else:
            done(outputs(out))

    def close(self, step, cancel_pending_enqueues: bool, done) -> None:
        if not cancel_pending_enqueues:
            self._submit(step, Attempt(CLOSE, done))
            return
        ready = []
        with self.lock:
            self.closed = True
            self._wake_pacers()
            while self._enqueuers:
                a = self._enqueuers.popleft()
                ready.append((a, None, self._closed_error(a)))
            self._flush(ready)
        run_ready(ready)
        done()

    def _closed_error(self, a: Attempt) -> errors.OpError:
        if a.kind == CLOSE:
            return errors.CancelledError(None, None, f"Queue '{self.name}' is already closed.")
        return errors.CancelledError(None, None, f"{self.kind} '{self.name}' is closed.")

    def _submit(self, step, a: Attempt) -> None:
        side = self._dequeuers if a.kind == DEQUEUE else self._enqueuers
        self._park(step, a, side, self._cancel)

    # -- pacing of producer threads (see the module docstring) ------------------------------
    def pace(self) -> None:
        """Returns when the queue has room for another enqueue like the latest one; if it has
        none, first waits until it has drained to its low mark, a dequeue waits, or the queue
        is closed or dropped from its container."""
        with self.lock:
            full = self.capacity > 0 and self.capacity - self._size() < self._last_put
            if not full or self.closed or self._dequeuers or self._peekers or self._dropped:
                return
            event = threading.Event()
            self._pacers.append(event)
        event.wait()

    def _low_mark(self) -> int:
        floor = self._floor()
        return floor + (self.capacity - floor) // 2

    def _floor(self) -> int:
        """The elements a dequeue must leave in the queue."""
        return 0

    def _wake_pacers(self) -> None:
        for event in self._pacers:
            event.set()
        self._pacers.clear()

    def dropped(self) -> None:
        """Its container dropped this queue (a Session closed or reset): no producer waits
        for it any longer."""
        with self.lock:
            self._dropped = True
            self._wake_pacers()

    def _park(self, step, a: Attempt, waiters, cancel) -> None:
        """Appends `a` to `waiters` and serves what is ready; if `a` must still wait, cancelling
        `step` calls cancel(a, error)."""
        ready = []
        with self.lock:
            waiters.append(a)
            if a.kind != ENQUEUE:  # a dequeue or peek that may wait, or a close
                self._wake_pacers()
            self._flush(ready)
            pending = not any(r[0] is a for r in ready)
            if pending:
                a.hook = CancelHook(step, functools.partial(cancel, a))
        run_ready(ready)
        if pending:
            a.hook.arm()

    def _cancel(self, a: Attempt, error: errors.OpError) -> None:
        ready = []
        with self.lock:
            side = self._dequeuers if a.kind == DEQUEUE else self._enqueuers
            if not any(x is a for x in side):
                return  # already served
            side.remove(a)
            self._give_back(a)
            self._flush(ready)
        run_ready(ready)
        a.done(None, error)

    def _give_back(self, a: Attempt) -> None:
        if a.taken:
            self._restore(a.taken)
            a.taken, a.got = [], 0

    def _flush(self, ready: list) -> None:
        """Serves head attempts while any makes progress; finished ones go to `ready`."""
        progress = True
        while progress:
            progress = self._serve_peeks(ready)
            while self._dequeuers:
                a = self._dequeuers[0]
                k = min(a.n - a.got, self._poppable())
                if k > 0:
                    self._take(k, a.taken)
                    a.got += k
                    progress = True
                if a.got == a.n:
                    ready.append((self._dequeuers.popleft(), a.taken, None))
                    progress = True
                elif self.closed:
                    self._dequeuers.popleft()
                    progress = True
                    if a.allow_small and a.got:
                        ready.append((a, a.taken, None))
                        continue
                    self._give_back(a)
                    ready.append((a, None, self._insufficient(a)))
                else:
                    break
            progress = self._push_waiting(ready) or progress

    def _push_waiting(self, ready: list) -> bool:
        """Serves the enqueue-side attempts in order while there is room; whether any
        changed the queue."""
        progress = False
        while self._enqueuers:
            a = self._enqueuers[0]
            if self.closed:
                ready.append((self._enqueuers.popleft(), None, self._closed_error(a)))
                continue
            if a.kind == CLOSE:
                self.closed = True
                ready.append((self._enqueuers.popleft(), None, None))
                progress = True
                continue
            while a.lo < a.hi:
                k = min(a.hi - a.lo, self._room(a.batch, a.lo))
                if k <= 0:
                    break
                self._put(a.batch, a.lo, a.lo + k)
                a.lo += k
                progress = True
            if a.lo < a.hi:
                break
            ready.append((self._enqueuers.popleft(), None, None))
        return progress

    def _serve_peeks(self, ready: list) -> bool:
        """Peeks (StagingArea only) never change the queue: nothing to serve by default."""
        return False

    def _insufficient(self, a: Attempt) -> errors.OpError:
        return errors.OutOfRangeError(
            None,
            None,
            f"{self.kind} '{self.name}' is closed and has insufficient elements "
            f"(requested {a.n}, current size {self._size()})",
        )


def outputs(values: list):
    """A kernel's outputs from one value per component: the value itself for one."""
    return values[0] if len(values) == 1 else tuple(values)


def run_ready(ready: list) -> None:
    """Calls the continuations of finished attempts (outside the queue's lock)."""
    for a, taken, error in ready:
        if a.hook is not None:
            a.hook.disarm()
        if error is not None:
            a.done(None, error)
        elif a.kind == DEQUEUE:
            a.done(taken)
        else:
            a.done()

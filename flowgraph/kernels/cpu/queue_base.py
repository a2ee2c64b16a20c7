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

Every field below is guarded by `QueueBase.lock`; continuations run after the lock is released.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import threading

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.cpu.blocking import CancelHook

_ENQUEUE, _CLOSE, _DEQUEUE = 0, 1, 2


class _Attempt:
    """One waiting request. Enqueue: `elements` still to push. Dequeue: `n` wanted, `taken` so
    far, `allow_small` for DequeueUpTo, `batched` unless it is a single Dequeue."""

    __slots__ = ("allow_small", "batched", "done", "elements", "hook", "kind", "n", "taken")

    def __init__(self, kind, done, elements=None, n=0, allow_small=False, batched=False):
        self.kind = kind
        self.done = done
        self.elements = collections.deque(elements or ())
        self.n = n
        self.taken: list = []
        self.allow_small = allow_small
        self.batched = batched
        self.hook = None


class QueueBase:
    """The attempt machinery shared by every queue; subclasses say how elements are stored."""

    kind = "Queue"

    def __init__(self, name: str, dtypes: list, shapes: list, capacity: int):
        self.name = name
        self.dtypes = list(dtypes)
        self.shapes = list(shapes)  # TensorShapes; empty when the queue has no shapes
        # The fully defined shapes as tuples (None where partial): the fast check of elements.
        self._exact = [tuple(s.as_list()) if s.is_fully_defined() else None for s in shapes]
        self.capacity = capacity  # < 0: unbounded
        self.lock = threading.Lock()
        self.closed = False  # guarded by lock
        self._enqueuers: collections.deque = collections.deque()  # guarded by lock
        self._dequeuers: collections.deque = collections.deque()  # guarded by lock

    # -- storage, overridden by each queue kind (called with lock held) ---------------------
    def _size(self) -> int:
        raise NotImplementedError

    def _push(self, element: tuple) -> None:
        raise NotImplementedError

    def _pop(self) -> tuple:
        raise NotImplementedError

    def _can_pop(self) -> bool:
        return self._size() > 0

    def _has_room(self, element: tuple) -> bool:
        return self.capacity < 0 or self._size() < self.capacity

    def _restore(self, elements: list) -> None:
        """Gives back elements taken by a cancelled or failed dequeue."""
        for e in elements:
            self._push(e)

    def batch(self, elements: list) -> list:
        """One array per component, stacking `elements` along a new first axis."""
        out = []
        for i, dtype in enumerate(self.dtypes):
            if elements:
                out.append(np.stack([e[i] for e in elements]))
            else:
                shape = tuple(self.shapes[i].as_list())
                out.append(np.zeros((0,) + shape, dtype=dtype.as_numpy_dtype))
        return out

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

    def validate(self, components: list, batched: bool) -> list:
        """The elements of an enqueue (one) or enqueue_many (split along axis 0)."""
        if len(components) != len(self.dtypes):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"{self.kind} '{self.name}' expects {len(self.dtypes)} components, "
                f"got {len(components)}",
            )
        comps = [np.asarray(c) for c in components]
        for i, c in enumerate(comps):
            self._check_shape(i, c.shape, batched)
        if not batched:
            return [tuple(comps)]
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
        return list(zip(*comps)) if n else []

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

    def enqueue(self, step, elements: list, done) -> None:
        """Pushes `elements`; done() when all are in, done(None, error) if it cannot be."""
        ready = []
        with self.lock:
            # The common case needs no attempt: no enqueue waits before this one, the queue
            # is open and has room for all of it. It is pushed as the head attempt would be.
            fits = not self._enqueuers and not self.closed and len(elements) == 1
            if fits and self._has_room(elements[0]):
                self._push(elements[0])
                if self._dequeuers or self._peeks_wait():
                    self._flush(ready)
            else:
                fits = False
        if not fits:
            self._submit(step, _Attempt(_ENQUEUE, done, elements=elements))
            return
        _run(ready)
        done()

    def dequeue(self, step, n: int, done, batched: bool, allow_small: bool = False) -> None:
        """done(elements) with `n` elements (fewer only if allow_small and closed)."""
        self._submit(step, _Attempt(_DEQUEUE, done, n=n, allow_small=allow_small, batched=batched))

    def close(self, step, cancel_pending_enqueues: bool, done) -> None:
        if not cancel_pending_enqueues:
            self._submit(step, _Attempt(_CLOSE, done))
            return
        ready = []
        with self.lock:
            self.closed = True
            while self._enqueuers:
                a = self._enqueuers.popleft()
                ready.append((a, None, self._closed_error(a)))
            self._flush(ready)
        _run(ready)
        done()

    def _closed_error(self, a: _Attempt) -> errors.OpError:
        if a.kind == _CLOSE:
            return errors.CancelledError(None, None, f"Queue '{self.name}' is already closed.")
        return errors.CancelledError(None, None, f"{self.kind} '{self.name}' is closed.")

    def _submit(self, step, a: _Attempt) -> None:
        ready = []
        with self.lock:
            (self._dequeuers if a.kind == _DEQUEUE else self._enqueuers).append(a)
            self._flush(ready)
            pending = not any(r[0] is a for r in ready)
            if pending:
                a.hook = CancelHook(step, lambda error: self._cancel(a, error))
        _run(ready)
        if pending:
            a.hook.arm()

    def _cancel(self, a: _Attempt, error: errors.OpError) -> None:
        ready = []
        with self.lock:
            side = self._dequeuers if a.kind == _DEQUEUE else self._enqueuers
            if not any(x is a for x in side):
                return  # already served
            side.remove(a)
            if a.taken:
                self._restore(a.taken)
                a.taken = []
            self._flush(ready)
        _run(ready)
        a.done(None, error)

    def _flush(self, ready: list) -> None:
        """Serves head attempts while any makes progress; finished ones go to `ready`."""
        progress = True
        while progress:
            progress = self._serve_peeks(ready)
            while self._dequeuers:
                a = self._dequeuers[0]
                while len(a.taken) < a.n and self._can_pop():
                    a.taken.append(self._pop())
                    progress = True
                if len(a.taken) == a.n:
                    ready.append((self._dequeuers.popleft(), a.taken, None))
                    progress = True
                elif self.closed:
                    self._dequeuers.popleft()
                    progress = True
                    if a.allow_small and a.taken:
                        ready.append((a, a.taken, None))
                        continue
                    self._restore(a.taken)
                    a.taken = []
                    ready.append((a, None, self._insufficient(a)))
                else:
                    break
            while self._enqueuers:
                a = self._enqueuers[0]
                if self.closed:
                    ready.append((self._enqueuers.popleft(), None, self._closed_error(a)))
                    continue
                if a.kind == _CLOSE:
                    self.closed = True
                    ready.append((self._enqueuers.popleft(), None, None))
                    progress = True
                    continue
                while a.elements and self._has_room(a.elements[0]):
                    self._push(a.elements.popleft())
                    progress = True
                if a.elements:
                    break
                ready.append((self._enqueuers.popleft(), None, None))

    def _serve_peeks(self, ready: list) -> bool:
        """Peeks (StagingArea only) never change the queue: nothing to serve by default."""
        return False

    def _peeks_wait(self) -> bool:
        """Whether a peek waits for an element (StagingArea only)."""
        return False

    def _insufficient(self, a: _Attempt) -> errors.OpError:
        return errors.OutOfRangeError(
            None,
            None,
            f"{self.kind} '{self.name}' is closed and has insufficient elements "
            f"(requested {a.n}, current size {self._size()})",
        )


def _run(ready: list) -> None:
    """Calls the continuations of finished attempts (outside the queue's lock)."""
    for a, taken, error in ready:
        if a.hook is not None:
            a.hook.disarm()
        if error is not None:
            a.done(None, error)
        elif a.kind == _DEQUEUE:
            a.done(taken)
        else:
            a.done()


class FIFOQueue(QueueBase):
    """First in, first out."""

    kind = "FIFOQueue"

    def __init__(self, name, dtypes, shapes, capacity):
        super().__init__(name, dtypes, shapes, capacity)
        self._items: collections.deque = collections.deque()

    def _size(self):
        return len(self._items)

    def _push(self, element):
        self._items.append(element)

    def _pop(self):
        return self._items.popleft()

    def _restore(self, elements):
        self._items.extendleft(reversed(elements))


class PaddingFIFOQueue(FIFOQueue):
    """A FIFOQueue whose shapes may have unknown dimensions; a batch is padded with zeros (or
    empty strings) to the largest element in each dimension."""

    kind = "PaddingFIFOQueue"

    def check_batchable(self, op: str) -> None:
        if not self.shapes:
            raise errors.InvalidArgumentError(
                None, None, f"{self.kind} requires the components to have specified shapes."
            )

    def batch(self, elements):
        out = []
        for i, dtype in enumerate(self.dtypes):
            np_dtype = dtype.as_numpy_dtype
            dims = [0 if d is None else d for d in self.shapes[i].as_list()]
            for e in elements:
                dims = [max(a, b) for a, b in zip(dims, e[i].shape)]
            fill = b"" if np_dtype is object else 0
            arr = np.full((len(elements), *dims), fill, dtype=np_dtype)
            for k, e in enumerate(elements):
                arr[(k,) + tuple(slice(0, s) for s in e[i].shape)] = e[i]
            out.append(arr)
        return out


_BLOCK = 256  # random draws per Generator call of a RandomShuffleQueue


class RandomShuffleQueue(QueueBase):
    """Dequeues a uniformly random element, and only while more than `min_after_dequeue` remain
    (until closed), so consecutive dequeues mix elements from far apart in the input."""

    kind = "RandomShuffleQueue"

    def __init__(self, name, dtypes, shapes, capacity, min_after_dequeue, seed, seed2):
        super().__init__(name, dtypes, shapes, capacity)
        self.min_after_dequeue = min_after_dequeue
        self._items: list = []
        seeded = seed != 0 or seed2 != 0
        self._rng = np.random.default_rng([seed, seed2] if seeded else None)
        self._uniform: list = []  # uniforms in [0, 1) drawn in blocks, used from the end

    def _size(self):
        return len(self._items)

    def _push(self, element):
        self._items.append(element)

    def _can_pop(self):
        n = len(self._items)
        return n > self.min_after_dequeue or (self.closed and n > 0)

    def _pop(self):
        """A uniformly random element. One Generator call per element costs microseconds,
        more than the rest of a dequeue: uniforms come in blocks of _BLOCK (same seed, same
        order)."""
        items = self._items
        if not self._uniform:
            self._uniform = self._rng.random(_BLOCK).tolist()
        k = min(int(self._uniform.pop() * len(items)), len(items) - 1)
        items[k], items[-1] = items[-1], items[k]
        return items.pop()


class PriorityQueue(QueueBase):
    """Dequeues the element with the smallest priority first; equal priorities leave in arrival
    order. The priority is component 0, an int64 scalar, in front of the declared components."""

    kind = "PriorityQueue"

    def __init__(self, name, dtypes, shapes, capacity):
        super().__init__(name, dtypes, shapes, capacity)
        self._heap: list = []
        self._seq = itertools.count()

    def _size(self):
        return len(self._heap)

    def _push(self, element):
        heapq.heappush(self._heap, (int(element[0]), next(self._seq), element))

    def _pop(self):
        return heapq.heappop(self._heap)[2]


class StagingArea(FIFOQueue):
    """A FIFO buffer of tuples for staging tensors ahead of their use (TF's StagingArea): puts
    wait while `capacity` elements (0: unbounded) or `memory_limit` bytes are held, gets and
    `peek(index)` wait for an element. `_peekers` wait for the buffer to reach their index."""

    kind = "StagingArea"

    def __init__(self, name, dtypes, capacity, memory_limit):
        super().__init__(name, dtypes, [], capacity if capacity > 0 else -1)
        self.memory_limit = memory_limit
        self._bytes = 0  # guarded by lock
        self._peekers: list = []  # guarded by lock: (index, done, step hook holder)

    @staticmethod
    def _nbytes(element) -> int:
        return sum(np.asarray(c).nbytes for c in element)

    def _has_room(self, element) -> bool:
        if not super()._has_room(element):
            return False
        if self.memory_limit <= 0 or not self._items:
            return True
        return self._bytes + self._nbytes(element) <= self.memory_limit

    def _push(self, element):
        super()._push(element)
        self._bytes += self._nbytes(element)

    def _pop(self):
        element = super()._pop()
        self._bytes -= self._nbytes(element)
        return element

    def _restore(self, elements):
        super()._restore(elements)
        self._bytes += sum(self._nbytes(e) for e in elements)

    def clear(self) -> None:
        ready = []
        with self.lock:
            self._items.clear()
            self._bytes = 0
            self._flush(ready)
        _run(ready)

    def peek(self, step, index: int, done) -> None:
        """done(element) once the buffer holds more than `index` elements."""
        a = _Attempt(_DEQUEUE, done, n=index)
        ready = []
        with self.lock:
            self._peekers.append(a)
            self._flush(ready)
            pending = not any(r[0] is a for r in ready)
            if pending:
                a.hook = CancelHook(step, lambda error: self._cancel_peek(a, error))
        _run(ready)
        if pending:
            a.hook.arm()

    def _cancel_peek(self, a, error) -> None:
        with self.lock:
            if not any(x is a for x in self._peekers):
                return
            self._peekers.remove(a)
        a.done(None, error)

    def _peeks_wait(self) -> bool:
        return bool(self._peekers)

    def _serve_peeks(self, ready: list) -> bool:
        for a in [p for p in self._peekers if p.n < len(self._items)]:
            self._peekers.remove(a)
            ready.append((a, [self._items[a.n]], None))
        return False

"""How each kind of queue (§4.6) stores its elements; the waiting and serving is queue_base.py's.

FIFO queues keep the batches as they were enqueued (a deque of chunks with a read offset), so
enqueue_many stores a reference and dequeue_many slices. The RandomShuffleQueue keeps its
elements in one growable array per component and draws a whole dequeue_many's slots in one
compiled loop before gathering them with one take per component. The PriorityQueue keeps a heap
of one-element pieces, since every element has its own place in the order.
"""

from __future__ import annotations

import collections
import heapq
import itertools

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.cpu import loops
from flowgraph.kernels.cpu.queue_base import DEQUEUE, Attempt, QueueBase, rows, run_ready


class FIFOQueue(QueueBase):
    """First in, first out."""

    kind = "FIFOQueue"

    def __init__(self, name, dtypes, shapes, capacity):
        super().__init__(name, dtypes, shapes, capacity)
        self._chunks: collections.deque = collections.deque()  # [batch, lo, hi]: rows lo..hi-1
        self._n = 0

    def _size(self):
        return self._n

    def _put(self, batch, lo, hi):
        self._chunks.append([batch, lo, hi])
        self._n += hi - lo

    def _take(self, k, taken):
        self._n -= k
        while k:
            chunk = self._chunks[0]
            batch, lo, hi = chunk
            m = min(k, hi - lo)
            taken.append(tuple(c[lo : lo + m] for c in batch))
            if lo + m == hi:
                self._chunks.popleft()
            else:
                chunk[1] = lo + m
            k -= m

    def _restore(self, pieces):
        for p in reversed(pieces):
            n = rows(p)
            self._chunks.appendleft([p, 0, n])
            self._n += n

    def _piece_at(self, index: int) -> tuple:
        """The element at `index` (0: the next to leave) as a piece, left in the queue."""
        for batch, lo, hi in self._chunks:
            if index < hi - lo:
                return tuple(c[lo + index : lo + index + 1] for c in batch)
            index -= hi - lo
        raise IndexError(index)


class PaddingFIFOQueue(FIFOQueue):
    """A FIFOQueue whose shapes may have unknown dimensions; a batch is padded with zeros (or
    empty strings) to the largest element in each dimension."""

    kind = "PaddingFIFOQueue"

    def check_batchable(self, op: str) -> None:
        if not self.shapes:
            raise errors.InvalidArgumentError(
                None, None, f"{self.kind} requires the components to have specified shapes."
            )

    def batch(self, pieces):
        """Each piece's elements share one shape (it was one enqueue's tensor): pads pieces."""
        total = sum(rows(p) for p in pieces)
        out = []
        for i, dtype in enumerate(self.dtypes):
            np_dtype = dtype.as_numpy_dtype
            dims = [0 if d is None else d for d in self.shapes[i].as_list()]
            for p in pieces:
                dims = [max(a, b) for a, b in zip(dims, p[i].shape[1:])]
            fill = b"" if np_dtype is object else 0
            arr = np.full((total, *dims), fill, dtype=np_dtype)
            start = 0
            for p in pieces:
                c = p[i]
                arr[(slice(start, start + len(c)),) + tuple(slice(0, s) for s in c.shape[1:])] = c
                start += len(c)
            out.append(arr)
        return out


_BLOCK = 256  # random draws per Generator call of a RandomShuffleQueue


class RandomShuffleQueue(QueueBase):
    """Dequeues a uniformly random element, and only while more than `min_after_dequeue` remain
    (until closed), so consecutive dequeues mix elements from far apart in the input.

    Each dequeued element is drawn from the slots 0..n-1 and the last slot's element moves into
    the slot it leaves; a dequeue_many draws all its slots in one compiled loop
    (loops.shuffle_draw), then takes the elements and fills the holes with one array operation
    per component."""

    kind = "RandomShuffleQueue"

    def __init__(self, name, dtypes, shapes, capacity, min_after_dequeue, seed, seed2):
        super().__init__(name, dtypes, shapes, capacity)
        self.min_after_dequeue = min_after_dequeue
        shaped = bool(shapes) and all(s.is_fully_defined() for s in shapes)
        self._slots = _ArraySlots(self.dtypes, shapes) if shaped else _ListSlots()
        seeded = seed != 0 or seed2 != 0
        self._rng = np.random.default_rng([seed, seed2] if seeded else None)
        self._block = np.empty(0)  # uniforms in [0, 1), drawn _BLOCK at a time, used in order
        self._used = 0
        self._perm = np.arange(0)  # the identity, scratch space of shuffle_draw

    def _size(self):
        return self._slots.n

    def _put(self, batch, lo, hi):
        self._slots.append(batch, lo, hi)

    def batch(self, pieces):
        """A dequeue_many served at once took one piece, gathered from the slots into new
        arrays (_ArraySlots.remove): its components are the batch, not copied again."""
        if len(pieces) == 1 and isinstance(self._slots, _ArraySlots):
            return list(pieces[0])
        return super().batch(pieces)

    def _poppable(self):
        n = self._slots.n
        return n if self.closed else max(0, n - self.min_after_dequeue)

    def _take(self, k, taken):
        n = self._slots.n
        if len(self._perm) < n:
            self._perm = np.arange(max(n, 2 * len(self._perm)))
        ids, dst, src = (np.empty(k, np.int64) for _ in range(3))
        moves = loops.compiled("shuffle_draw")(self._uniforms(k), n, self._perm, ids, dst, src)
        self._slots.remove(ids, dst[:moves], src[:moves], n - k, taken)

    def _uniforms(self, k: int) -> np.ndarray:
        """The next `k` uniforms. One Generator call per element costs microseconds, more than
        the rest of a dequeue: they come in blocks of _BLOCK (same seed, same order)."""
        parts = []
        while k:
            if self._used == len(self._block):
                self._block, self._used = self._rng.random(_BLOCK)[::-1].copy(), 0
            m = min(k, len(self._block) - self._used)
            parts.append(self._block[self._used : self._used + m])
            self._used += m
            k -= m
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


class _ArraySlots:
    """A RandomShuffleQueue's elements as one array per component (fully defined shapes),
    grown by doubling; elements 0..n-1 are live."""

    def __init__(self, dtypes, shapes):
        self._data = [
            np.empty((0, *s.as_list()), dtype=d.as_numpy_dtype) for d, s in zip(dtypes, shapes)
        ]
        self.n = 0

    def append(self, batch, lo, hi):
        end = self.n + hi - lo
        if end > len(self._data[0]):
            size = max(end, 2 * len(self._data[0]), 16)
            for i, d in enumerate(self._data):
                grown = np.empty((size, *d.shape[1:]), dtype=d.dtype)
                grown[: self.n] = d[: self.n]
                self._data[i] = grown
        for d, c in zip(self._data, batch):
            d[self.n : end] = c[lo:hi]
        self.n = end

    def remove(self, ids, dst, src, n, taken):
        taken.append(tuple(d[ids] for d in self._data))
        for d in self._data:
            if len(dst):
                d[dst] = d[src]
            if d.dtype == object:
                d[n : self.n] = None  # strings dequeued are not kept alive by the queue
        self.n = n


class _ListSlots:
    """A RandomShuffleQueue's elements as one-element pieces in a list (when the queue has no
    fully defined shapes, elements may differ in shape)."""

    def __init__(self):
        self._items: list = []

    @property
    def n(self):
        return len(self._items)

    def append(self, batch, lo, hi):
        self._items.extend(tuple(c[j : j + 1] for c in batch) for j in range(lo, hi))

    def remove(self, ids, dst, src, n, taken):
        items = self._items
        taken.extend(items[i] for i in ids.tolist())
        for d, s in zip(dst.tolist(), src.tolist()):
            items[d] = items[s]
        del items[n:]


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

    def _put(self, batch, lo, hi):
        for j, priority in enumerate(batch[0][lo:hi].tolist(), lo):
            piece = tuple(c[j : j + 1] for c in batch)
            heapq.heappush(self._heap, (int(priority), next(self._seq), piece))

    def _take(self, k, taken):
        taken.extend(heapq.heappop(self._heap)[2] for _ in range(k))


class StagingArea(FIFOQueue):
    """A FIFO buffer of tuples for staging tensors ahead of their use (TF's StagingArea): puts
    wait while `capacity` elements (0: unbounded) or `memory_limit` bytes are held, gets and
    `peek(index)` wait for an element. `_peekers` wait for the buffer to reach their index."""

    kind = "StagingArea"

    def __init__(self, name, dtypes, capacity, memory_limit):
        super().__init__(name, dtypes, [], capacity if capacity > 0 else -1)
        self.memory_limit = memory_limit
        self._bytes = 0  # guarded by lock
        self._peekers: list = []  # guarded by lock: attempts whose `n` is the peeked index

    @staticmethod
    def _nbytes(pieces) -> int:
        return sum(c.nbytes for p in pieces for c in p)

    def _room(self, batch, lo):
        k = super()._room(batch, lo)
        if k <= 0 or self.memory_limit <= 0:
            return k
        if not self._n:
            return 1  # an element larger than the limit still passes through an empty area
        row = self._nbytes([tuple(c[lo : lo + 1] for c in batch)])
        return 1 if self._bytes + row <= self.memory_limit else 0

    def _put(self, batch, lo, hi):
        super()._put(batch, lo, hi)
        self._bytes += self._nbytes([tuple(c[lo:hi] for c in batch)])

    def _take(self, k, taken):
        first = len(taken)
        super()._take(k, taken)
        self._bytes -= self._nbytes(taken[first:])

    def _restore(self, pieces):
        super()._restore(pieces)
        self._bytes += self._nbytes(pieces)

    def clear(self) -> None:
        ready = []
        with self.lock:
            self._chunks.clear()
            self._n = 0
            self._bytes = 0
            self._flush(ready)
        run_ready(ready)

    def peek(self, step, index: int, done) -> None:
        """done(element) once the buffer holds more than `index` elements."""
        self._park(step, Attempt(DEQUEUE, done, n=index), self._peekers, self._cancel_peek)

    def _cancel_peek(self, a, error) -> None:
        with self.lock:
            if not any(x is a for x in self._peekers):
                return
            self._peekers.remove(a)
        a.done(None, error)

    def _peeks_wait(self) -> bool:
        return bool(self._peekers)

    def _serve_peeks(self, ready: list) -> bool:
        for a in [p for p in self._peekers if p.n < self._n]:
            self._peekers.remove(a)
            ready.append((a, [self._piece_at(a.n)], None))
        return False

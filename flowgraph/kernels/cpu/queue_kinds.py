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
import math

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
    the slot it leaves. A dequeue_many is one compiled call (loops.shuffle_take) that draws its
    slots, gathers the elements into the output batch and fills the holes for every component;
    the uniforms and the scratch of the draws are kept across calls: the trainer's thread runs
    this every step, and the input threads' Python is what the step pays (bench I2)."""

    kind = "RandomShuffleQueue"

    def __init__(self, name, dtypes, shapes, capacity, min_after_dequeue, seed, seed2):
        super().__init__(name, dtypes, shapes, capacity)
        self.min_after_dequeue = min_after_dequeue
        shaped = bool(shapes) and all(s.is_fully_defined() for s in shapes)
        self._slots = _ArraySlots(self.dtypes, shapes) if shaped else _ListSlots()
        seeded = seed != 0 or seed2 != 0
        self._rng = np.random.default_rng([seed, seed2] if seeded else None)
        self._block = np.empty(0)  # uniforms in [0, 1), used in order from _used on
        self._used = 0
        # The draws' scratch, rows perm (the identity between draws), ids, dst, src.
        self._scratch = np.zeros((4, 0), np.int64)

    def _size(self):
        return self._slots.n

    def _put(self, batch, lo, hi):
        self._slots.append(batch, lo, hi)

    def batch(self, pieces):
        """A dequeue_many served at once took one piece, gathered from the slots into new
        arrays (_ArraySlots.take): its components are the batch, not copied again."""
        if len(pieces) == 1 and self._slots.gathers:
            return pieces[0]
        return super().batch(pieces)

    def _poppable(self):
        n = self._slots.n
        return n if self.closed else max(0, n - self.min_after_dequeue)

    def _floor(self):
        return self.min_after_dequeue

    def _take(self, k, taken):
        n = self._slots.n
        if self._scratch.shape[1] < n:
            self._scratch = np.empty((4, max(n, 2 * self._scratch.shape[1])), np.int64)
            self._scratch[0] = np.arange(self._scratch.shape[1])
        self._slots.take(self._uniforms(k), n, self._scratch, taken)

    def _uniforms(self, k: int) -> np.ndarray:
        """The next `k` uniforms. One Generator call per element costs microseconds, more than
        the rest of a dequeue: they come in blocks of _BLOCK, each used from its end (the
        order the seeded tests pin)."""
        used = self._used
        if used + k > len(self._block):
            blocks = [self._block[used:]]
            have = len(blocks[0])
            while have < k:
                blocks.append(self._rng.random(_BLOCK)[::-1])
                have += _BLOCK
            self._block, used = np.concatenate(blocks), 0
        self._used = used + k
        return self._block[used : used + k]


_ALIGN = 64  # byte alignment of each component's slots and of its part of an output batch


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


class _ArraySlots:
    """A RandomShuffleQueue's elements as one array per component (fully defined shapes),
    grown by doubling; elements 0..n-1 are live.

    The arrays are views of one byte buffer, so that loops.shuffle_take moves the elements of
    every component, whatever its dtype, as rows of bytes in one call; a dequeue's output batch
    is likewise one byte buffer the outputs view. Strings are objects, not bytes: a queue with
    a string component keeps separate arrays and moves elements with NumPy (`_bytes` False)."""

    gathers = True  # take's piece is made of new arrays: the batch itself

    def __init__(self, dtypes, shapes):
        self._dtypes = [np.dtype(d.as_numpy_dtype) for d in dtypes]
        self._tails = [tuple(s.as_list()) for s in shapes]
        self._widths = [d.itemsize * math.prod(t) for d, t in zip(self._dtypes, self._tails)]
        self._bytes = all(d != object for d in self._dtypes)
        self._data = [np.empty((0, *t), d) for d, t in zip(self._dtypes, self._tails)]
        self._at: list = [0] * len(self._data)  # where each component's slots start in _buf
        self._buf = np.empty(0, np.uint8)
        self._outs: dict = {}  # k -> (layout for shuffle_take, bytes, output shapes and starts)
        self.n = 0

    def append(self, batch, lo, hi):
        end = self.n + hi - lo
        if end > len(self._data[0]):
            self._grow(max(end, 2 * len(self._data[0]), 16))
        n = self.n
        for d, c in zip(self._data, batch):
            d[n:end] = c if lo == 0 and hi == len(c) else c[lo:hi]
        self.n = end

    def _grow(self, size: int) -> None:
        if self._bytes:
            ends = itertools.accumulate((_aligned(size * w) for w in self._widths), initial=0)
            self._at = list(ends)
            self._buf = np.empty(self._at.pop(), np.uint8)
            self._outs.clear()
        for i, (d, t, at) in enumerate(zip(self._dtypes, self._tails, self._at)):
            shape = (size, *t)
            grown = np.ndarray(shape, d, self._buf, at) if self._bytes else np.empty(shape, d)
            grown[: self.n] = self._data[i][: self.n]
            self._data[i] = grown

    def _out(self, k: int) -> tuple:
        """How a k-element output batch lies in its buffer (made once per k and size)."""
        out = self._outs.get(k)
        if out is None:
            to = list(itertools.accumulate((_aligned(k * w) for w in self._widths), initial=0))
            layout = np.array(list(zip(self._widths, self._at, to)), np.int64).reshape(-1, 3)
            views = [((k, *t), d, o) for d, t, o in zip(self._dtypes, self._tails, to)]
            out = self._outs[k] = (layout, to[-1], views)
        return out

    def take(self, uniforms, n, scratch, taken: list) -> None:
        """Draws len(uniforms) elements of the n live ones into `taken`: one piece of them,
        in draw order."""
        k = len(uniforms)
        if self._bytes:
            layout, size, views = self._out(k)
            buf = np.empty(size, np.uint8)
            loops.compiled("shuffle_take")(uniforms, n, scratch, self._buf, buf, layout)
            taken.append(tuple([np.ndarray(s, d, buf, o) for s, d, o in views]))
        else:
            perm, ids, dst, src = scratch
            moves = loops.compiled("shuffle_draw")(uniforms, n, perm, ids, dst, src)
            taken.append(tuple(d[ids[:k]] for d in self._data))
            for d in self._data:
                d[dst[:moves]] = d[src[:moves]]
                if d.dtype == object:
                    d[n - k : n] = None  # strings dequeued are not kept alive by the queue
        self.n = n - k


class _ListSlots:
    """A RandomShuffleQueue's elements as one-element pieces in a list (when the queue has no
    fully defined shapes, elements may differ in shape)."""

    gathers = False

    def __init__(self):
        self._items: list = []

    @property
    def n(self):
        return len(self._items)

    def append(self, batch, lo, hi):
        self._items.extend(tuple(c[j : j + 1] for c in batch) for j in range(lo, hi))

    def take(self, uniforms, n, scratch, taken: list) -> None:
        """Draws len(uniforms) elements into `taken`: one piece each, in draw order."""
        k = len(uniforms)
        perm, ids, dst, src = scratch
        moves = loops.compiled("shuffle_draw")(uniforms, n, perm, ids, dst, src)
        items = self._items
        taken.extend(items[i] for i in ids[:k].tolist())
        for d, s in zip(dst[:moves].tolist(), src[:moves].tolist()):
            items[d] = items[s]
        del items[n - k :]


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

    def _serve_peeks(self, ready: list) -> bool:
        for a in [p for p in self._peekers if p.n < self._n]:
            self._peekers.remove(a)
            ready.append((a, [self._piece_at(a.n)], None))
        return False

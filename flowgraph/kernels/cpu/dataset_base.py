"""The machinery of `tf.data` kernels (whitepaper §4.5 input nodes, §5.3 asynchronous kernels).

A dataset op outputs a DT_VARIANT scalar holding a `Dataset`: an immutable description of a
sequence of elements (a tuple of NumPy arrays, one per component). `Dataset.make_iterator`
makes an `Iterator`, whose state walks that sequence. Iterators are composed from their inputs'
iterators, and each produces its next element with `async def get_next()`, returning None at
the end of the sequence.

Why coroutines: some iterators must wait for work done elsewhere (a prefetch buffer filled in
the background, a parallel map's calls in flight). A waiting iterator awaits a `Pending`; the
whole chain of coroutines is then suspended and the thread that drove it is released, and the
chain resumes on the thread that completes the Pending. No thread is parked (§5.3). An iterator
chain that never waits runs as plain nested calls: `drive` returns its result at once.

Background work (prefetching, parallel calls) runs on one pool shared by the dataset kernels:
kept apart from the devices' inter-op pools, whose tasks may wait for each other. Its tasks never
wait for each other either, so it is a plain queue of callables: a prefetch restarts its
producer once per element a training step takes, and a ThreadPoolExecutor's Future and work
item cost that step ~10 us of its own thread (issue 11, bench I2d).
"""

from __future__ import annotations

import os
import queue
import threading

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.kernels.base import library_of
from flowgraph.kernels.cpu.dataset_runs import Packed, Run

AUTOTUNE = -1
_pool = None
_pool_lock = threading.Lock()


def background_pool() -> BackgroundPool:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = BackgroundPool(max(4, os.cpu_count() or 1), "tf_data")
    return _pool


class BackgroundPool:
    """Up to `size` daemon workers taking callables from one queue, started as needed. As in
    a ThreadPoolExecutor, a submit claims an idle worker or starts one; a worker is counted
    idle from the end of a task on (a heuristic: it may run an unclaimed task meanwhile).
    Counts guarded by `_lock`."""

    def __init__(self, size: int, prefix: str):
        self._queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._size, self._prefix = size, prefix
        self._workers = 0
        self._idle = 0

    def submit(self, fn) -> None:
        """Runs `fn()` on a worker. An exception it raises ends that worker (reported by
        threading.excepthook); tasks handle their errors themselves."""
        self._queue.put(fn)
        with self._lock:
            if self._idle:
                self._idle -= 1
                return
            if self._workers >= self._size:
                return
            self._workers += 1
            n = self._workers
        threading.Thread(target=self._work, name=f"{self._prefix}_{n - 1}", daemon=True).start()

    def _work(self) -> None:
        take, lock = self._queue.get, self._lock
        try:
            while True:
                take()()
                with lock:
                    self._idle += 1
        finally:
            with lock:
                self._workers -= 1


class Pending:
    """A value that another thread will provide. `await pending` suspends the coroutine chain
    until `set_result` or `set_error`; callbacks run in the thread that completes it."""

    __slots__ = ("_callbacks", "_done", "_error", "_lock", "_value")

    def __init__(self):
        self._lock = threading.Lock()
        self._done = False
        self._value = None
        self._error = None
        self._callbacks = []  # guarded by _lock

    def __await__(self):
        if not self._done:
            yield self
        if self._error is not None:
            raise self._error
        return self._value

    @property
    def done(self) -> bool:
        return self._done

    def set_result(self, value=None, error=None) -> None:
        with self._lock:
            if self._done:
                return
            self._value, self._error, self._done = value, error, True
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb()

    def set_error(self, error) -> None:
        self.set_result(None, error)

    def add_callback(self, cb) -> bool:
        """Registers `cb()`; False (and no registration) when the value is already there."""
        with self._lock:
            if self._done:
                return False
            self._callbacks.append(cb)
            return True


class Finished:
    """The outcome of a coroutine that completed."""

    __slots__ = ("error", "value")

    def __init__(self, value, error):
        self.value = value
        self.error = error


def drive(coro, done) -> Finished | None:
    """Runs `coro` until it finishes or waits. Returns a `Finished` if it finished without
    waiting (and then `done` is never called); otherwise returns None and calls
    `done(value, error)` from whichever thread completes it."""

    def advance():
        while True:
            try:
                pending = coro.send(None)
            except StopIteration as stop:
                return Finished(stop.value, None)
            except BaseException as e:  # noqa: BLE001 (handed to the consumer)
                return Finished(None, e)
            if pending.add_callback(resume):
                return None

    def resume():
        result = advance()
        if result is not None:
            done(result.value, result.error)

    return advance()


def run_to_end(coro):
    """Runs a coroutine that is known not to wait (tests, synchronous sources)."""
    result = drive(coro, None)
    if result is None:
        raise errors.InternalError(None, None, "a synchronous iterator waited")
    if result.error is not None:
        raise result.error
    return result.value


class Env:
    """What iterators need from the kernel that made them: the device (functions, pools)."""

    __slots__ = ("device",)

    def __init__(self, device):
        self.device = device


class Dataset:
    """An immutable sequence description. Subclasses implement `make_iterator(env)`."""

    def __init__(self, output_types, output_shapes):
        self.output_types = list(output_types)
        self.output_shapes = list(output_shapes)

    def make_iterator(self, env: Env) -> Iterator:
        raise NotImplementedError

    def __repr__(self):
        return f"<{type(self).__name__} {[t.name for t in self.output_types]}>"


class Iterator:
    """The state of one pass over a dataset.

    `get_many` serves consumers that take many elements at once (batch, and the iterators
    between a batch and its source): subclasses that can produce a run more cheaply than
    element by element override it, and must yield exactly the elements, in exactly the order,
    that as many calls of `get_next` would (dataset_runs.py says why runs exist)."""

    _deferred = None  # an error met after a partial run was read: the next call raises it

    async def get_next(self):
        """The next element (a tuple of arrays), or None at the end of the sequence."""
        raise NotImplementedError

    async def get_many(self, n: int) -> Run | None:
        """A Run of the next 1 to `n` elements, or None at the end of the sequence. Fewer than
        `n` do not mean the end. An error after some elements were read returns those first
        and is raised by the next call, so that no element is lost to it."""
        self.raise_deferred()
        elements = []
        try:
            while len(elements) < n:
                element = await self.get_next()
                if element is None:
                    break
                elements.append(element)
        except Exception as e:
            if not elements:
                raise
            self._deferred = e
        return Run.of_elements(elements) if elements else None

    async def get_ahead(self, k: int) -> list:
        """The outcomes of the next 1 to `k` get_next calls, in order, for a consumer that
        buffers them (a prefetch): (element, None) or (None, error) each; [] at the end.
        Iterators that produce several elements for less than as many passes through their
        chain override it (a parse-only map over a batch: one read and one parse of `k`
        batches' records); this one produces one, raising its error."""
        element = await self.get_next()
        return [] if element is None else [(element, None)]

    def take_packed(self, n: int) -> Packed | None:
        """Exactly the next `n` elements (of one string component) as one Packed, where this
        iterator has them ready without a pass through its input's runs (a shuffle's steady
        state over a TFRecord source: dataset_shuffle.py); None, with nothing consumed,
        otherwise (then get_many gives them). A batch asks for its elements so first."""
        return None

    def take_span(self, n: int) -> Packed | None:
        """Exactly the next `n` records as a Packed of their bounds in the buffer where they
        lie in order (from the first's start to the last's end: a TFRecord source's cut
        ahead), where they are ready; None, with nothing consumed, otherwise."""
        return None

    def poll(self) -> tuple | None:
        """(element, error) of the next get_next when it is ready without running the chain
        (a prefetch's buffer), else None: a consumer then calls get_next. Lets IteratorGetNext
        take a ready element without a coroutine or a cancellation hook."""
        return None

    def raise_deferred(self) -> None:
        error = self._deferred
        if error is not None:
            self._deferred = None
            raise error

    def close(self) -> None:
        """Stops background work (re-initialization, container reset)."""


def check_dataset(value, what: str = "input_dataset") -> Dataset:
    if not isinstance(value, Dataset):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"{what} must be a dataset (a DT_VARIANT from a dataset op), got "
            f"{type(value).__name__}",
        )
    return value


def scalar(value, name: str) -> int:
    arr = np.asarray(value)
    if arr.ndim != 0:
        raise errors.InvalidArgumentError(
            None, None, f"{name} must be a scalar, got shape {list(arr.shape)}"
        )
    return arr.item()


class ElementCheck:
    """Checks a function's results against the declared component types and shapes; the
    common cases (exact dtype; a fully defined shape, or one whose only unknown dimension is
    the first, as a batch's) cost a comparison or two per component."""

    __slots__ = ("known", "numpy", "shapes", "types", "what")

    def __init__(self, types, shapes, what: str):
        self.types = list(types)
        self.shapes = list(shapes)
        self.numpy = [t.as_numpy_dtype if t != dtypes.variant else None for t in self.types]
        self.known = [_known_part(s) for s in self.shapes]
        self.what = what

    def __call__(self, element) -> tuple:
        return tuple(element) if self.passes(element) else self._slow(element)

    def passes(self, element) -> bool:
        """Whether `element` is as declared by the common cases' test (False: ask __call__)."""
        if len(element) != len(self.types):
            return False
        for v, want, known in zip(element, self.numpy, self.known):
            if (
                want is None
                or known is None
                or not isinstance(v, (np.ndarray, np.generic))
                or v.dtype != want
                or len(v.shape) != known[0]
                or v.shape[known[1] :] != known[2]
            ):
                return False
        return True

    def _slow(self, element) -> tuple:
        if len(element) != len(self.types):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"{self.what}: {len(element)} components returned, {len(self.types)} expected",
            )
        return check_element(element, self.types, self.shapes, self.what)


def _known_part(shape):
    """(rank, start, shape[start:]) where the dimensions from `start` (0 or 1) are all known;
    None if the rank or a later dimension is unknown."""
    dims = shape.as_list() if shape.rank is not None else None
    if dims is None:
        return None
    start = 1 if dims and dims[0] is None else 0
    if None in dims[start:]:
        return None
    return len(dims), start, tuple(dims[start:])


def check_element(element, types, shapes, what: str) -> tuple:
    """A function's results as an element: dtypes as declared, shapes compatible."""
    out = []
    for i, (v, t, s) in enumerate(zip(element, types, shapes)):
        if t == dtypes.variant:
            out.append(v)
            continue
        arr = np.asarray(v)
        want = t.as_numpy_dtype
        if arr.dtype != want and not (t == dtypes.string and arr.dtype.kind in "OSU"):
            raise errors.InvalidArgumentError(
                None, None, f"{what}: component {i} has dtype {arr.dtype}, expected {t.name}"
            )
        if s is not None and not s.is_compatible_with(arr.shape):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"{what}: component {i} has shape {list(arr.shape)}, incompatible with the "
                f"declared shape {s}",
            )
        out.append(arr)
    return tuple(out)


class Function:
    """A library function applied by a dataset: its body on the iterator's device and the
    captured values (`other_arguments`) appended to every call."""

    __slots__ = ("captured", "func", "name")

    def __init__(self, func, captured):
        self.func = func
        self.name = func.name
        self.captured = list(captured)

    def instantiate(self, env: Env):
        return _Bound(library_of(env.device).instantiate(self.func, env.device), self.captured)


class _Bound:
    __slots__ = ("body", "captured")

    def __init__(self, body, captured):
        self.body = body
        self.captured = captured

    def __call__(self, element) -> list:
        return self.body(list(element) + self.captured)

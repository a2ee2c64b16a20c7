"""Gradient accumulators (whitepaper §4.6: queues "accumulate many gradients in order to compute
some more complex combination of gradients over a larger batch"), a Barrier, and the staging
area's kernels. All are resources in the device's containers; take_grad, take_many, get and
peek are async kernels (§5.3) that leave a continuation when they must wait.

A ConditionalAccumulator sums gradients whose local_step is not older than its global step
(stale ones are dropped); take_grad(n) waits for n of them, returns their mean (or sum), resets
and advances the global step. The sparse accumulator does the same per row of IndexedSlices.
A Barrier joins components inserted separately under one key; complete elements move to a
ready PriorityQueue ordered by the time their key first arrived.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.core.shapes import TensorShape
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu import queue_kinds
from flowgraph.kernels.cpu.blocking import CancelHook

_log = logging.getLogger(__name__)


def _invalid(msg):
    return errors.InvalidArgumentError(None, None, msg)


def _handle(value):
    return value.item() if isinstance(value, np.ndarray) and value.dtype == object else value


class Accumulator:
    """Dense or sparse gradient sums. `lock` guards every field."""

    def __init__(self, name, dtype, shape: TensorShape, reduction: str, sparse: bool):
        self.name, self.dtype, self.shape, self.reduction = name, dtype, shape, reduction
        self.sparse = sparse
        self.lock = threading.Lock()
        self.global_step = 0
        self.count = 0
        self.sum = None  # dense: array; sparse: {row index: (sum of rows, count)}
        self.row_shape = ()  # sparse: the values' trailing dimensions since the last take
        self.takers: collections.deque = collections.deque()  # [need, done, hook], in order

    def _check_shape(self, shape: tuple) -> None:
        if self.sum is not None and self.sum.shape != shape:
            raise _invalid(f"Shape mismatch: expected {list(self.sum.shape)}, got {list(shape)}")
        if not self.shape.is_compatible_with(shape):
            raise _invalid(f"Shape mismatch: expected {self.shape}, got {list(shape)}")

    def _check_sparse(self, indices, values, grad_shape) -> None:
        """TF's SparseConditionalAccumulator::ValidateShape: the declared shape constrains the
        given dense shape, the row indices and the values' trailing dimensions."""
        dims = self.shape.as_list() if self.shape.ndims is not None else []
        if grad_shape is not None:
            if len(dims) > len(grad_shape):
                raise _invalid(
                    f"Shape mismatch: expected shape rank at least {len(dims)}, "
                    f"got {len(grad_shape)}"
                )
            for i, d in enumerate(dims):
                if d is not None and d != grad_shape[i]:
                    raise _invalid(
                        f"Shape mismatch: expected shape dim {i} to be {d}, got {grad_shape[i]}"
                    )
        if dims and dims[0] is not None:
            for i, row in enumerate(indices.tolist()):
                if row >= dims[0]:
                    raise _invalid(
                        f"Shape mismatch: index of slice {i} exceeded limits of shape; "
                        f"index is {row} exceeded {dims[0]}"
                    )
        if self.sum is not None:
            want = self.row_shape
            if len(want) + 1 != values.ndim:
                raise _invalid(
                    f"Shape mismatch: expected values rank {len(want) + 1}, got {values.ndim}"
                )
            for i, d in enumerate(want, start=1):
                if values.shape[i] != d:
                    raise _invalid(
                        f"Shape mismatch: expected values dim {i} to be {d}, got {values.shape[i]}"
                    )
            return
        if len(dims) > values.ndim:
            raise _invalid(
                f"Shape mismatch: expected values rank at least {len(dims)}, got {values.ndim}"
            )
        for i in range(1, len(dims)):
            if dims[i] is not None and dims[i] != values.shape[i]:
                raise _invalid(
                    f"Shape mismatch: expected values dim {i} to be {dims[i]}, "
                    f"got {values.shape[i]}"
                )

    def apply(self, local_step: int, grad=None, indices=None, values=None, grad_shape=None):
        """Adds a gradient unless stale; returns the continuations it completes. A sparse one
        is (indices, values) and the dense shape if known."""
        with self.lock:
            if local_step < self.global_step:
                return []  # a stale gradient is dropped, as in TensorFlow
            if self.sparse:
                self._check_sparse(indices, values, grad_shape)
                if self.sum is None:
                    self.row_shape = tuple(values.shape[1:])
                rows = self.sum if self.sum is not None else {}
                for i, v in zip(np.asarray(indices).tolist(), np.asarray(values)):
                    old = rows.get(i)
                    rows[i] = (
                        (v.astype(self.dtype.as_numpy_dtype), 1)
                        if old is None
                        else (old[0] + v, old[1] + 1)
                    )
                self.sum = rows
            else:
                grad = np.asarray(grad, dtype=self.dtype.as_numpy_dtype)
                self._check_shape(grad.shape)
                self.sum = grad.copy() if self.sum is None else self.sum + grad
            self.count += 1
            return self._serve()

    def _result(self):
        mean = self.reduction == "MEAN"
        if not self.sparse:
            out = self.sum / self.count if mean else self.sum
            return out.astype(self.dtype.as_numpy_dtype, copy=False)
        rows = sorted(self.sum.items())
        indices = np.array([i for i, _ in rows], dtype=np.int64)
        values = np.empty((len(rows),) + self.row_shape, self.dtype.as_numpy_dtype)
        for k, (_, (total, n)) in enumerate(rows):
            values[k] = total / n if mean else total
        # Dimension 0 is the declared one (-1 if unknown); the others are the values' own.
        dims = self.shape.as_list() if self.shape.ndims is not None else []
        first = dims[0] if dims and dims[0] is not None else -1
        shape = np.array((first,) + self.row_shape, dtype=np.int64)
        return indices, values, shape

    def _serve(self) -> list:
        done = []
        while self.takers and self.count >= self.takers[0][0]:
            _, cont, hook = self.takers.popleft()
            result = self._result()
            self.sum, self.count = None, 0
            self.global_step += 1
            done.append((cont, hook, result))
        return done

    def take(self, step, n: int, done) -> None:
        if n < 1:
            raise _invalid(f"Argument num_required must be positive, but was {n}")
        entry = [n, done, None]
        with self.lock:
            self.takers.append(entry)
            ready = self._serve()
            if any(x is entry for x in self.takers):
                entry[2] = CancelHook(step, lambda error: self.cancel(entry, error))
        _finish(ready)
        if entry[2] is not None:
            entry[2].arm()

    def cancel(self, entry, error) -> None:
        with self.lock:
            if not any(x is entry for x in self.takers):
                return
            self.takers.remove(entry)
        entry[1](None, error)

    def set_global_step(self, step: int) -> None:
        """Sets the step even when it goes back (a chief restored from an older checkpoint),
        with a warning, as TensorFlow does."""
        with self.lock:
            if step < self.global_step:
                _log.warning(
                    "Attempt to set current_global_step_ to smaller value: "
                    "current_global_step_ = %d >= %d = new_global_step.",
                    self.global_step,
                    step,
                )
            self.global_step = step


def _finish(ready) -> None:
    for cont, hook, result in ready:
        if hook is not None:
            hook.disarm()
        cont(result)


def _accumulator(ctx, sparse: bool) -> Accumulator:
    a = ctx.attrs
    name = a["shared_name"] or ctx.name
    acc = ctx.resources.lookup_or_create(
        a["container"],
        name,
        lambda: Accumulator(name, a["dtype"], TensorShape(a["shape"]), a["reduction_type"], sparse),
    )
    if acc.dtype != a["dtype"] or acc.sparse != sparse:
        raise _invalid(f"Shared accumulator '{name}' has a different dtype or kind")
    return acc


register_kernel("ResourceConditionalAccumulator")(lambda ctx: _accumulator(ctx, False))
register_kernel("ConditionalAccumulator")(lambda ctx: _accumulator(ctx, False))
register_kernel("SparseConditionalAccumulator")(lambda ctx: _accumulator(ctx, True))


def _apply(ctx, acc, local_step, gradient):
    acc = _handle(acc)
    _finish(acc.apply(int(local_step), grad=gradient))


def _take(ctx, step, done, acc, num_required):
    _handle(acc).take(step, int(num_required), done)


@register_kernel("SparseAccumulatorApplyGradient")
def sparse_apply(ctx, acc, local_step, indices, values, shape):
    acc = _handle(acc)
    values, indices = np.asarray(values), np.asarray(indices).reshape(-1)
    if values.ndim < 1 or len(indices) != len(values):
        raise _invalid("Shape mismatch: gradient_indices and gradient_values differ in length")
    grad_shape = [int(d) for d in np.asarray(shape)] if ctx.attrs["has_known_shape"] else None
    _finish(acc.apply(int(local_step), indices=indices, values=values, grad_shape=grad_shape))


register_kernel("SparseAccumulatorTakeGradient", async_=True)(_take)
for _v in ("Resource", ""):
    register_kernel(f"{_v}AccumulatorApplyGradient")(_apply)
    register_kernel(f"{_v}AccumulatorTakeGradient", async_=True)(_take)
    register_kernel(f"{_v}AccumulatorNumAccumulated")(lambda ctx, acc: np.int32(_handle(acc).count))
    register_kernel(f"{_v}AccumulatorSetGlobalStep")(
        lambda ctx, acc, step: _handle(acc).set_global_step(int(step))
    )


# -- Barrier ---------------------------------------------------------------------------------------
class Barrier:
    """Keys whose components arrive separately. `lock` guards `incomplete` and `closed`."""

    def __init__(self, name, types, shapes):
        self.name, self.types, self.shapes = name, list(types), list(shapes)
        self.lock = threading.Lock()
        self.incomplete: dict = {}  # key -> (first-arrival index, [component or None])
        self.closed = False
        self.cancelled = False
        self._time = itertools.count()
        # Ready elements: (index, key, *components), smallest index first.
        self.ready = queue_kinds.PriorityQueue(
            name,
            [dtypes.int64, dtypes.string] + self.types,
            [TensorShape([]), TensorShape([])] + self.shapes,
            -1,
        )

    def insert_many(self, step, index: int, keys, values) -> None:
        if not 0 <= index < len(self.types):
            raise _invalid(f"Barrier '{self.name}': component index {index} out of range")
        keys = np.asarray(keys, dtype=object).reshape(-1)
        values = np.asarray(values)
        if len(values) != len(keys):
            raise _invalid("Keys and values must have the same first dimension")
        complete = []
        with self.lock:
            for key, value in zip(keys.tolist(), values):
                value = np.asarray(value, dtype=values.dtype)
                entry = self.incomplete.get(key)
                if entry is None:
                    if self.closed:
                        raise errors.CancelledError(
                            None,
                            None,
                            f"Barrier '{self.name}' is closed, but attempted to insert "
                            f"a brand new key: {key!r}",
                        )
                    entry = self.incomplete[key] = (next(self._time), [None] * len(self.types))
                if entry[1][index] is not None:
                    raise _invalid(
                        f"Inserting a duplicate value for key {key!r}, component {index}"
                    )
                entry[1][index] = value
                if all(c is not None for c in entry[1]):
                    del self.incomplete[key]
                    key_array = np.array(key, dtype=object)
                    complete.append((np.int64(entry[0]), key_array, *entry[1]))
        if complete:
            batch = tuple(np.stack(column) for column in zip(*complete))
            self.ready.enqueue(step, batch, lambda *a: None)
        with self.lock:
            if self.closed and not self.incomplete:
                self._close_ready(step)

    def _close_ready(self, step) -> None:
        self.ready.close(step, True, lambda *a: None)

    def close(self, step, cancel_pending: bool) -> None:
        with self.lock:
            self.closed = True
            if cancel_pending:
                self.incomplete.clear()
            done = not self.incomplete
        if done:
            self._close_ready(step)

    def incomplete_size(self) -> int:
        with self.lock:
            return len(self.incomplete)


@register_kernel("Barrier")
def barrier(ctx):
    a = ctx.attrs
    name = a["shared_name"] or ctx.name
    shapes = [TensorShape(s) for s in a["shapes"]]
    return ctx.resources.lookup_or_create(
        a["container"], name, lambda: Barrier(name, a["component_types"], shapes)
    )


@register_kernel("BarrierInsertMany", step=True)
def barrier_insert_many(ctx, step, b, keys, values):
    _handle(b).insert_many(step, ctx.attrs["component_index"], keys, values)


@register_kernel("BarrierTakeMany", async_=True)
def barrier_take_many(ctx, step, done, b, num_elements):
    a = ctx.attrs
    if a["timeout_ms"] != -1:
        raise _invalid("Timeout not supported yet.")
    if a["wait_for_incomplete"]:
        raise errors.UnimplementedError(None, None, "BarrierTakeMany(wait_for_incomplete=True)")
    b = _handle(b)
    n = int(num_elements)

    def on_done(pieces=None, error=None):
        if error is not None:
            if isinstance(error, errors.OutOfRangeError):
                error = errors.OutOfRangeError(
                    None,
                    None,
                    f"Barrier '{b.name}' is closed and has insufficient elements "
                    f"(requested {n}, total size {b.ready.size()})",
                )
            done(None, error)
            return
        done(tuple(b.ready.batch(pieces)))

    b.ready.dequeue(step, n, on_done, allow_small=a["allow_small_batch"])


@register_kernel("BarrierClose", step=True)
def barrier_close(ctx, step, b):
    _handle(b).close(step, ctx.attrs["cancel_pending_enqueues"])


register_kernel("BarrierReadySize")(lambda ctx, b: np.int32(_handle(b).ready.size()))
register_kernel("BarrierIncompleteSize")(lambda ctx, b: np.int32(_handle(b).incomplete_size()))


# -- StagingArea ----------------------------------------------------------------------------------
def _staging(ctx) -> queue_kinds.StagingArea:
    a = ctx.attrs
    name = a["shared_name"] or ctx.name
    return ctx.resources.lookup_or_create(
        a["container"],
        name,
        lambda: queue_kinds.StagingArea(name, a["dtypes"], a["capacity"], a["memory_limit"]),
    )


def _values(pieces):
    values = queue_kinds.StagingArea.element(pieces)
    return values[0] if len(values) == 1 else values


@register_kernel("Stage", async_=True)
def stage(ctx, step, done, *values):
    area = _staging(ctx)
    area.enqueue(step, tuple(np.asarray(v)[np.newaxis] for v in values), done)


@register_kernel("Unstage", async_=True)
def unstage(ctx, step, done):
    def on_done(pieces=None, error=None):
        done(None, error) if error is not None else done(_values(pieces))

    _staging(ctx).dequeue(step, 1, on_done)


@register_kernel("StagePeek", async_=True)
def stage_peek(ctx, step, done, index):
    def on_done(pieces=None, error=None):
        done(None, error) if error is not None else done(_values(pieces))

    i = int(index)
    if i < 0:
        raise _invalid(f"index must be >= 0, got {i}")
    _staging(ctx).peek(step, i, on_done)


register_kernel("StageSize")(lambda ctx: np.int32(_staging(ctx).size()))
register_kernel("StageClear")(lambda ctx: _staging(ctx).clear())

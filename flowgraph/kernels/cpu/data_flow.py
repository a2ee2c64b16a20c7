"""Kernels of the queue ops (§4.6). The queue op finds or creates its queue in the device's
container (§4.7) and outputs it as the handle; enqueue, dequeue and close are async kernels
(§5.3) that hand the queue a continuation (queue_base.py, queue_kinds.py)."""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.core.shapes import TensorShape
from flowgraph.kernels import resource_handles
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu import queue_kinds
from flowgraph.kernels.cpu.queue_base import outputs


def _queue_kernel(kind: str):
    def make(ctx):
        cached = ctx.state  # (container, name, queue, its output): checked and made once
        if cached is not None and ctx.resources.find(cached[0], cached[1]) is cached[2]:
            return cached[3]  # else the container was reset: make the queue again
        q = _find_or_create(ctx, kind)
        # A V2 op outputs a resource handle; a V1 op (a Ref(string) output) the queue itself.
        out = resource_handles.handle_of(ctx, q) if ctx.output_types[0] == dtypes.resource else q
        ctx.state = (ctx.attrs["container"], q.name, q, out)
        return out

    return make


def _find_or_create(ctx, kind: str):
    a = ctx.attrs
    types = list(a["component_types"])
    shapes = [TensorShape(s) for s in a["shapes"]]
    if kind == "PriorityQueue":
        if len(shapes) != len(types):
            raise errors.InvalidArgumentError(
                None, None, "PriorityQueue requires one shape per component type"
            )
        types, shapes = [dtypes.int64] + types, [TensorShape([])] + shapes
    elif shapes and len(shapes) != len(types):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"shapes must have the same length as component_types: {len(shapes)} vs {len(types)}",
        )
    if kind == "PaddingFIFOQueue" and not shapes:
        raise errors.InvalidArgumentError(
            None, None, "PaddingFIFOQueue requires one shape per component (may be partial)"
        )
    if kind != "PaddingFIFOQueue":
        for s in shapes:
            if not s.is_fully_defined():
                raise errors.InvalidArgumentError(
                    None, None, f"{kind} shapes must be fully defined, got {s}"
                )
    capacity = a["capacity"]
    name = a["shared_name"] or ctx.name

    def factory():
        if kind == "RandomShuffleQueue":
            return queue_kinds.RandomShuffleQueue(
                name, types, shapes, capacity, a["min_after_dequeue"], a["seed"], a["seed2"]
            )
        return getattr(queue_kinds, kind)(name, types, shapes, capacity)

    q = ctx.resources.lookup_or_create(a["container"], name, factory)
    q.matches(kind, types, shapes, capacity)
    return q


for _kind in ("FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "PriorityQueue"):
    for _v in ("V2", ""):
        register_kernel(_kind + _v)(_queue_kernel(_kind))


def _check_timeout(ctx):
    if ctx.attrs.get("timeout_ms", -1) != -1:
        raise errors.InvalidArgumentError(None, None, "Timeout not supported yet.")


def _check_types(ctx, q, types) -> None:
    want = [t.base_dtype for t in types]
    if want != q.dtypes:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"{ctx.op_type}: the op's component types {[t.name for t in want]} do not match "
            f"{q.kind} '{q.name}' with component types {[t.name for t in q.dtypes]}",
        )


def _enqueue_kernel(batched: bool):
    def enqueue(ctx, step, done, q, *components):
        if ctx.state is not q:  # the op's checks against this queue: once per queue
            _check_timeout(ctx)
            _check_types(ctx, q, ctx.input_types[1:])
            ctx.state = q
        q.enqueue(step, q.validate(components, batched), done)

    return enqueue


@register_kernel("QueueDequeue", async_=True)
@register_kernel("QueueDequeueV2", async_=True)
def dequeue(ctx, step, done, q):
    if ctx.state is not q:  # the op's checks against this queue: once per queue
        _check_timeout(ctx)
        _check_types(ctx, q, ctx.output_types)
        ctx.state = q

    def on_done(pieces=None, error=None):
        if error is not None:
            done(None, error)
        else:
            done(outputs(q.element(pieces)))

    q.dequeue(step, 1, on_done)


def _dequeue_many_kernel(allow_small: bool):
    def dequeue_many(ctx, step, done, q, n):
        if ctx.state is not q:  # the op's checks against this queue: once per queue
            _check_timeout(ctx)
            _check_types(ctx, q, ctx.output_types)
            q.check_batchable(ctx.op_type)
            ctx.state = q
        n = int(n)
        if n < 0:
            raise errors.InvalidArgumentError(
                None, None, f"Request failed because n was negative: {n}"
            )
        q.dequeue_many(step, n, done, allow_small)

    return dequeue_many


def _close(ctx, step, done, q):
    q.close(step, ctx.attrs["cancel_pending_enqueues"], done)


for _v in ("V2", ""):
    register_kernel("QueueEnqueue" + _v, async_=True)(_enqueue_kernel(False))
    register_kernel("QueueEnqueueMany" + _v, async_=True)(_enqueue_kernel(True))
    register_kernel("QueueDequeueMany" + _v, async_=True)(_dequeue_many_kernel(False))
    register_kernel("QueueDequeueUpTo" + _v, async_=True)(_dequeue_many_kernel(True))
    register_kernel("QueueClose" + _v, async_=True)(_close)
    register_kernel("QueueSize" + _v)(lambda ctx, q: np.int32(q.size()))
    register_kernel("QueueIsClosed" + _v)(lambda ctx, q: np.bool_(q.is_closed()))

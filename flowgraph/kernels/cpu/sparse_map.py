"""SparseTensorsMap (TF's sparse_tensors_map_ops): how a SparseTensor travels through a queue.
A queue element is a dense tuple, so tf.train.batch stores each SparseTensor in a map resource
and enqueues its int64 handle; after the dequeue, TakeManySparseFromTensorsMap stacks the
handles' SparseTensors along a new first dimension (and removes them from the map)."""

from __future__ import annotations

import itertools
import threading

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel


class SparseTensorsMap:
    """handle -> (indices, values, shape). Guarded by `lock`."""

    def __init__(self, name):
        self.name = name
        self.lock = threading.Lock()
        self.tensors: dict = {}
        self._ids = itertools.count(1)

    def add(self, parts) -> int:
        with self.lock:
            handle = next(self._ids)
            self.tensors[handle] = parts
        return handle

    def take(self, handles) -> list:
        with self.lock:
            missing = [h for h in handles if h not in self.tensors]
            if missing:
                raise errors.InvalidArgumentError(
                    None, None, f"Unable to find SparseTensor: {missing[0]} in map: {self.name}"
                )
            return [self.tensors.pop(h) for h in handles]


def _map(ctx) -> SparseTensorsMap:
    a = ctx.attrs
    name = a.get("shared_name") or ctx.name
    return ctx.resources.lookup_or_create(a["container"], name, lambda: SparseTensorsMap(name))


def _check(indices, values, shape):
    indices, values, shape = np.asarray(indices), np.asarray(values), np.asarray(shape)
    if indices.ndim != 2 or values.ndim != 1 or shape.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, "Expected a SparseTensor: indices [N, rank], values [N], shape [rank]"
        )
    if indices.shape[0] != values.shape[0] or indices.shape[1] != shape.shape[0]:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Inconsistent SparseTensor parts: indices {list(indices.shape)}, "
            f"values {list(values.shape)}, shape {list(shape.shape)}",
        )
    return indices.astype(np.int64, copy=False), values, shape.astype(np.int64, copy=False)


@register_kernel("AddSparseToTensorsMap")
def add_sparse(ctx, indices, values, shape):
    return np.int64(_map(ctx).add(_check(indices, values, shape)))


@register_kernel("AddManySparseToTensorsMap")
def add_many_sparse(ctx, indices, values, shape):
    """Splits a SparseTensor of rank >= 2 along dimension 0 into one entry per row."""
    indices, values, shape = _check(indices, values, shape)
    if shape.size < 2:
        raise errors.InvalidArgumentError(
            None, None, f"Rank of input SparseTensor should be > 1, but saw rank: {shape.size}"
        )
    m = _map(ctx)
    rows = indices[:, 0]
    order = np.argsort(rows, kind="stable")
    rows, sub, vals = rows[order], indices[order][:, 1:], values[order]
    bounds = np.searchsorted(rows, np.arange(int(shape[0]) + 1))
    handles = [
        m.add((sub[b:e], vals[b:e], shape[1:].copy())) for b, e in itertools.pairwise(bounds)
    ]
    return np.array(handles, dtype=np.int64)


@register_kernel("TakeManySparseFromTensorsMap")
def take_many_sparse(ctx, handles):
    handles = np.asarray(handles, dtype=np.int64)
    if handles.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, f"sparse_handles should be a vector but received shape {handles.shape}"
        )
    parts = _map(ctx).take(handles.tolist())
    rank = parts[0][2].size if parts else 0
    for i, (_, _, shape) in enumerate(parts):
        if shape.size != rank:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Inconsistent rank across SparseTensors: rank prior to "
                f"SparseTensor[{i}] was: {rank} but rank of SparseTensor[{i}] is: {shape.size}",
            )
    dtype = ctx.attrs["dtype"].as_numpy_dtype
    counts = [len(p[1]) for p in parts]
    batch = np.repeat(np.arange(len(parts), dtype=np.int64), counts)[:, None]
    inner = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, rank), np.int64)
    values = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype)
    dims = np.max(np.stack([p[2] for p in parts]), axis=0) if parts else np.zeros(rank, np.int64)
    shape = np.concatenate([[len(parts)], dims]).astype(np.int64)
    return np.concatenate([batch, inner], axis=1), values.astype(dtype, copy=False), shape

"""SparseTensor components of datasets: a SparseTensor travels through dataset ops as a
DT_VARIANT triple [indices, values, dense_shape] (TF's SerializeSparse with out_type variant),
so batching stacks triples into a [batch, 3] variant and DeserializeSparse turns any [..., 3]
variant back into one SparseTensor with the leading dimensions in front (TF's semantics)."""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.kernels.base import register_kernel

_VARIANT_ONLY = {"out_type": (dtypes.variant,)}


def _triple(indices, values, shape) -> np.ndarray:
    out = np.empty(3, dtype=object)
    out[0] = np.asarray(indices, np.int64).reshape(-1, len(np.asarray(shape).reshape(-1)))
    out[1] = np.asarray(values)
    out[2] = np.asarray(shape, np.int64).reshape(-1)
    return out


@register_kernel("SerializeSparse", constraints=_VARIANT_ONLY)
def serialize_sparse(ctx, indices, values, shape):
    return _triple(indices, values, shape)


@register_kernel("SerializeManySparse", constraints=_VARIANT_ONLY)
def serialize_many_sparse(ctx, indices, values, shape):
    """One triple per index of dimension 0 (entries must be sorted by their first index)."""
    indices = np.asarray(indices, np.int64)
    shape = np.asarray(shape, np.int64)
    if shape.size < 1:
        raise errors.InvalidArgumentError(None, None, "SparseTensor must have rank >= 1")
    n = int(shape[0])
    rows = indices[:, 0] if len(indices) else np.zeros(0, np.int64)
    if np.any(np.diff(rows) < 0):
        raise errors.InvalidArgumentError(
            None, None, "SerializeManySparse needs indices sorted along dimension 0"
        )
    bounds = np.searchsorted(rows, np.arange(n + 1))
    out = np.empty((n, 3), dtype=object)
    for i in range(n):  # one triple per row: the row is the unit of work
        lo, hi = bounds[i], bounds[i + 1]
        out[i] = _triple(indices[lo:hi, 1:], np.asarray(values)[lo:hi], shape[1:])
    return out


@register_kernel("DeserializeSparse", constraints={"Tserialized": (dtypes.variant,)})
def deserialize_sparse(ctx, serialized):
    serialized = np.asarray(serialized, dtype=object)
    if serialized.ndim < 1 or serialized.shape[-1] != 3:
        raise errors.InvalidArgumentError(
            None, None, f"Serialized sparse should have shape [..., 3], got {serialized.shape}"
        )
    want = ctx.attrs["dtype"].as_numpy_dtype
    if serialized.ndim == 1:
        indices, values, shape = serialized
        return indices, np.asarray(values, dtype=want), shape
    lead = serialized.shape[:-1]
    flat = serialized.reshape(-1, 3)
    ranks = {len(t[2]) for t in flat}
    if len(ranks) > 1:
        raise errors.InvalidArgumentError(
            None, None, f"Inconsistent rank across SparseTensors: {sorted(ranks)}"
        )
    rank = ranks.pop() if ranks else 0
    shape = np.max(np.stack([t[2] for t in flat]), axis=0) if len(flat) else np.zeros(rank)
    counts = np.array([len(t[0]) for t in flat], np.int64)
    prefix = np.array(list(np.ndindex(*lead)), np.int64).reshape(-1, len(lead))
    inner = np.concatenate([t[0] for t in flat]) if len(flat) else np.zeros((0, rank), np.int64)
    indices = np.concatenate([np.repeat(prefix, counts, axis=0), inner.reshape(-1, rank)], axis=1)
    values = (
        np.concatenate([np.asarray(t[1], dtype=want) for t in flat])
        if len(flat)
        else np.zeros(0, want)
    )
    return indices, values, np.concatenate([np.asarray(lead, np.int64), shape]).astype(np.int64)

"""tf.nn.embedding_lookup: rows of one or several sharded parameter tensors (TF's embedding_ops).

With several shards, id i lives in shard i % n ('mod') or in a contiguous block ('div'). Each
shard is read with its own GatherV2 on the ids routed to it (boolean_mask), and DynamicStitch puts
the rows back in id order, so every shard's gradient stays an IndexedSlices (sparse updates).
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework.apply_op import apply_op, graph_of
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.operation import Tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import array_index
from flowgraph.ops import math as math_ops
from flowgraph.ops import reduction as reduction_ops

__all__ = ["embedding_lookup"]


def _clip_rows(rows, ids_rank, max_norm):
    """Scales each embedding (the dims after the ids' dims) to an L2 norm of at most max_norm."""
    rank = rows.shape.ndims
    if rank is None:
        raise ValueError("embedding_lookup with max_norm needs params of known rank")
    axes = list(range(ids_rank, rank))
    norm = math_ops.sqrt(reduction_ops.reduce_sum(math_ops.square(rows), axes, keepdims=True))
    limit = math_ops.cast(max_norm, rows.dtype)
    return math_ops.multiply(rows, math_ops.divide(limit, math_ops.maximum(norm, limit)))


def _is_graph_value(value) -> bool:
    """Tensors and variables are used as they are (a variable keeps its sparse gradient)."""
    return isinstance(value, Tensor) or hasattr(value, "_as_graph_element")


def _gather(params, ids, name=None):
    """Rows of one shard: ResourceGather for a resource variable (reads only those rows, as TF1's
    gather does through `sparse_read`), GatherV2 otherwise."""
    if hasattr(params, "sparse_read"):
        return params.sparse_read(ids, name=name)
    return array_index.gather(params, ids, name=name)


def _first_dim_total(params):
    """The number of ids over all shards: static when every shard's first dim is known."""
    sizes = [p.shape.as_list()[0] if p.shape.ndims else None for p in params]
    if all(s is not None for s in sizes):
        return sum(sizes)
    dims = [array_index.gather(array_ops.shape(p), 0) for p in params]
    return apply_op("AddN", [dims]).outputs[0]


def _route(flat_ids, params, partition_strategy):
    """(shard of each id, its row within that shard)."""
    n = len(params)
    if partition_strategy == "mod":
        return math_ops.floormod(flat_ids, n), math_ops.floordiv(flat_ids, n)
    total = _first_dim_total(params)
    if isinstance(total, int):
        per = convert_to_tensor(total // n, dtype=flat_ids.dtype)
        extras = convert_to_tensor(total % n, dtype=flat_ids.dtype)
    else:
        total = math_ops.cast(total, flat_ids.dtype)
        per, extras = math_ops.floordiv(total, n), math_ops.floormod(total, n)
    # The first `extras` shards hold per + 1 ids, the others per.
    shard = math_ops.maximum(
        math_ops.floordiv(flat_ids, math_ops.add(per, 1)),
        math_ops.floordiv(math_ops.subtract(flat_ids, extras), per),
    )
    in_big_shard = math_ops.less(shard, extras)
    row = math_ops.where(
        in_big_shard,
        math_ops.floormod(flat_ids, math_ops.add(per, 1)),
        math_ops.floormod(math_ops.subtract(flat_ids, extras), per),
    )
    return shard, row


def embedding_lookup(
    params, ids, partition_strategy="mod", name=None, validate_indices=True, max_norm=None
):
    """The rows of `params` named by `ids`: a tensor of shape ids.shape + params.shape[1:].

    `params` is a tensor or variable, or a list of shards of one. Example:
        embed = tf.nn.embedding_lookup(embeddings, word_ids)
    """
    if partition_strategy not in ("mod", "div"):
        raise ValueError(
            f"Unrecognized partition strategy: {partition_strategy!r} (expected 'mod' or 'div')"
        )
    if params is None or (isinstance(params, (list, tuple)) and not params):
        raise ValueError("Need at least one param")
    params = list(params) if isinstance(params, (list, tuple)) else [params]
    graph = graph_of(params + [ids])
    with graph.as_default(), graph.name_scope(name or "embedding_lookup") as scope:
        ids = convert_to_tensor(ids, name="ids")
        if len(params) == 1:
            rows = _gather(params[0], ids, name=None if max_norm is not None else scope)
            if max_norm is None:
                return rows
            return array_ops.identity(_clip_rows(rows, ids.shape.ndims, max_norm), name=scope)
        params = [p if _is_graph_value(p) else convert_to_tensor(p, name="params") for p in params]
        flat_ids = array_ops.reshape(ids, [-1])
        shard, row = _route(flat_ids, params, partition_strategy)
        positions = array_ops.range(array_ops.size(flat_ids))
        gathered, where = [], []
        for p, param in enumerate(params):
            mine = math_ops.equal(shard, math_ops.cast(p, shard.dtype))
            gathered.append(_gather(param, array_index.boolean_mask(row, mine)))
            where.append(math_ops.cast(array_index.boolean_mask(positions, mine), dtypes.int32))
        stitched = apply_op("DynamicStitch", [where, gathered]).outputs[0]
        # ids.shape + params.shape[1:]
        out_shape = array_ops.concat([array_ops.shape(ids), array_ops.shape(stitched)[1:]], 0)
        rows = array_ops.reshape(stitched, out_shape)
        static = params[0].shape
        if ids.shape.ndims is not None and static.ndims is not None:
            rows.set_shape(ids.shape.concatenate(static[1:]))
        if max_norm is not None:
            rows = _clip_rows(rows, ids.shape.ndims, max_norm)
        return array_ops.identity(rows, name=scope)

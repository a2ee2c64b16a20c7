"""tf.nn.embedding_lookup_sparse and safe_embedding_lookup_sparse: one combined embedding per
row of a SparseTensor of ids (bag-of-words features), as TF 1.15 builds them: each distinct id
is looked up once (Unique + embedding_lookup) and the rows are combined by SparseSegment
sum/mean/sqrt_n, or by weighted segment sums when weights are given."""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import unknown_shape
from flowgraph.framework.scopes import name_scope
from flowgraph.framework.sparse_tensor import SparseTensor

__all__ = ["embedding_lookup_sparse", "safe_embedding_lookup_sparse"]

_COMBINERS = ("mean", "sqrtn", "sum")


def embedding_lookup_sparse(
    params, sp_ids, sp_weights, partition_strategy="mod", name=None, combiner=None, max_norm=None
):
    """Row r of the result combines params[id] over the ids of row r of `sp_ids` (weighted by
    `sp_weights` if given): 'sum', 'mean' (default) or 'sqrtn' (sum / sqrt of squared weights)."""
    from flowgraph.ops import array as array_ops
    from flowgraph.ops import math as math_ops
    from flowgraph.ops import segment
    from flowgraph.ops.array_index import gather, unique
    from flowgraph.ops.embedding import embedding_lookup

    combiner = "mean" if combiner is None else combiner
    if combiner not in _COMBINERS:
        raise ValueError("combiner must be one of 'mean', 'sqrtn' or 'sum'")
    if (
        not isinstance(params, (list, tuple))
        and hasattr(params, "__iter__")
        and not hasattr(params, "op")
    ):
        params = list(params)  # a PartitionedVariable
    if not isinstance(params, (list, tuple)):
        params = [params]
    if not isinstance(sp_ids, SparseTensor):
        raise TypeError("sp_ids must be SparseTensor")
    if sp_weights is not None and not isinstance(sp_weights, SparseTensor):
        raise TypeError("sp_weights must be either None or SparseTensor")
    with name_scope(name, "embedding_lookup_sparse", [sp_ids.values]) as scope:
        segment_ids = math_ops.cast(sp_ids.indices[:, 0], dtypes.int32)
        ids, idx = unique(sp_ids.values)
        embeddings = embedding_lookup(
            params, ids, partition_strategy=partition_strategy, max_norm=max_norm
        )
        if embeddings.dtype in (dtypes.float16, dtypes.bfloat16):
            embeddings = math_ops.cast(embeddings, dtypes.float32)
        if sp_weights is None:
            fn = {
                "sum": segment.sparse_segment_sum,
                "mean": segment.sparse_segment_mean,
                "sqrtn": segment.sparse_segment_sqrt_n,
            }[combiner]
            return fn(embeddings, idx, segment_ids, name=scope)
        weights = sp_weights.values
        if weights.dtype != embeddings.dtype:
            weights = math_ops.cast(weights, embeddings.dtype)
        embeddings = gather(embeddings, idx)
        ones = array_ops.fill(array_ops.expand_dims(array_ops.rank(embeddings) - 1, 0), 1)
        static = weights.shape
        weights = array_ops.reshape(weights, array_ops.concat([array_ops.shape(weights), ones], 0))
        if embeddings.shape.ndims is not None:
            weights.set_shape(static.concatenate([1] * (embeddings.shape.ndims - 1)))
        embeddings = embeddings * weights
        if combiner == "sum":
            return segment.segment_sum(embeddings, segment_ids, name=scope)
        summed = segment.segment_sum(embeddings, segment_ids)
        # An empty segment (its weights summing to 0) gives 0, as in TF (div_no_nan).
        if combiner == "mean":
            total = segment.segment_sum(weights, segment_ids)
            return math_ops.div_no_nan(summed, total, name=scope)
        norm = math_ops.sqrt(segment.segment_sum(math_ops.pow(weights, 2), segment_ids))
        return math_ops.div_no_nan(summed, norm, name=scope)


def _prune(sparse_ids, sparse_weights, keep):
    from flowgraph.ops.sparse import sparse_retain

    ids = sparse_retain(sparse_ids, keep)
    return ids, (None if sparse_weights is None else sparse_retain(sparse_weights, keep))


def safe_embedding_lookup_sparse(
    embedding_weights,
    sparse_ids,
    sparse_weights=None,
    combiner="mean",
    default_id=None,
    name=None,
    partition_strategy="div",
    max_norm=None,
):
    """embedding_lookup_sparse that drops invalid ids (< 0) and non-positive weights, gives a
    row without ids the embedding of `default_id` (zeros if None), and accepts ids of rank > 2
    (the result has their leading dimensions)."""
    from flowgraph.ops import array as array_ops
    from flowgraph.ops import math as math_ops
    from flowgraph.ops import reduction
    from flowgraph.ops.array_index import gather, slice_
    from flowgraph.ops.sparse import sparse_fill_empty_rows, sparse_reshape

    if not isinstance(embedding_weights, (list, tuple)):
        embedding_weights = [embedding_weights]
    if not embedding_weights:
        raise ValueError("Missing embedding_weights.")
    with name_scope(name, "embedding_lookup", [sparse_ids.values]) as scope:
        original_shape = sparse_ids.dense_shape
        rank_dim = original_shape.shape[0].value
        rank = array_ops.size(original_shape) if rank_dim is None else rank_dim
        sparse_ids = sparse_reshape(
            sparse_ids,
            array_ops.stack(
                [
                    reduction.reduce_prod(slice_(original_shape, [0], array_ops.stack([rank - 1]))),
                    gather(original_shape, rank - 1),
                ]
            ),
        )
        if sparse_weights is not None:
            sparse_weights = SparseTensor(
                sparse_ids.indices, sparse_weights.values, sparse_ids.dense_shape
            )
        valid = math_ops.greater_equal(sparse_ids.values, 0)
        sparse_ids, sparse_weights = _prune(sparse_ids, sparse_weights, valid)
        if combiner != "sum" and sparse_weights is not None:
            sparse_ids, sparse_weights = _prune(
                sparse_ids, sparse_weights, math_ops.greater(sparse_weights.values, 0)
            )
        sparse_ids, is_row_empty = sparse_fill_empty_rows(sparse_ids, default_id or 0)
        if sparse_weights is not None:
            sparse_weights, _ = sparse_fill_empty_rows(sparse_weights, 1.0)
        result = embedding_lookup_sparse(
            embedding_weights,
            sparse_ids,
            sparse_weights,
            combiner=combiner,
            partition_strategy=partition_strategy,
            name=None if default_id is None else scope,
            max_norm=max_norm,
        )
        if default_id is None:
            width = array_ops.shape(result)[1]
            empty = array_ops.tile(
                array_ops.reshape(is_row_empty, [-1, 1]), array_ops.stack([1, width])
            )
            result = math_ops.where(empty, array_ops.zeros_like(result), result, name=scope)
        leading = slice_(
            math_ops.cast(original_shape, dtypes.int32), [0], array_ops.stack([rank - 1])
        )
        final = array_ops.reshape(
            result, array_ops.concat([leading, slice_(array_ops.shape(result), [1], [-1])], 0)
        )
        if rank_dim is not None:
            final.set_shape(unknown_shape(rank_dim - 1).concatenate(result.shape[1:]))
        return final

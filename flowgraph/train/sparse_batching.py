"""SparseTensors through the batching queues: a queue holds dense tuples, so tf.train.batch and
its kin store each SparseTensor in a SparseTensorsMap (AddSparseToTensorsMap /
AddManySparseToTensorsMap) and enqueue its int64 handle; the dequeue side takes the batch back
out as one SparseTensor (TakeManySparseFromTensorsMap), as TF1's input.py does.
"""

from __future__ import annotations

import numpy as np

from flowgraph.framework import convert
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.sparse_tensor import SparseTensor


class _SparseInfo:
    """Where a batched SparseTensor went: its map op (None for a dense tensor) and rank."""

    def __init__(self, map_op=None, rank=None, dtype=None):
        self.map_op, self.rank, self.dtype = map_op, rank, dtype


def _store_sparse_tensors(tensor_list, enqueue_many, keep_input, shared=None):
    """Replaces each SparseTensor by the int64 handle of its entry in a SparseTensorsMap (a
    queue holds dense tuples); `shared` gives the map ops of a join's first input list."""
    if not any(isinstance(t, SparseTensor) for t in tensor_list):
        return tensor_list, [_SparseInfo() for _ in tensor_list]
    if convert.constant_value(keep_input) is None or not bool(
        np.all(convert.constant_value(keep_input))
    ):
        raise NotImplementedError("maybe_batch with a keep_input tensor of SparseTensors")
    stored, infos = [], []
    for i, t in enumerate(tensor_list):
        if not isinstance(t, SparseTensor):
            stored.append(t)
            infos.append(_SparseInfo())
            continue
        rank = t.dense_shape.shape[0].value
        if rank is None:
            raise ValueError(f"The rank of batched SparseTensor {i} must be known")
        op_type = "AddManySparseToTensorsMap" if enqueue_many else "AddSparseToTensorsMap"
        map_op = shared[i].map_op if shared is not None else None
        shared_name = (map_op.get_attr("shared_name") or map_op.name) if map_op else ""
        op = apply_op(op_type, [t.indices, t.values, t.dense_shape], shared_name=shared_name)
        stored.append(op.outputs[0])
        infos.append(
            _SparseInfo(map_op or op, rank - 1 if enqueue_many else rank, t.values.dtype.base_dtype)
        )
    return stored, infos


def _restore_sparse_tensors(dequeued, infos):
    if all(info.map_op is None for info in infos):
        return dequeued
    single = not isinstance(dequeued, (list, tuple))
    dequeued = [dequeued] if single else list(dequeued)
    out = []
    for t, info in zip(dequeued, infos):
        if info.map_op is None:
            out.append(t)
            continue
        op = apply_op(
            "TakeManySparseFromTensorsMap",
            [t],
            dtype=info.dtype,
            shared_name=info.map_op.get_attr("shared_name") or info.map_op.name,
        )
        indices, values, shape = op.outputs
        indices.set_shape([None, info.rank + 1])
        shape.set_shape([info.rank + 1])
        out.append(SparseTensor(indices, values, shape))
    return out[0] if single else out

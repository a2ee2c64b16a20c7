"""The classic TF1 reading pipeline (whitepaper §4.5, §4.6): input producers that fill a queue with
file names, indices or slices (optionally shuffled, for a limited number of epochs), and the
batchers that gather single examples into batches through another queue. Every queue comes with
a QueueRunner in the graph's QUEUE_RUNNERS collection; tf.train.start_queue_runners starts them.

Example:
    files = tf.train.string_input_producer(["a.tfrecord", "b.tfrecord"], num_epochs=2)
    _, record = tf.TFRecordReader().read(files)
    image, label = decode(record)
    images, labels = tf.train.shuffle_batch([image, label], 128, capacity=2000,
                                            min_after_dequeue=1000, num_threads=2)
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import as_shape
from flowgraph.framework import convert, default_graph
from flowgraph.framework.sparse_tensor import SparseTensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import queues
from flowgraph.ops.array_index import boolean_mask
from flowgraph.train.producers import (
    _scalar_summary,
    input_producer,
    limit_epochs,
    range_input_producer,
    slice_input_producer,
    string_input_producer,
)
from flowgraph.train.queue_runner import QueueRunner, add_queue_runner
from flowgraph.train.sparse_batching import _restore_sparse_tensors, _store_sparse_tensors

__all__ = [
    "batch",
    "batch_join",
    "input_producer",
    "limit_epochs",
    "maybe_batch",
    "maybe_batch_join",
    "maybe_shuffle_batch",
    "maybe_shuffle_batch_join",
    "range_input_producer",
    "shuffle_batch",
    "shuffle_batch_join",
    "slice_input_producer",
    "string_input_producer",
]


# -- batching ------------------------------------------------------------------------------------
def _as_tensor_list(tensors):
    if isinstance(tensors, dict):
        return [tensors[k] for k in sorted(tensors, key=str)]
    return tensors


def _as_tensor_list_list(tensors_list):
    if not tensors_list:
        raise ValueError("Expected at least one set of tensors")
    if isinstance(tensors_list[0], dict):
        keys = set(tensors_list[0].keys())
        for tensors in tensors_list[1:]:
            if set(tensors.keys()) != keys:
                raise ValueError("All dictionaries in tensors_list must have the same keys")
        return [_as_tensor_list(t) for t in tensors_list]
    return tensors_list


def _as_original_type(original_tensors, tensor_list):
    if isinstance(original_tensors, dict):
        if len(original_tensors) == 1:
            tensor_list = [tensor_list]  # one queued tensor comes back bare
        return {k: tensor_list[i] for i, k in enumerate(sorted(original_tensors, key=str))}
    return tensor_list


def _validate(tensor_list):
    if not isinstance(tensor_list, (list, tuple)):
        tensor_list = [tensor_list]
    tensor_list = [
        t if isinstance(t, SparseTensor) else convert.convert_to_tensor(t) for t in tensor_list
    ]
    if not tensor_list:
        raise ValueError("Expected at least one tensor in batch().")
    return tensor_list


def _validate_join(tensor_list_list):
    tensor_list_list = [_validate(tl) for tl in tensor_list_list]
    if not tensor_list_list:
        raise ValueError("Expected at least one input in batch_join().")
    return tensor_list_list


def _validate_keep_input(keep_input, enqueue_many):
    keep_input = convert.convert_to_tensor(keep_input, dtype=dtypes.bool_)
    if keep_input.shape.ndims is None:
        raise ValueError("`keep_input` dimensions must be known at graph construction.")
    if not enqueue_many and keep_input.shape.ndims == 1:
        raise ValueError("`keep_input` cannot be a vector when `enqueue_many=False`.")
    if keep_input.shape.ndims > 1:
        raise ValueError("`keep_input` must be 0 or 1 dimensions.")
    return keep_input


def _dtypes(tensor_list_list):
    all_types = [[t.dtype.base_dtype for t in tl] for tl in tensor_list_list]
    types = all_types[0]
    for other in all_types[1:]:
        if other != types:
            raise TypeError(
                f"Expected types to be consistent: {', '.join(x.name for x in types)} vs. "
                f"{', '.join(x.name for x in other)}."
            )
    return types


def _merge_shapes(shape_list, enqueue_many):
    shape_list = [as_shape(s) for s in shape_list]
    if enqueue_many:
        shape_list = [s.with_rank_at_least(1)[1:] for s in shape_list]
    merged = shape_list[0]
    for s in shape_list[1:]:
        merged = merged.merge_with(s)
    return merged.as_list() if merged.ndims is not None else None


def _shapes(tensor_list_list, shapes, enqueue_many):
    if shapes is None:
        n = len(tensor_list_list[0])
        for tl in tensor_list_list:
            for i in range(n, len(tl)):
                raise ValueError(f"Unexpected extra tensor in the inputs: {tl[i]}")
        shapes = [
            _merge_shapes([tl[i].shape for tl in tensor_list_list], enqueue_many) for i in range(n)
        ]
        for i, s in enumerate(shapes):
            if s is None:
                raise ValueError(
                    f"Cannot infer the shape of batched tensor {i} "
                    f"({tensor_list_list[0][i].name}): its rank is unknown; pass `shapes`"
                )
    return shapes


def _smart_enqueue(keep_input, enqueue_fn, tensors):
    value = convert.constant_value(keep_input)
    if value is not None:
        return enqueue_fn(tensors) if bool(value) else array_ops.no_op()
    from flowgraph.ops.control_flow import cond

    return cond(keep_input, lambda: enqueue_fn(tensors), array_ops.no_op)


def _enqueue_ops(queue, tensor_list_list, enqueue_many, keep_input):
    enqueue_fn = queue.enqueue_many if enqueue_many else queue.enqueue
    if keep_input.shape.ndims == 1:
        return [enqueue_fn([boolean_mask(x, keep_input) for x in tl]) for tl in tensor_list_list]
    return [_smart_enqueue(keep_input, enqueue_fn, tl) for tl in tensor_list_list]


def _dequeue(queue, batch_size, allow_smaller_final_batch, name):
    if allow_smaller_final_batch:
        return queue.dequeue_up_to(batch_size, name=name)
    return queue.dequeue_many(batch_size, name=name)


def _fifo_queue(capacity, shapes, dynamic_pad, shared_name):
    """The queue of batch/batch_join: a FIFOQueue (padding with `dynamic_pad`) and a summary of
    how full it is."""

    def make(tensor_list_list, enqueue_many):
        queue_cls = queues.PaddingFIFOQueue if dynamic_pad else queues.FIFOQueue
        queue = queue_cls(
            capacity=capacity,
            dtypes=_dtypes(tensor_list_list),
            shapes=_shapes(tensor_list_list, shapes, enqueue_many),
            shared_name=shared_name,
        )
        _scalar_summary(
            f"fraction_of_{capacity}_full",
            math_ops.cast(queue.size(), dtypes.float32) * (1.0 / capacity),
        )
        return queue

    return make


def _shuffle_queue(capacity, min_after_dequeue, seed, shapes, shared_name):
    """The queue of shuffle_batch/shuffle_batch_join: a RandomShuffleQueue that keeps
    `min_after_dequeue` elements to mix from, and a summary of how full it is beyond them."""

    def make(tensor_list_list, enqueue_many):
        if capacity <= min_after_dequeue:
            raise ValueError(
                f"capacity {capacity} must be bigger than min_after_dequeue {min_after_dequeue}."
            )
        queue = queues.RandomShuffleQueue(
            capacity=capacity,
            min_after_dequeue=min_after_dequeue,
            seed=seed,
            dtypes=_dtypes(tensor_list_list),
            shapes=_shapes(tensor_list_list, shapes, enqueue_many),
            shared_name=shared_name,
        )
        over = math_ops.maximum(0, queue.size() - min_after_dequeue)
        full = math_ops.cast(over, dtypes.float32) * (1.0 / (capacity - min_after_dequeue))
        _scalar_summary(
            f"fraction_over_{min_after_dequeue}_of_{capacity - min_after_dequeue}_full", full
        )
        return queue

    return make


def _batch_through(
    make_queue,
    tensors,
    keep_input,
    batch_size,
    enqueue_many,
    allow_smaller_final_batch,
    name,
    num_threads=None,
):
    """The body of every batcher: `tensors` (a list or dict; for the *_join forms, num_threads
    None, a list of them, one enqueuing thread each) is validated, its SparseTensors stored, and
    enqueued into `make_queue`'s queue by a QueueRunner; batches are dequeued in its structure."""
    join = num_threads is None
    with default_graph.get().name_scope(name) as scope:
        if join:
            tensor_list_list = _validate_join(_as_tensor_list_list(tensors))
        else:
            tensor_list_list = [_validate(_as_tensor_list(tensors))]
        keep_input = _validate_keep_input(keep_input, enqueue_many)
        tensor_list_list, infos = _store_join(tensor_list_list, enqueue_many, keep_input)
        queue = make_queue(tensor_list_list, enqueue_many)
        ops = _enqueue_ops(queue, tensor_list_list, enqueue_many, keep_input)
        add_queue_runner(QueueRunner(queue, ops if join else ops * num_threads))
        dequeued = _dequeue(queue, batch_size, allow_smaller_final_batch, scope)
        original = tensors[0] if join else tensors
        return _as_original_type(original, _restore_sparse_tensors(dequeued, infos))


def _store_join(tensor_list_list, enqueue_many, keep_input):
    """Stores the SparseTensors of every input list in the maps of the first list's."""
    first, infos = _store_sparse_tensors(tensor_list_list[0], enqueue_many, keep_input)
    stored = [first]
    for tl in tensor_list_list[1:]:
        stored.append(_store_sparse_tensors(tl, enqueue_many, keep_input, infos)[0])
    return stored, infos


def batch(
    tensors,
    batch_size,
    num_threads=1,
    capacity=32,
    enqueue_many=False,
    shapes=None,
    dynamic_pad=False,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    """Batches `tensors` (a list or dict) through a FIFOQueue filled by `num_threads` threads.

    dynamic_pad: pad variable-sized inputs to the largest in the batch (a PaddingFIFOQueue).
    allow_smaller_final_batch: once the input ends, the last batch may be short."""
    return maybe_batch(
        tensors,
        True,
        batch_size,
        num_threads,
        capacity,
        enqueue_many,
        shapes,
        dynamic_pad,
        allow_smaller_final_batch,
        shared_name,
        name,
    )


def maybe_batch(
    tensors,
    keep_input,
    batch_size,
    num_threads=1,
    capacity=32,
    enqueue_many=False,
    shapes=None,
    dynamic_pad=False,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    """Like batch, but only inputs whose `keep_input` is true are enqueued."""
    make_queue = _fifo_queue(capacity, shapes, dynamic_pad, shared_name)
    return _batch_through(
        make_queue,
        tensors,
        keep_input,
        batch_size,
        enqueue_many,
        allow_smaller_final_batch,
        name or "batch",
        num_threads,
    )


def batch_join(
    tensors_list,
    batch_size,
    capacity=32,
    enqueue_many=False,
    shapes=None,
    dynamic_pad=False,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    """Batches from several input lists, one enqueuing thread per list."""
    return maybe_batch_join(
        tensors_list,
        True,
        batch_size,
        capacity,
        enqueue_many,
        shapes,
        dynamic_pad,
        allow_smaller_final_batch,
        shared_name,
        name,
    )


def maybe_batch_join(
    tensors_list,
    keep_input,
    batch_size,
    capacity=32,
    enqueue_many=False,
    shapes=None,
    dynamic_pad=False,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    make_queue = _fifo_queue(capacity, shapes, dynamic_pad, shared_name)
    return _batch_through(
        make_queue,
        tensors_list,
        keep_input,
        batch_size,
        enqueue_many,
        allow_smaller_final_batch,
        name or "batch_join",
    )


def shuffle_batch(
    tensors,
    batch_size,
    capacity,
    min_after_dequeue,
    num_threads=1,
    seed=None,
    enqueue_many=False,
    shapes=None,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    """Batches `tensors` in random order through a RandomShuffleQueue that keeps at least
    `min_after_dequeue` elements buffered to mix from."""
    return maybe_shuffle_batch(
        tensors,
        batch_size,
        capacity,
        min_after_dequeue,
        True,
        num_threads,
        seed,
        enqueue_many,
        shapes,
        allow_smaller_final_batch,
        shared_name,
        name,
    )


def maybe_shuffle_batch(
    tensors,
    batch_size,
    capacity,
    min_after_dequeue,
    keep_input,
    num_threads=1,
    seed=None,
    enqueue_many=False,
    shapes=None,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    make_queue = _shuffle_queue(capacity, min_after_dequeue, seed, shapes, shared_name)
    return _batch_through(
        make_queue,
        tensors,
        keep_input,
        batch_size,
        enqueue_many,
        allow_smaller_final_batch,
        name or "shuffle_batch",
        num_threads,
    )


def shuffle_batch_join(
    tensors_list,
    batch_size,
    capacity,
    min_after_dequeue,
    seed=None,
    enqueue_many=False,
    shapes=None,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    return maybe_shuffle_batch_join(
        tensors_list,
        batch_size,
        capacity,
        min_after_dequeue,
        True,
        seed,
        enqueue_many,
        shapes,
        allow_smaller_final_batch,
        shared_name,
        name,
    )


def maybe_shuffle_batch_join(
    tensors_list,
    batch_size,
    capacity,
    min_after_dequeue,
    keep_input,
    seed=None,
    enqueue_many=False,
    shapes=None,
    allow_smaller_final_batch=False,
    shared_name=None,
    name=None,
):
    make_queue = _shuffle_queue(capacity, min_after_dequeue, seed, shapes, shared_name)
    return _batch_through(
        make_queue,
        tensors_list,
        keep_input,
        batch_size,
        enqueue_many,
        allow_smaller_final_batch,
        name or "shuffle_batch_join",
    )

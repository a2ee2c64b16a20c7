"""tf.FIFOQueue, tf.PaddingFIFOQueue, tf.RandomShuffleQueue, tf.PriorityQueue (whitepaper §4.6):
TF1's queue classes over the V2 queue ops. A queue is a resource in its device's container; its
handle is `queue_ref`. Enqueue and dequeue ops block (asynchronously, §5.3) while the queue is
full or empty; closing the queue fails the blocked dequeues with OutOfRangeError.

Example:
    q = tf.FIFOQueue(10, [tf.float32, tf.int64], shapes=[[2], []])
    enq = q.enqueue([[1.0, 2.0], 7])
    x, y = q.dequeue()
"""

from __future__ import annotations

import collections.abc
import hashlib

from flowgraph.core import dtypes as dtypes_lib
from flowgraph.core.shapes import Dimension, TensorShape, as_shape, unknown_shape
from flowgraph.framework import convert, default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.random_seed import get_seed

__all__ = ["FIFOQueue", "PaddingFIFOQueue", "PriorityQueue", "QueueBase", "RandomShuffleQueue"]


def _as_type_list(dtypes):
    if isinstance(dtypes, (list, tuple)):
        return [dtypes_lib.as_dtype(d) for d in dtypes]
    return [dtypes_lib.as_dtype(dtypes)]


def _as_shape_list(shapes, unknown_dim_allowed=False, unknown_rank_allowed=False):
    """TF1's reading of `shapes=`: None, one shape, or one shape per component."""
    if unknown_dim_allowed and (
        not isinstance(shapes, collections.abc.Sequence)
        or not shapes
        or any(s is None or isinstance(s, int) for s in shapes)
    ):
        raise ValueError("When providing partial shapes, a list of shapes must be provided.")
    if shapes is None:
        return None
    if isinstance(shapes, TensorShape):
        shapes = [shapes]
    if not isinstance(shapes, (tuple, list)):
        raise TypeError("shapes must be a TensorShape or a list or tuple of TensorShapes.")
    if all(s is None or isinstance(s, int) for s in shapes):
        shapes = [shapes]  # a single shape
    shapes = [as_shape(s) for s in shapes]
    if not unknown_dim_allowed and any(not s.is_fully_defined() for s in shapes):
        raise ValueError(f"All shapes must be fully defined: {shapes}")
    if not unknown_rank_allowed and any(s.ndims is None for s in shapes):
        raise ValueError(f"All shapes must have a defined rank: {shapes}")
    return shapes


def _as_name_list(names, dtypes):
    if names is None:
        return None
    if not isinstance(names, (list, tuple)):
        names = [names]
    if len(names) != len(dtypes):
        raise ValueError("List of names must have the same length as the list of dtypes")
    return list(names)


def _shape_common(s1, s2):
    """The most specific shape compatible with both (TF1's _shape_common)."""
    s1, s2 = as_shape(s1), as_shape(s2)
    if s1.ndims is None or s2.ndims is None or s1.ndims != s2.ndims:
        return unknown_shape()
    return TensorShape([a if a == b else None for a, b in zip(s1.as_list(), s2.as_list())])


class QueueBase:
    """A queue's dtypes, shapes, names and handle, and the ops that use it."""

    def __init__(self, dtypes, shapes, names, queue_ref):
        self._dtypes = list(dtypes)
        if shapes is not None:
            if len(shapes) != len(dtypes):
                raise ValueError("Queue shapes must have the same length as dtypes")
            self._shapes = [as_shape(s) for s in shapes]
        else:
            self._shapes = [unknown_shape() for _ in self._dtypes]
        if names is not None:
            if len(names) != len(dtypes):
                raise ValueError("Queue names must have the same length as dtypes")
            self._names = list(names)
        else:
            self._names = None
        self._queue_ref = queue_ref
        self._name = queue_ref.op.name.split("/")[-1]

    @staticmethod
    def from_list(index, queues):
        """The queue `queues[index]`, chosen when the graph runs (all must match in dtypes and
        names; shapes become the most specific shapes common to all)."""
        from flowgraph.ops import array as array_ops
        from flowgraph.ops import array_index

        if (
            not queues
            or not isinstance(queues, list)
            or not all(isinstance(x, QueueBase) for x in queues)
        ):
            raise TypeError("A list of queues expected")
        dtypes = queues[0].dtypes
        if not all(dtypes == q.dtypes for q in queues[1:]):
            raise TypeError("Queues do not have matching component dtypes.")
        names = queues[0].names
        if not all(names == q.names for q in queues[1:]):
            raise TypeError("Queues do not have matching component names.")
        shapes = []
        for per_component in zip(*[q.shapes for q in queues]):
            common = per_component[0]
            for s in per_component[1:]:
                common = _shape_common(common, s)
            shapes.append(common)
        refs = array_ops.stack([q.queue_ref for q in queues])
        selected = array_index.gather(refs, index)
        return QueueBase(dtypes=dtypes, shapes=shapes, names=names, queue_ref=selected)

    # -- properties ---------------------------------------------------------------------------
    @property
    def queue_ref(self):
        return self._queue_ref

    @property
    def name(self):
        return self._queue_ref.op.name

    @property
    def dtypes(self):
        return self._dtypes

    @property
    def shapes(self):
        return self._shapes

    @property
    def names(self):
        return self._names

    # -- enqueue ------------------------------------------------------------------------------
    def _check_enqueue_dtypes(self, vals):
        if isinstance(vals, dict):
            if not self._names:
                raise ValueError("Queue must have names to enqueue a dictionary")
            if sorted(self._names, key=str) != sorted(vals.keys(), key=str):
                raise ValueError(
                    f"Keys in dictionary to enqueue do not match names of Queue.  Dictionary: "
                    f"({sorted(vals.keys(), key=str)}), Queue: ({sorted(self._names, key=str)})"
                )
            vals = [vals[k] for k in self._names]
        else:
            if self._names:
                raise ValueError("You must enqueue a dictionary in a Queue with names")
            if not isinstance(vals, (list, tuple)):
                vals = [vals]
        if len(vals) != len(self._dtypes):
            raise ValueError(
                f"Expected {len(self._dtypes)} components to enqueue in queue "
                f"'{self._name}', got {len(vals)}"
            )
        return [
            convert.convert_to_tensor(v, dtype=d, name=f"component_{i}")
            for i, (v, d) in enumerate(zip(vals, self._dtypes))
        ]

    def enqueue(self, vals, name=None):
        """Enqueues one element; `vals` is a tensor, a list/tuple, or a dict keyed by names."""
        graph = default_graph.get()
        with graph.name_scope(name or f"{self._name}_enqueue") as scope:
            vals = self._check_enqueue_dtypes(vals)
            for val, shape in zip(vals, self._shapes):
                val.shape.assert_is_compatible_with(shape)
            return apply_op("QueueEnqueueV2", [self._queue_ref, vals], name=scope)

    def enqueue_many(self, vals, name=None):
        """Enqueues the slices of `vals` along dimension 0 as separate elements."""
        graph = default_graph.get()
        with graph.name_scope(name or f"{self._name}_EnqueueMany") as scope:
            vals = self._check_enqueue_dtypes(vals)
            batch_dim = Dimension(None)
            for val in vals:
                batch_dim = batch_dim.merge_with(val.shape.with_rank_at_least(1)[0])
            for val, shape in zip(vals, self._shapes):
                val.shape[1:].assert_is_compatible_with(shape)
            return apply_op("QueueEnqueueManyV2", [self._queue_ref, vals], name=scope)

    # -- dequeue ------------------------------------------------------------------------------
    def _dequeue_return_value(self, tensors):
        if self._names:
            return {n: tensors[i] for i, n in enumerate(self._names)}
        if len(tensors) == 1:
            return tensors[0]
        return tensors

    def dequeue(self, name=None):
        """Dequeues one element (blocks while the queue is empty)."""
        op = apply_op(
            "QueueDequeueV2",
            [self._queue_ref],
            name=name or f"{self._name}_Dequeue",
            component_types=self._dtypes,
        )
        for t, shape in zip(op.outputs, self._shapes):
            t.set_shape(shape)
        return self._dequeue_return_value(list(op.outputs))

    def dequeue_many(self, n, name=None):
        """Dequeues `n` elements concatenated along a new dimension 0."""
        n = convert.convert_to_tensor(n, dtype=dtypes_lib.int32, name="n")
        op = apply_op(
            "QueueDequeueManyV2",
            [self._queue_ref, n],
            name=name or f"{self._name}_DequeueMany",
            component_types=self._dtypes,
        )
        value = convert.constant_value(n)
        batch_dim = Dimension(None if value is None else int(value))
        for t, shape in zip(op.outputs, self._shapes):
            t.set_shape(TensorShape([batch_dim]).concatenate(shape))
        return self._dequeue_return_value(list(op.outputs))

    def dequeue_up_to(self, n, name=None):
        """Like dequeue_many, but once the queue is closed returns what is left (at most n)."""
        n = convert.convert_to_tensor(n, dtype=dtypes_lib.int32, name="n")
        op = apply_op(
            "QueueDequeueUpToV2",
            [self._queue_ref, n],
            name=name or f"{self._name}_DequeueUpTo",
            component_types=self._dtypes,
        )
        for t, shape in zip(op.outputs, self._shapes):
            t.set_shape(TensorShape([None]).concatenate(shape))
        return self._dequeue_return_value(list(op.outputs))

    # -- state --------------------------------------------------------------------------------
    def close(self, cancel_pending_enqueues=False, name=None):
        """Closes the queue: later enqueues fail, dequeues drain what is left, then fail with
        OutOfRangeError. With cancel_pending_enqueues, blocked enqueues fail at once."""
        return apply_op(
            "QueueCloseV2",
            [self._queue_ref],
            name=name or f"{self._name}_Close",
            cancel_pending_enqueues=bool(cancel_pending_enqueues),
        )

    def is_closed(self, name=None):
        return apply_op(
            "QueueIsClosedV2", [self._queue_ref], name=name or f"{self._name}_IsClosed"
        ).outputs[0]

    def size(self, name=None):
        return apply_op(
            "QueueSizeV2", [self._queue_ref], name=name or f"{self._name}_Size"
        ).outputs[0]


class FIFOQueue(QueueBase):
    """A queue that dequeues elements in first-in first-out order."""

    def __init__(
        self, capacity, dtypes, shapes=None, names=None, shared_name=None, name="fifo_queue"
    ):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes)
        names = _as_name_list(names, dtypes)
        ref = apply_op(
            "FIFOQueueV2",
            [],
            name=name,
            component_types=dtypes,
            shapes=shapes,
            capacity=capacity,
            shared_name=shared_name or "",
        ).outputs[0]
        super().__init__(dtypes, shapes, names, ref)


class PaddingFIFOQueue(QueueBase):
    """A FIFOQueue whose shapes may have unknown dimensions (None); dequeue_many pads each
    component to the largest element of the batch, with zeros or empty strings."""

    def __init__(
        self, capacity, dtypes, shapes, names=None, shared_name=None, name="padding_fifo_queue"
    ):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes, unknown_dim_allowed=True)
        names = _as_name_list(names, dtypes)
        if len(dtypes) != len(shapes):
            raise ValueError(
                f"Shapes must be provided for all components, but received {len(dtypes)} dtypes "
                f"and {len(shapes)} shapes."
            )
        ref = apply_op(
            "PaddingFIFOQueueV2",
            [],
            name=name,
            component_types=dtypes,
            shapes=shapes,
            capacity=capacity,
            shared_name=shared_name or "",
        ).outputs[0]
        super().__init__(dtypes, shapes, names, ref)


class RandomShuffleQueue(QueueBase):
    """A queue that dequeues a random element, keeping at least `min_after_dequeue` elements
    buffered until it is closed. With a seed (op or graph level) the order is reproducible."""

    def __init__(
        self,
        capacity,
        min_after_dequeue,
        dtypes,
        shapes=None,
        names=None,
        seed=None,
        shared_name=None,
        name="random_shuffle_queue",
    ):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes)
        names = _as_name_list(names, dtypes)
        seed1, seed2 = get_seed(seed)
        if seed1 is None and seed2 is None:
            seed1, seed2 = 0, 0
        elif seed is None and shared_name is not None:
            # A graph seed without an op seed: make seed2 depend only on the graph seed and the
            # shared name, so every worker sharing the queue agrees (TF1 does the same).
            digest = hashlib.md5((str(seed1) + shared_name).encode("utf-8")).hexdigest()
            seed2 = int(digest[:8], 16) & 0x7FFFFFFF
        ref = apply_op(
            "RandomShuffleQueueV2",
            [],
            name=name,
            component_types=dtypes,
            shapes=shapes,
            capacity=capacity,
            min_after_dequeue=min_after_dequeue,
            seed=seed1,
            seed2=seed2,
            shared_name=shared_name or "",
        ).outputs[0]
        super().__init__(dtypes, shapes, names, ref)


class PriorityQueue(QueueBase):
    """A queue that dequeues the element with the smallest priority first. Each element is
    (priority: int64 scalar, *components); dequeue returns the priority as component 0."""

    def __init__(
        self, capacity, types, shapes, names=None, shared_name=None, name="priority_queue"
    ):
        types = _as_type_list(types)
        shapes = _as_shape_list(shapes)
        ref = apply_op(
            "PriorityQueueV2",
            [],
            name=name,
            component_types=types,
            shapes=shapes,
            capacity=capacity,
            shared_name=shared_name or "",
        ).outputs[0]
        priority_dtypes = [dtypes_lib.int64] + types
        priority_shapes = [TensorShape([])] + shapes if shapes else shapes
        super().__init__(priority_dtypes, priority_shapes, names, ref)

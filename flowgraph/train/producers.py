"""Input producers (whitepaper §4.5): queues of file names, indices or slices, optionally
shuffled and limited to a number of epochs, each with its QueueRunner in the graph's
QUEUE_RUNNERS collection. tf.train.batch and its kin (train/input.py) gather what readers make of
them into batches.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import as_shape
from flowgraph.framework import convert, default_graph
from flowgraph.framework.graph import GraphKeys
from flowgraph.framework.operation import Tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import queues
from flowgraph.ops.array_index import gather
from flowgraph.ops.logging import Assert
from flowgraph.ops.random import random_shuffle
from flowgraph.ops.variables import Variable
from flowgraph.train.queue_runner import QueueRunner, add_queue_runner

__all__ = [
    "input_producer",
    "limit_epochs",
    "range_input_producer",
    "slice_input_producer",
    "string_input_producer",
]


def _scalar_summary(name, value):
    from flowgraph.summary import summary_ops

    summary_ops.scalar(name, value)


def limit_epochs(tensor, num_epochs=None, name=None):
    """`tensor`, but after `num_epochs` evaluations an OutOfRangeError (a local variable counts)."""
    if num_epochs is None:
        return tensor
    if num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0 not {num_epochs}.")
    graph = default_graph.get()
    with graph.name_scope(name or "limit_epochs") as scope:
        zero64 = convert.constant(0, dtype=dtypes.int64)
        epochs = Variable(
            zero64, name="epochs", trainable=False, collections=[GraphKeys.LOCAL_VARIABLES]
        )
        counter = epochs.count_up_to(num_epochs)
        with graph.control_dependencies([counter]):
            return array_ops.identity(tensor, name=scope)


def input_producer(
    input_tensor,
    element_shape=None,
    num_epochs=None,
    shuffle=True,
    seed=None,
    capacity=32,
    shared_name=None,
    summary_name=None,
    name=None,
    cancel_op=None,
):
    """A FIFOQueue filled with the rows of `input_tensor` (shuffled each epoch if `shuffle`)
    by a QueueRunner, for `num_epochs` epochs (forever if None)."""
    graph = default_graph.get()
    with graph.name_scope(name or "input_producer") as scope:
        input_tensor = convert.convert_to_tensor(input_tensor, name="input_tensor")
        element_shape = input_tensor.shape[1:].merge_with(as_shape(element_shape))
        if not element_shape.is_fully_defined():
            raise ValueError(
                "Either `input_tensor` must have a fully defined shape or `element_shape` must be "
                "specified"
            )
        if shuffle:
            input_tensor = random_shuffle(input_tensor, seed=seed)
        input_tensor = limit_epochs(input_tensor, num_epochs)
        q = queues.FIFOQueue(
            capacity=capacity,
            dtypes=[input_tensor.dtype.base_dtype],
            shapes=[element_shape],
            shared_name=shared_name,
            name=scope,
        )
        enq = q.enqueue_many([input_tensor])
        add_queue_runner(QueueRunner(q, [enq], cancel_op=cancel_op))
        if summary_name is not None:
            _scalar_summary(
                summary_name, math_ops.cast(q.size(), dtypes.float32) * (1.0 / capacity)
            )
        return q


def string_input_producer(
    string_tensor,
    num_epochs=None,
    shuffle=True,
    seed=None,
    capacity=32,
    shared_name=None,
    name=None,
    cancel_op=None,
):
    """A queue of the strings (file names) of `string_tensor`, for input readers."""
    not_null_err = "string_input_producer requires a non-null input tensor"
    if not isinstance(string_tensor, Tensor) and not len(string_tensor):
        raise ValueError(not_null_err)
    graph = default_graph.get()
    with graph.name_scope(name or "input_producer") as scope:
        string_tensor = convert.convert_to_tensor(string_tensor, dtype=dtypes.string)
        check = Assert(math_ops.greater(array_ops.size(string_tensor), 0), [not_null_err])
        with graph.control_dependencies([check]):
            string_tensor = array_ops.identity(string_tensor)
        return input_producer(
            string_tensor,
            [],
            num_epochs,
            shuffle,
            seed,
            capacity,
            shared_name,
            f"fraction_of_{capacity}_full",
            scope,
            cancel_op,
        )


def range_input_producer(
    limit, num_epochs=None, shuffle=True, seed=None, capacity=32, shared_name=None, name=None
):
    """A queue of the integers 0..limit-1."""
    graph = default_graph.get()
    with graph.name_scope(name or "input_producer") as scope:
        range_tensor = array_ops.range_(limit)
        return input_producer(
            range_tensor,
            [],
            num_epochs,
            shuffle,
            seed,
            capacity,
            shared_name,
            f"fraction_of_{capacity}_full",
            scope,
        )


def slice_input_producer(
    tensor_list, num_epochs=None, shuffle=True, seed=None, capacity=32, shared_name=None, name=None
):
    """One row of each tensor of `tensor_list` per evaluation (the same row index for all)."""
    graph = default_graph.get()
    with graph.name_scope(name or "input_producer"):
        tensor_list = [convert.convert_to_tensor(t) for t in tensor_list]
        if not tensor_list:
            raise ValueError("Expected at least one tensor in slice_input_producer().")
        range_size = array_ops.shape(tensor_list[0])[0]
        queue = range_input_producer(
            range_size,
            num_epochs=num_epochs,
            shuffle=shuffle,
            seed=seed,
            capacity=capacity,
            shared_name=shared_name,
        )
        index = queue.dequeue()
        return [gather(t, index) for t in tensor_list]

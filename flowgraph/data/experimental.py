"""`tf.data.experimental`: the transformations TF1 programs write through `Dataset.apply`
(shuffle_and_repeat, map_and_batch, unbatch, ...) and AUTOTUNE."""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape
from flowgraph.data.dataset_ops import AUTOTUNE, _int64, _seeds
from flowgraph.data.iterator_ops import get_output_classes, get_output_shapes, get_output_types
from flowgraph.data.structure import trace_element_function
from flowgraph.framework import convert

__all__ = [
    "AUTOTUNE",
    "get_output_classes",
    "get_output_shapes",
    "get_output_types",
    "ignore_errors",
    "map_and_batch",
    "parallel_interleave",
    "shuffle_and_repeat",
    "unbatch",
]


def shuffle_and_repeat(buffer_size, count=None, seed=None):
    """`apply` transformation: shuffle (a new order each epoch) then repeat `count` times."""

    def apply(dataset):
        s1, s2 = _seeds(seed)
        inputs = [
            _int64(buffer_size, "buffer_size"),
            s1,
            s2,
            _int64(-1 if count is None else count, "count"),
        ]
        return dataset._unary("ShuffleAndRepeatDataset", inputs, dataset._structure)

    return apply


def map_and_batch(
    map_func, batch_size, num_parallel_batches=None, drop_remainder=False, num_parallel_calls=None
):
    """`apply` transformation: map then batch in one op (MapAndBatchDataset)."""
    if num_parallel_batches is not None and num_parallel_calls is not None:
        raise ValueError("map_and_batch: give num_parallel_batches or num_parallel_calls, not both")

    def apply(dataset):
        defined, structure = trace_element_function(map_func, dataset._structure, "map_and_batch")
        if num_parallel_calls is not None:
            n = num_parallel_calls
        else:
            n = (num_parallel_batches or 1) * _static(batch_size, "batch_size")
        dim = _static(batch_size, "batch_size") if drop_remainder else None
        out = structure.map_shapes(lambda s: TensorShape([dim]).concatenate(s))
        captured = defined.captured_inputs
        drop = convert.convert_to_tensor(drop_remainder, dtype=dtypes.bool_, name="drop_remainder")
        inputs = [captured, _int64(batch_size, "batch_size"), _int64(n, "num_parallel_calls"), drop]
        return dataset._unary(
            "MapAndBatchDataset",
            inputs,
            out,
            f=defined.func_attr,
            Targuments=[t.dtype.base_dtype for t in captured],
        )

    return apply


def _static(value, name) -> int:
    v = value if isinstance(value, int) else convert.constant_value(value)
    if v is None:
        raise ValueError(f"map_and_batch needs a constant {name} here")
    return int(v)


def unbatch():
    return lambda dataset: dataset.unbatch()


def parallel_interleave(
    map_func,
    cycle_length,
    block_length=1,
    sloppy=False,
    buffer_output_elements=None,
    prefetch_input_elements=None,
):
    """tf.data.experimental.parallel_interleave: the elements of Dataset.interleave."""
    if buffer_output_elements is not None or prefetch_input_elements is not None:
        raise NotImplementedError(
            "parallel_interleave(buffer_output_elements=, prefetch_input_elements=) is not "
            "supported"
        )
    return lambda dataset: dataset.interleave(
        map_func, cycle_length, block_length, num_parallel_calls=cycle_length
    )


def ignore_errors():
    raise NotImplementedError("tf.data.experimental.ignore_errors is not supported")

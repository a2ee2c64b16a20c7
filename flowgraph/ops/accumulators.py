"""tf.ConditionalAccumulator and tf.SparseConditionalAccumulator (whitepaper §4.6: gradient
accumulation for synchronous replicas), tf.Barrier, and tf.contrib.staging.StagingArea.

Example:
    acc = tf.ConditionalAccumulator(tf.float32, shape=[10])
    apply = acc.apply_grad(grad, local_step=step)       # dropped if older than the global step
    mean = acc.take_grad(num_required=4)                # waits for 4 gradients, then resets
"""

from __future__ import annotations

from flowgraph.core import dtypes as dtypes_lib
from flowgraph.core.shapes import TensorShape, as_shape, unknown_shape
from flowgraph.framework import convert, default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.indexed_slices import IndexedSlices
from flowgraph.ops import math as math_ops
from flowgraph.ops.queues import _as_name_list, _as_shape_list, _as_type_list

__all__ = [
    "Barrier",
    "ConditionalAccumulator",
    "ConditionalAccumulatorBase",
    "SparseConditionalAccumulator",
    "StagingArea",
]


def _int64(value, name):
    t = convert.convert_to_tensor(value, name=name)
    return t if t.dtype.base_dtype == dtypes_lib.int64 else math_ops.cast(t, dtypes_lib.int64)


def _int32(value, name):
    return convert.convert_to_tensor(value, dtype=dtypes_lib.int32, name=name)


def _int32_input(value):
    """A Python int stays one, so that apply_op names its Const `<op>/num_required` (TF's)."""
    if isinstance(value, int):
        return value
    return _int32(value, "num_required")


def _new_accumulator(op_type, dtype, shape, shared_name, name, reduction_type):
    """The handle (dense: a resource; sparse: a ref) output of a new accumulator op."""
    return apply_op(
        op_type,
        [],
        name=name,
        dtype=dtypes_lib.as_dtype(dtype),
        shape=as_shape(shape) if shape is not None else unknown_shape(),
        shared_name=shared_name or "",
        reduction_type=reduction_type,
    ).outputs[0]


class ConditionalAccumulatorBase:
    """An accumulator's dtype, shape and handle, and its counters."""

    def __init__(self, dtype, shape, accumulator_ref):
        self._dtype = dtypes_lib.as_dtype(dtype)
        self._shape = as_shape(shape) if shape is not None else unknown_shape()
        self._accumulator_ref = accumulator_ref
        self._name = accumulator_ref.op.name.split("/")[-1]
        self._resource = accumulator_ref.dtype.base_dtype == dtypes_lib.resource

    @property
    def accumulator_ref(self):
        return self._accumulator_ref

    @property
    def name(self):
        return self._name

    @property
    def dtype(self):
        return self._dtype

    def _op(self, base):
        return ("Resource" + base) if self._resource else base

    def num_accumulated(self, name=None):
        """How many gradients have been summed since the last take_grad."""
        return apply_op(
            self._op("AccumulatorNumAccumulated"),
            [self._accumulator_ref],
            name=name or f"{self._name}_NumAccumulated",
        ).outputs[0]

    def set_global_step(self, new_global_step, name=None):
        """Raises the global step (gradients with an older local_step are dropped)."""
        return apply_op(
            self._op("AccumulatorSetGlobalStep"),
            [self._accumulator_ref, _int64(new_global_step, "new_global_step")],
            name=name,
        )


class ConditionalAccumulator(ConditionalAccumulatorBase):
    """Sums dense gradients; take_grad returns their mean (reduction_type 'MEAN') or sum."""

    def __init__(
        self,
        dtype,
        shape=None,
        shared_name=None,
        name="conditional_accumulator",
        reduction_type="MEAN",
    ):
        ref = _new_accumulator(
            "ResourceConditionalAccumulator", dtype, shape, shared_name, name, reduction_type
        )
        super().__init__(dtype, shape, ref)

    def apply_grad(self, grad, local_step=0, name=None):
        """Adds `grad` unless `local_step` is older than the global step."""
        grad = convert.convert_to_tensor(grad, dtype=self._dtype, name="grad")
        grad.shape.assert_is_compatible_with(self._shape)
        return apply_op(
            "ResourceAccumulatorApplyGradient",
            [self._accumulator_ref, _int64(local_step, "local_step"), grad],
            name=name,
        )

    def take_grad(self, num_required, name=None):
        """Waits for `num_required` gradients; returns their mean, resets, bumps the step."""
        out = apply_op(
            "ResourceAccumulatorTakeGradient",
            [self._accumulator_ref, _int32_input(num_required)],
            name=name,
            dtype=self._dtype,
        ).outputs[0]
        out.set_shape(self._shape)
        return out


class SparseConditionalAccumulator(ConditionalAccumulatorBase):
    """Sums IndexedSlices gradients row by row; take_grad averages each row over the
    gradients that had it."""

    def __init__(
        self,
        dtype,
        shape=None,
        shared_name=None,
        name="sparse_conditional_accumulator",
        reduction_type="MEAN",
    ):
        ref = _new_accumulator(
            "SparseConditionalAccumulator", dtype, shape, shared_name, name, reduction_type
        )
        super().__init__(dtype, shape, ref)

    def apply_indexed_slices_grad(self, grad, local_step=0, name=None):
        return self.apply_grad(grad.indices, grad.values, grad.dense_shape, local_step, name)

    def apply_grad(self, grad_indices, grad_values, grad_shape=None, local_step=0, name=None):
        values = convert.convert_to_tensor(grad_values, dtype=self._dtype, name="grad_values")
        local_step = _int64(local_step, "local_step")
        indices = _int64(grad_indices, "grad_indices")
        shape = (
            convert.convert_to_tensor([], dtype=dtypes_lib.int64, name="grad_shape")
            if grad_shape is None
            else _int64(grad_shape, "grad_shape")
        )
        return apply_op(
            "SparseAccumulatorApplyGradient",
            [
                self._accumulator_ref,
                local_step,
                indices,
                values,
                shape,
            ],
            name=name,
            has_known_shape=grad_shape is not None,
        )

    def take_grad(self, num_required, name=None):
        """(indices, values, shape) of the averaged gradient."""
        op = apply_op(
            "SparseAccumulatorTakeGradient",
            [self._accumulator_ref, _int32_input(num_required)],
            name=name,
            dtype=self._dtype,
        )
        return tuple(op.outputs)

    def take_indexed_slices_grad(self, num_required, name=None):
        indices, values, shape = self.take_grad(num_required, name)
        return IndexedSlices(values, indices, shape)


class Barrier:
    """Joins values inserted separately per component under string keys; take_many returns
    complete elements in the order their keys first arrived."""

    def __init__(self, types, shapes=None, shared_name=None, name="barrier"):
        self._types = _as_type_list(types)
        shapes = _as_shape_list(shapes)
        self._shapes = shapes if shapes is not None else [unknown_shape() for _ in self._types]
        if len(self._shapes) != len(self._types):
            raise ValueError("Barrier shapes must have the same length as types")
        self._barrier_ref = apply_op(
            "Barrier",
            [],
            name=name,
            component_types=self._types,
            shapes=shapes or [],
            shared_name=shared_name or "",
        ).outputs[0]
        self._name = self._barrier_ref.op.name.split("/")[-1]

    @property
    def barrier_ref(self):
        return self._barrier_ref

    @property
    def name(self):
        return self._barrier_ref.op.name

    def insert_many(self, component_index, keys, values, name=None):
        """Sets component `component_index` of each key (a key's element is complete once
        every component is set)."""
        keys = convert.convert_to_tensor(keys, dtype=dtypes_lib.string, name="keys")
        values = convert.convert_to_tensor(
            values, dtype=self._types[component_index], name="values"
        )
        return apply_op(
            "BarrierInsertMany",
            [self._barrier_ref, keys, values],
            name=name or f"{self._name}_BarrierInsertMany",
            component_index=component_index,
        )

    def take_many(self, num_elements, allow_small_batch=False, timeout=None, name=None):
        """(indices, keys, [component values]) of `num_elements` complete elements."""
        if timeout is not None:
            raise NotImplementedError("Barrier.take_many(timeout=...) (TF: not supported yet)")
        op = apply_op(
            "BarrierTakeMany",
            [self._barrier_ref, _int32(num_elements, "num_elements")],
            name=name or f"{self._name}_BarrierTakeMany",
            component_types=self._types,
            allow_small_batch=allow_small_batch,
        )
        indices, keys, *values = op.outputs
        n = convert.constant_value(op.inputs[1])
        batch = None if allow_small_batch or n is None else int(n)
        indices.set_shape([batch])
        keys.set_shape([batch])
        for v, shape in zip(values, self._shapes):
            v.set_shape(TensorShape([batch]).concatenate(shape))
        return indices, keys, values

    def close(self, cancel_pending_enqueues=False, name=None):
        return apply_op(
            "BarrierClose",
            [self._barrier_ref],
            name=name or f"{self._name}_BarrierClose",
            cancel_pending_enqueues=cancel_pending_enqueues,
        )

    def ready_size(self, name=None):
        return apply_op(
            "BarrierReadySize", [self._barrier_ref], name=name or f"{self._name}_BarrierReadySize"
        ).outputs[0]

    def incomplete_size(self, name=None):
        return apply_op(
            "BarrierIncompleteSize",
            [self._barrier_ref],
            name=name or f"{self._name}_BarrierIncompleteSize",
        ).outputs[0]


class StagingArea:
    """A buffer of tensor tuples between pipeline stages (put/get/peek), e.g. to prefetch
    the next batch onto a device while the current one is used."""

    def __init__(
        self, dtypes, shapes=None, names=None, shared_name=None, capacity=0, memory_limit=0
    ):
        self._dtypes = _as_type_list(dtypes)
        self._shapes = _as_shape_list(shapes, unknown_dim_allowed=False) if shapes else None
        if self._shapes is not None and len(self._shapes) != len(self._dtypes):
            raise ValueError("StagingArea shapes must have the same length as dtypes")
        self._names = _as_name_list(names, self._dtypes)
        graph = default_graph.get()
        self._name = shared_name or graph.unique_name("StagingArea")
        self._attrs = {
            "dtypes": self._dtypes,
            "capacity": capacity,
            "memory_limit": memory_limit,
            "shared_name": self._name,
        }

    @property
    def name(self):
        return self._name

    @property
    def dtypes(self):
        return self._dtypes

    @property
    def shapes(self):
        return self._shapes

    @property
    def names(self):
        return self._names

    def put(self, values, name=None):
        """Adds one tuple (a list, or a dict keyed by names); waits while the area is full."""
        if isinstance(values, dict):
            if not self._names:
                raise ValueError("StagingArea must have names to put a dictionary")
            if sorted(values) != sorted(self._names):
                raise ValueError("Keys in dictionary to put do not match names of staging area.")
            values = [values[n] for n in self._names]
        elif not isinstance(values, (list, tuple)):
            values = [values]
        if len(values) != len(self._dtypes):
            raise ValueError(f"Expected {len(self._dtypes)} values to put, got {len(values)}")
        tensors = [
            convert.convert_to_tensor(v, dtype=d, name=f"component_{i}")
            for i, (v, d) in enumerate(zip(values, self._dtypes))
        ]
        for t, shape in zip(tensors, self._shapes or []):
            t.shape.assert_is_compatible_with(shape)
        return apply_op("Stage", [tensors], name=name or f"{self._name}_put", **self._attrs)

    def _result(self, op):
        outs = list(op.outputs)
        for t, shape in zip(outs, self._shapes or []):
            t.set_shape(shape)
        if self._names:
            return dict(zip(self._names, outs))
        return outs[0] if len(outs) == 1 else outs

    def get(self, name=None):
        """Removes and returns the oldest tuple (waits while empty)."""
        return self._result(
            apply_op("Unstage", [], name=name or f"{self._name}_get", **self._attrs)
        )

    def peek(self, index, name=None):
        """The tuple at `index` without removing it (waits until it exists)."""
        return self._result(
            apply_op(
                "StagePeek",
                [_int32(index, "index")],
                name=name or f"{self._name}_peek",
                **self._attrs,
            )
        )

    def size(self, name=None):
        return apply_op("StageSize", [], name=name or f"{self._name}_size", **self._attrs).outputs[
            0
        ]

    def clear(self, name=None):
        return apply_op("StageClear", [], name=name or f"{self._name}_clear", **self._attrs)

"""Kernels of TensorArray (TF's V3 ops). TensorArrayV3 makes the array in its step's
container on its device (runtime/resources.py StepContainer) and outputs a handle naming it,
a value like a variable's handle (core/resource_handle.py); the other kernels receive the
array that handle names, resolved on their own device (kernels/resource_handles.py). The
array lives until its step ends on its worker: TensorArrayCloseV3 only clears and closes it,
as in TensorFlow."""

from __future__ import annotations

import itertools
import threading

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel

_FLOW = np.float32(0.0)
_ids = itertools.count()  # makes each array's name unique (a loop may create one per iteration)


class TensorArray:
    """Elements by index. Guarded by `lock` (iterations may write concurrently). A gradient
    array sums repeated writes to one index instead of refusing them.

    `shapes[i]` is the shape of the value written at i, kept after a clearing read. A gradient
    array starts with the shapes of its forward array (TF's CopyShapesFrom), so reading an
    index no gradient was written to gives zeros of that element's shape: the gradient of
    outputs nothing used (dynamic_rnn's outputs when only its final state is used).
    """

    def __init__(
        self, name, dtype, size, dynamic_size, clear_after_read, element_shape, accumulate=False
    ):
        self.name = name
        self.dtype = dtype
        self.items = [None] * size
        self.shapes = [None] * size
        self.read_once = [False] * size
        self.dynamic_size = dynamic_size
        self.clear_after_read = clear_after_read
        self.element_shape = element_shape
        self.accumulate = accumulate
        self.closed = False
        self.lock = threading.Lock()

    def _err(self, msg):
        return errors.InvalidArgumentError(None, None, f"TensorArray {self.name}: {msg}")

    def _check_open(self):
        """Guarded by `lock`."""
        if self.closed:
            raise self._err("has already been closed.")

    def write(self, index, value):
        value = np.asarray(value)
        with self.lock:
            self._check_open()
            if index < 0:
                raise self._err(
                    f"Tried to write to index {index} but array size is: {len(self.items)}"
                )
            if index >= len(self.items):
                if not self.dynamic_size:
                    raise self._err(
                        f"Tried to write to index {index} but array is not resizeable and size "
                        f"is: {len(self.items)}"
                    )
                self.items.extend([None] * (index + 1 - len(self.items)))
                self.shapes.extend([None] * (index + 1 - len(self.shapes)))
                self.read_once.extend([False] * (index + 1 - len(self.read_once)))
            if value.dtype != self.dtype.as_numpy_dtype and self.dtype.as_numpy_dtype is not object:
                raise self._err(
                    f"Could not write to TensorArray index {index} because the value dtype is "
                    f"{value.dtype} but TensorArray dtype is {self.dtype.name}."
                )
            shape = self.element_shape
            if (
                shape is not None
                and shape.ndims is not None
                and not shape.is_compatible_with(value.shape)
            ):
                raise self._err(
                    f"Could not write to TensorArray index {index} because the value shape is "
                    f"{list(value.shape)} which is incompatible with the TensorArray's inferred "
                    f"element shape: {shape}"
                )
            known = self.shapes[index]
            if self.accumulate and known is not None and known != value.shape:
                raise self._err(
                    f"Could not aggregate to TensorArray index {index}: shapes "
                    f"{list(known)} vs {list(value.shape)}"
                )
            old = self.items[index]
            if old is not None:
                if not self.accumulate:
                    raise self._err(
                        f"Could not write to TensorArray index {index} because it has already "
                        "been written to."
                    )
                if old.shape != value.shape:
                    raise self._err(
                        f"Could not aggregate to TensorArray index {index}: shapes "
                        f"{list(old.shape)} vs {list(value.shape)}"
                    )
                value = old + value
            self.items[index] = value
            self.shapes[index] = value.shape

    def read(self, index):
        with self.lock:
            self._check_open()
            if not 0 <= index < len(self.items):
                raise self._err(
                    f"Tried to read from index {index} but array size is: {len(self.items)}"
                )
            value = self.items[index]
            if value is None:
                if self.read_once[index]:
                    raise self._err(
                        f"Could not read index {index} twice because it was cleared after a "
                        "previous read (perhaps try setting clear_after_read = false?)"
                    )
                shape = self.element_shape
                if self.accumulate and self.shapes[index] is not None:
                    return np.zeros(self.shapes[index], self.dtype.as_numpy_dtype)
                if self.accumulate and shape is not None and shape.is_fully_defined():
                    return np.zeros(shape.as_list(), self.dtype.as_numpy_dtype)
                raise self._err(
                    f"Could not read from TensorArray index {index} because it has not yet been "
                    "written to."
                )
            if self.clear_after_read and not self.accumulate:
                self.items[index] = None
                self.read_once[index] = True
            return value


@register_kernel("TensorArrayV3", step=True)
def tensor_array(ctx, step, size):
    a = ctx.attrs
    name = f"{a.get('tensor_array_name') or ctx.name}_{next(_ids)}"
    ta = TensorArray(
        name,
        a["dtype"],
        int(size),
        a["dynamic_size"],
        a["clear_after_read"],
        a.get("element_shape"),
    )
    step.container.create(ctx.resources, name, ta)
    return ta, _FLOW


@register_kernel("TensorArrayWriteV3")
def ta_write(ctx, ta, index, value, flow):
    ta.write(int(index), value)
    return _FLOW


@register_kernel("TensorArrayReadV3")
def ta_read(ctx, ta, index, flow):
    return ta.read(int(index))


def _stacked(ta, values, element_shape, what):
    if not values:
        shape = (
            element_shape
            if element_shape is not None and element_shape.is_fully_defined()
            else ta.element_shape
        )
        if shape is None or not shape.is_fully_defined():
            raise ta._err(f"{what} of an empty TensorArray needs a fully defined element_shape")
        return np.zeros([0] + shape.as_list(), ta.dtype.as_numpy_dtype)
    shapes = {v.shape for v in values}
    if len(shapes) > 1:
        raise ta._err(f"{what}: elements have different shapes: {sorted(shapes)}")
    return np.stack(values)


@register_kernel("TensorArrayGatherV3")
def ta_gather(ctx, ta, indices, flow):
    values = [ta.read(int(i)) for i in np.asarray(indices).reshape(-1)]
    return _stacked(ta, values, ctx.attrs.get("element_shape"), "Gather")


@register_kernel("TensorArrayScatterV3")
def ta_scatter(ctx, ta, indices, value, flow):
    indices = np.asarray(indices).reshape(-1)
    if len(indices) != np.shape(value)[0]:
        raise ta._err(f"Scatter: {len(indices)} indices but value has {np.shape(value)[0]} rows")
    for i, row in zip(indices, value):
        ta.write(int(i), row)
    return _FLOW


@register_kernel("TensorArrayConcatV3")
def ta_concat(ctx, ta, flow):
    values = [ta.read(i) for i in range(len(ta.items))]
    lengths = np.array([v.shape[0] for v in values], np.int64)
    if not values:
        rest = ctx.attrs.get("element_shape_except0")
        dims = rest.as_list() if rest is not None and rest.is_fully_defined() else []
        return np.zeros([0] + dims, ta.dtype.as_numpy_dtype), lengths
    return np.concatenate(values), lengths


@register_kernel("TensorArraySplitV3")
def ta_split(ctx, ta, value, lengths, flow):
    lengths = np.asarray(lengths).astype(np.int64)
    if lengths.sum() != np.shape(value)[0]:
        raise ta._err(
            f"Split: lengths sum to {lengths.sum()} but value has {np.shape(value)[0]} rows"
        )
    for i, part in enumerate(np.split(value, np.cumsum(lengths)[:-1])):
        ta.write(i, part)
    return _FLOW


@register_kernel("TensorArraySizeV3")
def ta_size(ctx, ta, flow):
    with ta.lock:
        ta._check_open()
        return np.int32(len(ta.items))


@register_kernel("TensorArrayCloseV3")
def ta_close(ctx, ta):
    """Clears and closes the array; its container drops it when the step ends (TF keeps it
    until then too, so a late use fails as closed rather than as missing)."""
    with ta.lock:
        ta.items = [None] * len(ta.items)
        ta.closed = True


@register_kernel("TensorArrayGradV3")
def ta_grad(ctx, ta, flow):
    """The gradient array of `ta` for one source: made once per (array, source) in the
    forward array's container, named `<array>@<source>` as in TensorFlow."""
    container, name = ctx.resources.name_of(ta)
    source = ctx.attrs["source"]

    def make():
        grad = TensorArray(
            f"{name}@{source}",
            ta.dtype,
            len(ta.items),
            ta.dynamic_size,
            False,
            ta.element_shape,
            accumulate=True,
        )
        grad.shapes = list(ta.shapes)
        return grad

    with ta.lock:  # the shapes copied are those of the writes so far
        grad = ctx.resources.lookup_or_create(container, f"{name}@{source}", make)
    return grad, _FLOW

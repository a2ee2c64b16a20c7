"""Constant evaluation for shape inference (TensorFlow's EvaluateConstantTensor).

TensorFlow's C++ shape refiner infers `tf.slice(x, [0, 0], [tf.constant(1) + 0, -1])` to have
a known size: when a shape function needs an input's value and that input is computed from
constants by small stateless ops, it runs their kernels. This module does the same for our shape
functions (InferenceContext.input_constant), so inferred shapes match TensorFlow's. The Python
`constant_value` stays as narrow as TensorFlow's own, so wrappers build the same graphs as TF.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors, shapes
from flowgraph.core.op_def import get_op_def
from flowgraph.framework import convert
from flowgraph.framework.operation import Tensor
from flowgraph.kernels.base import KernelContext, find_kernel

_MAX_ELEMENTS = 1024  # TF evaluates small tensors only (shape-like values)
_MAX_DEPTH = 16
_SELECTIONS = frozenset({"StridedSlice", "GatherV2", "Gather", "Slice"})
_NEVER = frozenset(
    {
        "Placeholder",
        "PlaceholderV2",
        "PlaceholderWithDefault",
        "Enter",
        "Merge",
        "Switch",
        "NextIteration",
        "Exit",
        "LoopCond",
        "RefEnter",
        "RefMerge",
        "RefSwitch",
        "RefExit",
    }
)


def evaluated_value(tensor: Tensor, _depth: int = 0):
    """`constant_value(tensor)`, or the value its small stateless constant subgraph computes on
    the CPU kernels; None if it depends on anything else or fails."""
    value = convert.constant_value(tensor)
    if value is not None or _depth > _MAX_DEPTH or not isinstance(tensor, Tensor):
        return value
    op = tensor.op
    if op.type in _NEVER or op.control_inputs or tensor.dtype.is_ref_dtype:
        return None
    try:
        op_def = get_op_def(op.type)
    except errors.NotFoundError:
        return None
    if op_def.is_stateful or any(a.is_ref for a in op_def.inputs):
        return None
    if op.type in _SELECTIONS and op.inputs[0].op.type == "Shape":
        return _select_known_dims(op, tensor, _depth)
    inputs = []
    for t in op.inputs:
        v = evaluated_value(t, _depth + 1)
        if v is None or np.size(v) > _MAX_ELEMENTS:
            return None
        inputs.append(np.asarray(v))
    return _run_kernel(op, tensor, inputs)


def evaluated_shape(tensor: Tensor) -> shapes.TensorShape:
    """A 1-D shape tensor read as a partial TensorShape, as TF's shape functions read it: like
    convert.constant_value_as_shape, with small constant subgraphs evaluated and slices of a
    partially known `tf.shape(x)` keeping the dimensions they pick."""
    op = tensor.op
    if op.type == "StridedSlice" and op.inputs[0].op.type == "Shape":
        shape = op.inputs[0].op.inputs[0].shape
        rest = [evaluated_value(t) for t in op.inputs[1:]]
        if shape.ndims is not None and all(v is not None for v in rest):
            picked = _run_kernel(op, tensor, [np.arange(shape.ndims), *map(np.asarray, rest)])
            if picked is not None and picked.ndim == 1:
                return shapes.TensorShape([shape.as_list()[int(i)] for i in picked])
    return convert.constant_value_as_shape(tensor, evaluated_value)


def _select_known_dims(op, tensor, depth):
    """Elements picked out of a partially known shape (`tf.shape(x)[2]`, `tf.shape(x)[1:]`):
    known if every picked dimension is (TF's shape refiner infers these too)."""
    shape = op.inputs[0].op.inputs[0].shape
    if shape.ndims is None:
        return None
    dims = np.array([-1 if d is None else d for d in shape.as_list()], np.int64)
    rest = [evaluated_value(t, depth + 1) for t in op.inputs[1:]]
    if any(v is None for v in rest):
        return None
    out = _run_kernel(op, tensor, [dims, *map(np.asarray, rest)])
    if out is None or np.any(out < 0):
        return None
    return out.astype(op.inputs[0].dtype.as_numpy_dtype)


def _run_kernel(op, tensor, inputs):
    attrs = dict(op._attrs)
    try:
        kdef = find_kernel(op.type, "CPU", attrs)
    except errors.NotFoundError:
        return None
    if kdef.step or kdef.async_:
        return None
    ctx = KernelContext(
        op.name,
        op.type,
        attrs,
        None,
        [t.dtype for t in op.inputs],
        [t.dtype for t in op.outputs],
    )
    try:
        with np.errstate(all="ignore"):
            out = kdef.fn(ctx, *inputs)
    except Exception:  # noqa: BLE001 - an op that fails here fails at run time, with context
        return None
    if len(op.outputs) > 1:
        out = out[tensor.value_index]
    out = np.asarray(out)
    return None if out.size > _MAX_ELEMENTS else out

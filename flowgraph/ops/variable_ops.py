"""Stateful op wrappers (Table 1 "Stateful operations": Variable, Assign, AssignAdd, ...;
TF1's state_ops.py). `tf.Variable` itself lives in `flowgraph/ops/variables.py`.

Each wrapper takes the variable as a reference: a `tf.Variable` (converted with as_ref=True) or
a ref tensor such as the output of `VariableV2` or of another Assign.
"""

from __future__ import annotations

import re

from flowgraph.core import dtypes
from flowgraph.core.shapes import as_shape
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import apply_op

__all__ = [
    "assign",
    "assign_add",
    "assign_sub",
    "count_up_to",
    "is_variable_initialized",
    "scatter_add",
    "scatter_div",
    "scatter_max",
    "scatter_min",
    "scatter_mul",
    "scatter_nd_add",
    "scatter_nd_sub",
    "scatter_nd_update",
    "scatter_sub",
    "scatter_update",
]


def variable_op_v2(shape, dtype, name="Variable", container="", shared_name=""):
    """The raw VariableV2 op: its output is the variable's reference tensor."""
    return apply_op(
        "VariableV2",
        [],
        name=name,
        graph=default_graph.get(),
        shape=as_shape(shape),
        dtype=dtypes.as_dtype(dtype).base_dtype,
        container=container,
        shared_name=shared_name,
    ).outputs[0]


def _is_ref_like(ref, method: str = "assign") -> bool:
    """Ref tensors and ref Variables go to the ref ops; objects without a ref dtype that have
    their own `method` (resource variables) use it; the rest reach the op, which rejects them."""
    dtype = getattr(ref, "dtype", None)
    if isinstance(dtype, dtypes.DType) and dtype.is_ref_dtype:
        return True
    return not hasattr(ref, method)


def assign(ref, value, validate_shape=None, use_locking=None, name=None):
    """Stores `value` in `ref`; returns `ref` after the assignment (a ref tensor).

    Example: sess.run(tf.assign(v, [1.0, 2.0]))
    """
    if not _is_ref_like(ref):
        return ref.assign(value, name=name)
    return apply_op(
        "Assign", [ref, value], name=name, validate_shape=validate_shape, use_locking=use_locking
    ).outputs[0]


def assign_add(ref, value, use_locking=None, name=None):
    """ref += value; returns `ref` after the update. Example: tf.assign_add(step, 1)"""
    if not _is_ref_like(ref, "assign_add"):
        return ref.assign_add(value, name=name)
    return apply_op("AssignAdd", [ref, value], name=name, use_locking=use_locking).outputs[0]


def assign_sub(ref, value, use_locking=None, name=None):
    """ref -= value; returns `ref` after the update."""
    if not _is_ref_like(ref, "assign_sub"):
        return ref.assign_sub(value, name=name)
    return apply_op("AssignSub", [ref, value], name=name, use_locking=use_locking).outputs[0]


def count_up_to(ref, limit, name=None):
    """Increments the int scalar `ref` and returns its old value; OutOfRangeError at `limit`."""
    return apply_op("CountUpTo", [ref], name=name, limit=limit).outputs[0]


def is_variable_initialized(variable, name=None):
    """A bool scalar: whether `variable` has been assigned a value in this Session."""
    if not _is_ref_like(variable, "is_initialized"):
        return variable.is_initialized(name=name)
    return apply_op("IsVariableInitialized", [variable], name=name).outputs[0]


def _scatter(op_type, default_locking):
    method = re.sub(r"(?<!^)(?=[A-Z])", "_", op_type).lower()  # ScatterNdAdd -> scatter_nd_add

    def wrapper(ref, indices, updates, use_locking=default_locking, name=None):
        if not _is_ref_like(ref, method):  # a resource variable scatters through its method
            if "_nd_" in method:
                return getattr(ref, method)(indices, updates, name=name)
            from flowgraph.framework.indexed_slices import IndexedSlices

            return getattr(ref, method)(IndexedSlices(updates, indices), name=name)
        return apply_op(
            op_type, [ref, indices, updates], name=name, use_locking=use_locking
        ).outputs[0]

    return wrapper


scatter_update = _scatter("ScatterUpdate", True)
scatter_update.__doc__ = """ref[indices, ...] = updates; with duplicate indices one write wins.

Example: tf.scatter_update(v, [0, 2], [[1., 1.], [2., 2.]])"""
scatter_add = _scatter("ScatterAdd", False)
scatter_add.__doc__ = "ref[indices, ...] += updates; duplicate indices accumulate."
scatter_sub = _scatter("ScatterSub", False)
scatter_sub.__doc__ = "ref[indices, ...] -= updates; duplicate indices accumulate."
scatter_mul = _scatter("ScatterMul", False)
scatter_mul.__doc__ = "ref[indices, ...] *= updates; duplicate indices multiply together."
scatter_div = _scatter("ScatterDiv", False)
scatter_div.__doc__ = "ref[indices, ...] /= updates (integers truncate toward zero)."
scatter_min = _scatter("ScatterMin", False)
scatter_min.__doc__ = "ref[indices, ...] = minimum(ref[indices, ...], updates)."
scatter_max = _scatter("ScatterMax", False)
scatter_max.__doc__ = "ref[indices, ...] = maximum(ref[indices, ...], updates)."
scatter_nd_update = _scatter("ScatterNdUpdate", True)
scatter_nd_update.__doc__ = """ref[tuple(indices[i])] = updates[i] for index tuples in the last
axis of `indices`.

Example: tf.scatter_nd_update(v, [[0, 1], [2, 0]], [5., 6.])"""
scatter_nd_add = _scatter("ScatterNdAdd", False)
scatter_nd_add.__doc__ = "ref[tuple(indices[i])] += updates[i]; duplicates accumulate."
scatter_nd_sub = _scatter("ScatterNdSub", False)
scatter_nd_sub.__doc__ = "ref[tuple(indices[i])] -= updates[i]; duplicates accumulate."
for _fn, _name in (
    (scatter_update, "scatter_update"),
    (scatter_add, "scatter_add"),
    (scatter_sub, "scatter_sub"),
    (scatter_mul, "scatter_mul"),
    (scatter_div, "scatter_div"),
    (scatter_min, "scatter_min"),
    (scatter_max, "scatter_max"),
    (scatter_nd_update, "scatter_nd_update"),
    (scatter_nd_add, "scatter_nd_add"),
    (scatter_nd_sub, "scatter_nd_sub"),
):
    _fn.__name__ = _fn.__qualname__ = _name

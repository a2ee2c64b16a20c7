"""Slot variables: per-variable optimizer state (momentum, Adam's m and v, moving averages),
created next to the variable they belong to (TF1's slot_creator.py).

A slot of variable `layer/w` made for optimizer `Momentum` is the variable `layer/w/Momentum`: it
is created in the variable scope `<primary op name>/<name>` (a default name, so a second slot
with the same name becomes `..._1`, as in TF), is not trainable, and is colocated with its
primary, so placement (§3.2.1) puts the update and its state on one device.
"""

from __future__ import annotations

import contextlib

from flowgraph.core.protos import SaveSliceInfoDef
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.operation import Tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import init_ops, variable_scope, variables

__all__ = ["create_slot", "create_slot_with_initializer", "create_zeros_slot"]


def _is_resource(primary) -> bool:
    dtype = getattr(primary, "dtype", None)
    return getattr(primary, "handle", None) is not None and not getattr(
        dtype, "is_ref_dtype", False
    )


def _slot_kind(primary):
    """use_resource for a slot: its primary's kind (TF1); a Tensor primary takes the default."""
    if _is_resource(primary):
        return True
    return False if isinstance(primary, variables.Variable) else None


def _create_slot_var(primary, val, shape, dtype, validate_shape):
    """get_variable('') inside the slot's scope names the variable exactly after the scope."""
    scope = variable_scope.get_variable_scope()
    partitioner = scope.partitioner
    scope.set_partitioner(None)  # slots mirror an unpartitioned primary
    try:
        slot = variable_scope.get_variable(
            "",
            initializer=val,
            trainable=False,
            use_resource=_slot_kind(primary),
            shape=shape if callable(val) else None,
            dtype=dtype,
            validate_shape=validate_shape,
        )
    finally:
        scope.set_partitioner(partitioner)
    _mirror_slice_info(primary, slot)
    return slot


def _mirror_slice_info(primary, slot):
    """A slot of a partition is a partition of the full slot ("emb/Momentum"), so checkpoints
    hold the slot as one tensor, as TensorFlow's do."""
    info = getattr(primary, "_save_slice_info", None)
    if info is None:
        return
    suffix = slot.op.name[len(primary.op.name) + 1 :]
    slot._save_slice_info = SaveSliceInfoDef(
        full_name=f"{info.full_name}/{suffix}",
        full_shape=info.full_shape,
        var_offset=info.var_offset,
        var_shape=info.var_shape,
    )


@contextlib.contextmanager
def _slot_scope(primary, name: str, colocate: bool):
    """In the primary's graph, the variable scope `<primary>/<name>` (made unique), colocated
    with the primary unless `colocate` is False."""
    graph = primary.op.graph
    colocation = (
        graph.colocate_with(primary.op)
        if colocate
        else graph.colocate_with(None, ignore_existing=True)
    )
    with (
        graph.as_default(),
        variable_scope.variable_scope(None, primary.op.name + "/" + name),
        colocation,
    ):
        yield


def create_slot(primary, val, name, colocate_with_primary=True):
    """A slot for `primary` initialized to the tensor `val`, named `<primary>/<name>`.

    Example: avg = slot_creator.create_slot(v, v.initialized_value(), "ExponentialMovingAverage")
    """
    val = val if isinstance(val, Tensor) else convert_to_tensor(val)
    validate_shape = val.get_shape().is_fully_defined()
    with _slot_scope(primary, name, colocate_with_primary):
        return _create_slot_var(primary, val, None, None, validate_shape)


def create_slot_with_initializer(
    primary, initializer, shape, dtype, name, colocate_with_primary=True
):
    """A slot of `shape` and `dtype` for `primary` whose value comes from `initializer`.

    Example: create_slot_with_initializer(v, tf.ones_initializer(), v.shape, v.dtype, "RMSProp")
    """
    validate_shape = shape.is_fully_defined()
    with _slot_scope(primary, name, colocate_with_primary):
        return _create_slot_var(primary, initializer, shape, dtype, validate_shape)


def create_zeros_slot(primary, name, dtype=None, colocate_with_primary=True):
    """A zero-initialized slot shaped like `primary` (its dtype unless `dtype` is given).

    Example: create_zeros_slot(v, "Momentum") creates the variable `v/Momentum`.
    """
    dtype = primary.dtype.base_dtype if dtype is None else dtype
    shape = primary.get_shape()
    if shape.is_fully_defined():
        return create_slot_with_initializer(
            primary, init_ops.zeros_initializer(), shape, dtype, name, colocate_with_primary
        )
    # The shape is known only at run time: the slot starts from the primary's initialized shape.
    with primary.op.graph.as_default():
        source = primary.initialized_value() if hasattr(primary, "initialized_value") else primary
        val = array_ops.zeros(array_ops.shape(source), dtype=dtype)
    return create_slot(primary, val, name, colocate_with_primary)

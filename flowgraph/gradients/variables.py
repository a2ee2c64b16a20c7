"""Gradient declarations of stateful ops (whitepaper §4.1, §4.7).

A variable is a leaf of the gradient computation: gradients reach its value through the
Identity that reads it (`w/read`) or through ReadVariableOp for resource variables. The ops that
modify a variable are not differentiable (TF's state_grad.py): a gradient never flows through an
update.
"""

from __future__ import annotations

from flowgraph.gradients.array import gathered_rows, index_type
from flowgraph.gradients.registry import not_differentiable, register_gradient
from flowgraph.gradients.util import build


@register_gradient("ReadVariableOp")
def _read_variable_grad(op, grad):
    """The value read is the variable's: its gradient goes to the resource handle."""
    return grad


@register_gradient("ResourceGather")
def _resource_gather_grad(op, grad):
    """The gathered rows' gradients, kept sparse: IndexedSlices on the handle whose dense shape
    is the variable's (VariableShape), so optimizers update only those rows."""
    if op.get_attr("batch_dims") != 0:
        raise NotImplementedError(f"the gradient of ResourceGather {op.name} with batch_dims != 0")
    handle, indices = op.inputs
    params_shape = build("VariableShape", handle, out_type=index_type(indices))
    inner = grad.shape[indices.shape.ndims :] if indices.shape.ndims is not None else None
    return gathered_rows(params_shape, indices, grad, inner), None


for _op_type in (
    "Assign",
    "AssignAdd",
    "AssignSub",
    "AssignVariableOp",
    "AssignAddVariableOp",
    "AssignSubVariableOp",
    "IsVariableInitialized",
    "VarIsInitializedOp",
    "DestroyTemporaryVariable",
    "CountUpTo",
    "ScatterUpdate",
    "ScatterAdd",
    "ScatterSub",
    "ScatterMul",
    "ScatterDiv",
    "ScatterMin",
    "ScatterMax",
    "ScatterNdUpdate",
    "ScatterNdAdd",
    "ScatterNdSub",
    "VariableShape",
    "ResourceScatterUpdate",
    "ResourceScatterAdd",
    "ResourceScatterSub",
    "ResourceScatterMul",
    "ResourceScatterDiv",
    "ResourceScatterMin",
    "ResourceScatterMax",
    "ResourceScatterNdUpdate",
    "ResourceScatterNdAdd",
    "ResourceScatterNdSub",
    "ResourceCountUpTo",
):
    not_differentiable(_op_type)

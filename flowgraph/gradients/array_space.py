"""Gradients of Roll, SpaceToDepth/DepthToSpace and SpaceToBatch(ND)/BatchToSpace(ND): each op
only moves elements, so its gradient is the inverse move of the incoming gradient."""

from __future__ import annotations

from flowgraph.gradients.registry import register_gradient
from flowgraph.gradients.util import build


@register_gradient("Roll")
def _roll_grad(op, grad):
    shift, axis = op.inputs[1], op.inputs[2]
    return build("Roll", grad, build("Neg", shift), axis), None, None


@register_gradient("SpaceToDepth")
def _space_to_depth_grad(op, grad):
    attrs = {k: op.get_attr(k) for k in ("block_size", "data_format")}
    return build("DepthToSpace", grad, **attrs)


@register_gradient("DepthToSpace")
def _depth_to_space_grad(op, grad):
    attrs = {k: op.get_attr(k) for k in ("block_size", "data_format")}
    return build("SpaceToDepth", grad, **attrs)


@register_gradient("SpaceToBatchND")
def _space_to_batch_nd_grad(op, grad):
    return build("BatchToSpaceND", grad, op.inputs[1], op.inputs[2]), None, None


@register_gradient("BatchToSpaceND")
def _batch_to_space_nd_grad(op, grad):
    return build("SpaceToBatchND", grad, op.inputs[1], op.inputs[2]), None, None


@register_gradient("SpaceToBatch")
def _space_to_batch_grad(op, grad):
    return build("BatchToSpace", grad, op.inputs[1], block_size=op.get_attr("block_size")), None


@register_gradient("BatchToSpace")
def _batch_to_space_grad(op, grad):
    return build("SpaceToBatch", grad, op.inputs[1], block_size=op.get_attr("block_size")), None

"""Gradient functions of 3-D convolution and pooling (whitepaper §4.1), as TF's nn_grad.py: each
of Conv3D, Conv3DBackpropInputV2 and Conv3DBackpropFilterV2 is differentiated by the other two;
MaxPool3D by MaxPool3DGrad, AvgPool3D by AvgPool3DGrad, whose own gradient is AvgPool3D."""

from __future__ import annotations

from flowgraph.gradients.registry import register_gradient
from flowgraph.gradients.util import build, shape

_CONV_ATTRS = ("strides", "padding", "data_format", "dilations")
_POOL_ATTRS = ("ksize", "strides", "padding", "data_format")


def _attrs(op, names) -> dict:
    return {k: op.get_attr(k) for k in names}


@register_gradient("Conv3D")
def _conv3d_grad(op, grad):
    x, f = op.inputs
    a = _attrs(op, _CONV_ATTRS)
    return (
        build("Conv3DBackpropInputV2", shape(x), f, grad, **a),
        build("Conv3DBackpropFilterV2", x, shape(f), grad, **a),
    )


@register_gradient("Conv3DBackpropInputV2")
def _conv3d_backprop_input_grad(op, grad):
    _, f, dy = op.inputs
    a = _attrs(op, _CONV_ATTRS)
    return (
        None,
        build("Conv3DBackpropFilterV2", grad, shape(f), dy, **a),
        build("Conv3D", grad, f, **a),
    )


@register_gradient("Conv3DBackpropFilterV2")
def _conv3d_backprop_filter_grad(op, grad):
    x, _, dy = op.inputs
    a = _attrs(op, _CONV_ATTRS)
    return (
        build("Conv3DBackpropInputV2", shape(x), grad, dy, **a),
        None,
        build("Conv3D", x, grad, **a),
    )


@register_gradient("MaxPool3D")
def _max_pool3d_grad(op, grad):
    return build("MaxPool3DGrad", op.inputs[0], op.outputs[0], grad, **_attrs(op, _POOL_ATTRS))


@register_gradient("AvgPool3D")
def _avg_pool3d_grad(op, grad):
    return build("AvgPool3DGrad", shape(op.inputs[0]), grad, **_attrs(op, _POOL_ATTRS))


@register_gradient("AvgPool3DGrad")
def _avg_pool3d_grad_grad(op, grad):
    return None, build("AvgPool3D", grad, **_attrs(op, _POOL_ATTRS))

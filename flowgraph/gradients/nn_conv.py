"""Gradient functions of convolution and pooling (whitepaper §4.1), with TF1's op types.

Conv2D's input gradient is Conv2DBackpropInput and its filter gradient Conv2DBackpropFilter; the
two backprop ops are each other's and Conv2D's duals, so each has a gradient made of the other
two (second-order gradients of convolutional nets). MaxPool's gradient is MaxPoolGrad, whose own
gradient is MaxPoolGradGrad (and back); AvgPool's is AvgPoolGrad, whose gradient is AvgPool.
"""

from __future__ import annotations

from flowgraph.gradients.registry import register_gradient
from flowgraph.gradients.util import build, shape, zeros_like

_CONV_ATTRS = (
    "strides",
    "padding",
    "explicit_paddings",
    "data_format",
    "dilations",
    "use_cudnn_on_gpu",
)
_POOL_ATTRS = ("ksize", "strides", "padding", "data_format")


def _attrs(op, names) -> dict:
    """The listed attrs of `op` that its OpDef declares (depthwise ops have no use_cudnn_on_gpu)."""
    return {k: op.get_attr(k) for k in names if k in op.op_def.attrs}


def _conv_family(forward: str):
    """Gradient functions for a convolution op type and its two backprop ops."""
    backprop_input, backprop_filter = f"{forward}BackpropInput", f"{forward}BackpropFilter"

    def forward_grad(op, grad):
        x, f = op.inputs
        a = _attrs(op, _CONV_ATTRS)
        return (
            build(backprop_input, shape(x), f, grad, **a),
            build(backprop_filter, x, shape(f), grad, **a),
        )

    def backprop_input_grad(op, grad):
        _, f, dy = op.inputs
        a = _attrs(op, _CONV_ATTRS)
        return None, build(backprop_filter, grad, shape(f), dy, **a), build(forward, grad, f, **a)

    def backprop_filter_grad(op, grad):
        x, _, dy = op.inputs
        a = _attrs(op, _CONV_ATTRS)
        return build(backprop_input, shape(x), grad, dy, **a), None, build(forward, x, grad, **a)

    register_gradient(forward)(forward_grad)
    register_gradient(backprop_input)(backprop_input_grad)
    register_gradient(backprop_filter)(backprop_filter_grad)


_conv_family("Conv2D")
_conv_family("DepthwiseConv2dNative")


@register_gradient("MaxPool")
def _max_pool_grad(op, grad):
    return build("MaxPoolGrad", op.inputs[0], op.outputs[0], grad, **_attrs(op, _POOL_ATTRS))


@register_gradient("MaxPoolGrad")
def _max_pool_grad_grad(op, grad):
    x, y, _ = op.inputs
    return (
        zeros_like(x),
        zeros_like(y),
        build("MaxPoolGradGrad", x, y, grad, **_attrs(op, _POOL_ATTRS)),
    )


@register_gradient("MaxPoolGradGrad")
def _max_pool_grad_grad_grad(op, grad):
    x, y, _ = op.inputs
    return zeros_like(x), zeros_like(y), build("MaxPoolGrad", x, y, grad, **_attrs(op, _POOL_ATTRS))


@register_gradient("AvgPool")
def _avg_pool_grad(op, grad):
    return build("AvgPoolGrad", shape(op.inputs[0]), grad, **_attrs(op, _POOL_ATTRS))


@register_gradient("AvgPoolGrad")
def _avg_pool_grad_grad(op, grad):
    return None, build("AvgPool", grad, **_attrs(op, _POOL_ATTRS))

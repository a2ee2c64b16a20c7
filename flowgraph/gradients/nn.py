"""Gradient functions of the neural-net row (whitepaper §4.1), keyed by op type, with TF1's
formulas and op types: an activation's gradient is its *Grad op, BiasAdd's is BiasAddGrad,
a cross-entropy's is its precomputed `backprop` output scaled by the loss gradient, and
FusedBatchNorm's is FusedBatchNormGrad. Convolution and pooling are in nn_conv.py.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.gradients.registry import not_differentiable, register_gradient
from flowgraph.gradients.util import (
    build,
    cast,
    constant,
    is_zeros,
    ones_like,
    reduce_sum,
    reshape,
    shape,
    zeros_like,
)


def _expand_last(t):
    """t[..., None]: a per-example loss gradient broadcast over the classes."""
    return build("ExpandDims", t, -1)


# -- activations: op type -> (gradient op, which tensor it reads: "x" input, "y" output) ----------
_ACTIVATION_GRADS = {
    "Relu": ("ReluGrad", "y"),
    "Relu6": ("Relu6Grad", "y"),
    "Elu": ("EluGrad", "y"),
    "Selu": ("SeluGrad", "y"),
    "Softplus": ("SoftplusGrad", "x"),
    "Softsign": ("SoftsignGrad", "x"),
    "LeakyRelu": ("LeakyReluGrad", "x"),
}


def _activation_grad(grad_op: str, reads: str):
    def gradient(op, grad):
        second = op.outputs[0] if reads == "y" else op.inputs[0]
        attrs = {"alpha": op.get_attr("alpha")} if grad_op == "LeakyReluGrad" else {}
        return build(grad_op, grad, second, **attrs)

    return gradient


for _op, (_grad_op, _reads) in _ACTIVATION_GRADS.items():
    register_gradient(_op)(_activation_grad(_grad_op, _reads))


@register_gradient("ReluGrad")
def _relu_grad_grad(op, grad):
    x = op.inputs[1]
    return build("ReluGrad", grad, x), zeros_like(x)


@register_gradient("Relu6Grad")
def _relu6_grad_grad(op, grad):
    x = op.inputs[1]
    return build("Relu6Grad", grad, x), zeros_like(x)


@register_gradient("LeakyReluGrad")
def _leaky_relu_grad_grad(op, grad):
    x = op.inputs[1]
    return build("LeakyReluGrad", grad, x, alpha=op.get_attr("alpha")), zeros_like(x)


def _negative_part_grad_grad(grad_op):
    """EluGrad/SeluGrad(dy, y) are linear in dy; where y < 0 they also grow with y at rate dy."""

    def gradient(op, grad):
        dy, y = op.inputs
        zeros = zeros_like(y)
        negative = build("Less", y, zeros)
        return build(grad_op, grad, y), build("SelectV2", negative, build("Mul", grad, dy), zeros)

    return gradient


register_gradient("EluGrad")(_negative_part_grad_grad("EluGrad"))
register_gradient("SeluGrad")(_negative_part_grad_grad("SeluGrad"))


@register_gradient("SoftplusGrad")
def _softplus_grad_grad(op, grad):
    """d/dx [dy * sigmoid(x)] = dy / (exp(-x) + 2 + exp(x))."""
    dy, x = op.inputs
    denominator = build(
        "AddV2", build("AddV2", build("Exp", build("Neg", x)), 2.0), build("Exp", x)
    )
    return build("SoftplusGrad", grad, x), build("RealDiv", build("Mul", grad, dy), denominator)


# -- softmax -------------------------------------------------------------------------------------
@register_gradient("Softmax")
def _softmax_grad(op, grad):
    """(grad - sum(grad * softmax, -1)) * softmax."""
    softmax = op.outputs[0]
    inner = reduce_sum(build("Mul", grad, softmax), [-1], keep_dims=True)
    return build("Mul", build("Sub", grad, inner), softmax)


@register_gradient("LogSoftmax")
def _log_softmax_grad(op, grad):
    """grad - sum(grad, -1) * softmax."""
    softmax = build("Exp", op.outputs[0])
    return build("Sub", grad, build("Mul", reduce_sum(grad, [-1], keep_dims=True), softmax))


# -- bias -----------------------------------------------------------------------------------------
@register_gradient("BiasAdd")
def _bias_add_grad(op, grad):
    return grad, build("BiasAddGrad", grad, data_format=op.get_attr("data_format"))


@register_gradient("BiasAddV1")
def _bias_add_v1_grad(op, grad):
    return grad, build("BiasAddGrad", grad, data_format="NHWC")


@register_gradient("BiasAddGrad")
def _bias_add_grad_grad(op, grad):
    """BiasAddGrad sums over all but the channel axis, so its gradient broadcasts back."""
    dy = op.inputs[0]
    rank = dy.shape.ndims
    if rank is None:
        raise ValueError("the gradient of BiasAddGrad needs an input of known rank")
    channel = 1 if op.get_attr("data_format") == "NCHW" else rank - 1
    bias_shape = [1] * rank
    bias_shape[channel] = -1
    return build("Mul", ones_like(dy), reshape(grad, bias_shape))


# -- losses ---------------------------------------------------------------------------------------
@register_gradient("L2Loss")
def _l2_loss_grad(op, grad):
    return build("Mul", op.inputs[0], grad)


def _softmax_grad_grad(logits, grad_grad):
    """The part of the logits' gradient coming from a gradient of the `backprop` output."""
    softmax = build("Softmax", logits)
    inner = reduce_sum(build("Mul", grad_grad, softmax), [1], keep_dims=True)
    return build("Mul", build("Sub", grad_grad, inner), softmax)


@register_gradient("SoftmaxCrossEntropyWithLogits")
def _softmax_xent_grad(op, grad_loss, grad_grad):
    """d loss / d logits = backprop (softmax - labels); d loss / d labels = -log_softmax."""
    logits = op.inputs[0]
    grad = build("Mul", _expand_last(grad_loss), op.outputs[1])
    if not is_zeros(grad_grad):
        grad = build("AddV2", grad, _softmax_grad_grad(logits, grad_grad))
    labels_grad = build("Mul", _expand_last(grad_loss), build("Neg", build("LogSoftmax", logits)))
    return grad, labels_grad


@register_gradient("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_xent_grad(op, grad_loss, grad_grad):
    grad = build("Mul", _expand_last(grad_loss), op.outputs[1])
    if not is_zeros(grad_grad):
        grad = build("AddV2", grad, _softmax_grad_grad(op.inputs[0], grad_grad))
    return grad, None


# -- normalization --------------------------------------------------------------------------------
@register_gradient("LRN")
def _lrn_grad(op, grad):
    attrs = {k: op.get_attr(k) for k in ("depth_radius", "bias", "alpha", "beta")}
    return build("LRNGrad", grad, op.inputs[0], op.outputs[0], **attrs)


def _fused_batch_norm_grad(grad_op: str, reserves: int):
    """In training the statistics are the batch's (the reserve outputs); in inference the
    population mean and variance inputs, which get no gradient."""

    def gradient(op, grad_y, *unused):
        x, scale = op.inputs[0], op.inputs[1]
        training = op.get_attr("is_training")
        if training:
            stats = [op.outputs[3 + i] for i in range(reserves)]
        else:
            stats = [op.inputs[3], op.inputs[4]] + [op.outputs[5]] * (reserves - 2)
        dx, dscale, doffset, _, _ = build(
            grad_op,
            grad_y,
            x,
            scale,
            *stats,
            epsilon=op.get_attr("epsilon"),
            data_format=op.get_attr("data_format"),
            is_training=training,
        )
        return dx, dscale, doffset, None, None

    return gradient


register_gradient("FusedBatchNorm")(_fused_batch_norm_grad("FusedBatchNormGrad", 2))
register_gradient("FusedBatchNormV2")(_fused_batch_norm_grad("FusedBatchNormGradV2", 2))
register_gradient("FusedBatchNormV3")(_fused_batch_norm_grad("FusedBatchNormGradV3", 3))


# -- top-k ----------------------------------------------------------------------------------------
def _top_k_grad_impl(op, grad):
    """Scatters each value's gradient back to the input position its index names."""
    x, indices = op.inputs[0], op.outputs[1]
    if indices.dtype.base_dtype == dtypes.int16:  # OneHot takes no int16 indices
        indices = cast(indices, dtypes.int32)
    depth = x.shape.as_list()[-1] if x.shape.ndims else None
    if depth is None:
        depth = build(
            "StridedSlice",
            shape(x),
            [-1],
            [0],
            [1],
            shrink_axis_mask=1,
            begin_mask=0,
            end_mask=1,
            ellipsis_mask=0,
            new_axis_mask=0,
        )
    on, off = constant(1, grad.dtype, name="on_value"), constant(0, grad.dtype, name="off_value")
    one_hot = build("OneHot", indices, depth, on, off, axis=-1)
    return reduce_sum(build("Mul", one_hot, _expand_last(grad)), [-2])


@register_gradient("TopKV2")
def _top_k_v2_grad(op, grad, _):
    return _top_k_grad_impl(op, grad), None


@register_gradient("TopK")
def _top_k_grad(op, grad, _):
    return _top_k_grad_impl(op, grad)


for _op in (
    "InTopK",
    "InTopKV2",
    "UniformCandidateSampler",
    "LogUniformCandidateSampler",
    "ComputeAccidentalHits",
):
    not_differentiable(_op)

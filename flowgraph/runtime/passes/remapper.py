"""Fused kernels for common chains (TensorFlow Grappler's remapper, `_FusedConv2D`):

    Relu(BiasAdd(Conv2D(x, f), b))  -> _FusedConv2D(x, f, b, fused_ops=[BiasAdd, Relu])
    BiasAdd(Conv2D(x, f), b)        -> _FusedConv2D(x, f, b, fused_ops=[BiasAdd])
    ReluGrad(MaxPoolGrad(x, y, g), x) -> _FusedMaxPoolGrad(x, y, g, fused_ops=[ReluGrad])

Unfused, the three kernels make three passes over the convolution's output, each reading and
writing the whole tensor (LeNet's conv1: 6.4 MB; BiasAdd 0.26 ms and Relu 0.16 ms beside the
convolution). The fused kernel (kernels/cpu/conv.py) adds the bias and clamps each block of
output rows right after its GEMM has written it, while the block is in cache. The results are
the same bits as the unfused ops' (the same additions and comparisons, in the same type).
The third is a CNN's backward pass through ReLU -> max-pool (ours, not TF's): MaxPoolGrad
already reads each cell of x to find its window's maximum, so it applies ReluGrad's mask
(x > 0) to the cell it writes, instead of ReluGrad's second pass over the input-sized gradient
(the digits CNN's conv1: ReluGrad 38 us of a 64x8x8x32 gradient).

The fused node takes the last node's name (the Relu's, or the BiasAdd's), so its readers, the
fetches of it and the gradient ops that read it (ReluGrad reads the Relu's output) are
unchanged; the gradient graph never reads the Conv2D's or the BiasAdd's output (their gradients
read their inputs and the incoming gradient), so a training step fuses too. Only when nothing
else can see the difference: the Conv2D's output (and the BiasAdd's, when a Relu is fused) has
that one reader, by one data edge, is not a target and waits for no control reader; the nodes
share a CPU device (the kernel's), their type is one the kernels compute (half, float,
double) and the BiasAdd's data_format is the Conv2D's. The fused node waits for every control
input of the nodes it replaces. Likewise a MaxPoolGrad is fused only where its output has the
ReluGrad as its one reader and the ReluGrad's features are the pool's own input tensor.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.device_spec import parse
from flowgraph.runtime.nodes import Node, make_node
from flowgraph.runtime.passes import rules

FUSED_OP = "_FusedConv2D"
FUSED_POOL_GRAD = "_FusedMaxPoolGrad"
_TYPES = frozenset({dtypes.float16, dtypes.float32, dtypes.float64})
_CONV_ATTRS = ("T", "strides", "padding", "explicit_paddings", "data_format", "dilations")


def fuse_conv_epilogues(nodes: list[Node], keep: frozenset) -> list[Node]:
    """`nodes` with each Conv2D -> BiasAdd (-> Relu) chain fused and each MaxPoolGrad ->
    ReluGrad pair (see the module doc)."""
    only_reader = rules.only_reader(nodes, keep)
    chains = _chains(nodes, only_reader)
    chains.update(_pool_grads(nodes, only_reader))
    if not chains:
        return nodes
    gone = {n.name for chain in chains.values() for n in chain[:-1]}
    out = []
    for n in nodes:
        if n.name in gone:
            continue
        chain = chains.get(n.name)
        if chain is None:
            out.append(n)
        else:
            out.append(_fused(chain) if chain[0].op == "Conv2D" else _fused_pool_grad(chain))
    return out


def _pool_grads(nodes: list[Node], only_reader) -> dict[str, list[Node]]:
    """ReluGrad's name -> [MaxPoolGrad, ReluGrad] where the ReluGrad's features are the
    MaxPoolGrad's x and it is the gradient's one reader, on one CPU device and type."""
    pairs = {}
    for grad in nodes:
        if grad.op != "MaxPoolGrad" or grad.attrs["T"] not in _TYPES:
            continue
        relu = only_reader(grad)
        if (
            relu is not None
            and relu.op == "ReluGrad"
            and relu.inputs == ((grad.name, 0), grad.inputs[0])
            and relu.attrs["T"] == grad.attrs["T"]
            and relu.device == grad.device
            and parse(grad.device).device_type in (None, "CPU")
        ):
            pairs[relu.name] = [grad, relu]
    return pairs


def _fused_pool_grad(pair: list[Node]) -> Node:
    grad, relu = pair
    control = [c for n in pair for c in n.control if c != grad.name]
    return make_node(
        relu.name,
        FUSED_POOL_GRAD,
        list(grad.inputs),
        tuple(dict.fromkeys(control)),
        grad.device,
        {**grad.attrs, "fused_ops": ["ReluGrad"]},
    )


def _chains(nodes: list[Node], only_reader) -> dict[str, list[Node]]:
    """Last node's name -> [Conv2D, BiasAdd] or [Conv2D, BiasAdd, Relu]."""
    chains = {}
    for conv in nodes:
        if conv.op != "Conv2D" or conv.attrs["T"] not in _TYPES:
            continue
        bias_add = only_reader(conv)
        if bias_add is None or bias_add.op != "BiasAdd" or bias_add.inputs[0] != (conv.name, 0):
            continue
        if not _compatible(conv, bias_add):
            continue
        chain = [conv, bias_add]
        relu = only_reader(bias_add)
        if relu is not None and relu.op == "Relu" and relu.device == conv.device:
            chain.append(relu)
        chains[chain[-1].name] = chain
    return chains


def _compatible(conv: Node, bias_add: Node) -> bool:
    return (
        bias_add.device == conv.device
        and parse(conv.device).device_type in (None, "CPU")
        and bias_add.attrs["T"] == conv.attrs["T"]
        and bias_add.attrs.get("data_format", "NHWC") == conv.attrs["data_format"]
    )


def _fused(chain: list[Node]) -> Node:
    conv, bias_add, last = chain[0], chain[1], chain[-1]
    names = {n.name for n in chain}
    control = [c for n in chain for c in n.control if c not in names]
    attrs = {key: conv.attrs[key] for key in _CONV_ATTRS if key in conv.attrs}
    attrs.update(num_args=1, fused_ops=[n.op for n in chain[1:]])
    return make_node(
        last.name,
        FUSED_OP,
        [*conv.inputs, bias_add.inputs[1]],
        tuple(dict.fromkeys(control)),
        conv.device,
        attrs,
    )

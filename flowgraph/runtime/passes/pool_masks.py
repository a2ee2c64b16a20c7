"""The forward max-pool keeps what its gradient needs (TF's oneDNN workspace, MaxPoolWithArgmax):

    y = MaxPool(x); MaxPoolGrad(x, y, g)        -> y, m = _MaxPoolWithMask(x);
                                                   _MaxPoolGradWithMask(x, m, g)
    _FusedMaxPoolGrad(x, y, g, [ReluGrad])      -> _MaxPoolGradWithMask(x, m, g, [ReluGrad])

MaxPoolGrad recomputes each window's first maximum from x, which a training step produced
long before, so most of its time is waiting for x to come back from memory (LeNet's first
pooling layer: a 6.4 MB x). The forward pass has x in cache and finds the maximum anyway: one
more byte per output (the cell that takes the gradient, and whether it is > 0 for a fused
ReluGrad) lets the gradient write its cells from that byte and g alone (kernels/cpu/pooling.py;
2x2 windows of stride 2 that tile NHWC input, the common case, else an empty mask and the
gradient reads x as before). The bits are the same as MaxPoolGrad's.

Only where the gradient reads the very tensors the pool read and wrote (x and y: not fed,
not from another frame or device) with the same window attrs, on one CPU device, in float or
double (the compiled loops' types). The pool keeps its name, inputs and output 0, so its
other readers and fetches do not change; the gradient no longer reads y.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.device_spec import parse
from flowgraph.runtime.nodes import Node, make_node

_TYPES = frozenset({dtypes.float32, dtypes.float64})
_POOL_ATTRS = ("T", "ksize", "strides", "padding", "data_format")
_GRADS = ("MaxPoolGrad", "_FusedMaxPoolGrad")


def keep_pool_masks(nodes: list[Node]) -> list[Node]:
    """`nodes` with each MaxPool whose gradient is in the graph paired with it (module doc)."""
    pools = {
        n.name: n
        for n in nodes
        if n.op == "MaxPool"
        and n.attrs["T"] in _TYPES
        and parse(n.device).device_type in (None, "CPU")
    }
    grads = {}
    for n in nodes:
        if n.op not in _GRADS or n.inputs[1][1] != 0:
            continue
        pool = pools.get(n.inputs[1][0])
        if pool is not None and _pairs(pool, n):
            grads[n.name] = pool.name
    if not grads:
        return nodes
    masked = set(grads.values())
    out = []
    for n in nodes:
        if n.name in masked:
            out.append(_with_mask(n))
        elif n.name in grads:
            out.append(_grad_from_mask(n, grads[n.name]))
        else:
            out.append(n)
    return out


def _pairs(pool: Node, grad: Node) -> bool:
    return (
        grad.inputs[0] == pool.inputs[0]
        and grad.device == pool.device
        and all(grad.attrs[key] == pool.attrs[key] for key in _POOL_ATTRS)
    )


def _with_mask(pool: Node) -> Node:
    attrs = {key: pool.attrs[key] for key in _POOL_ATTRS}
    return make_node(pool.name, "_MaxPoolWithMask", pool.inputs, pool.control, pool.device, attrs)


def _grad_from_mask(grad: Node, pool: str) -> Node:
    attrs = {key: grad.attrs[key] for key in _POOL_ATTRS}
    attrs["fused_ops"] = list(grad.attrs.get("fused_ops", []))
    x, _, g = grad.inputs
    return make_node(
        grad.name, "_MaxPoolGradWithMask", (x, (pool, 1), g), grad.control, grad.device, attrs
    )

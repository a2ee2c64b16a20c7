"""Gradients of function calls (PartitionedCall): a gradient function traced into the library
that re-derives the forward pass from the body (inlined) and differentiates it, as TF's
SymbolicGradient does. Only bodies traced in this process can be differentiated."""

from __future__ import annotations

from flowgraph.framework import function
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.indexed_slices import IndexedSlices
from flowgraph.gradients.registry import register_gradient


def _dense(g, like):
    from flowgraph.ops import array, data_flow

    if g is None:
        return array.zeros_like(like)
    if isinstance(g, IndexedSlices):
        return data_flow.unsorted_segment_sum(g.values, g.indices, array.shape(like)[0])
    return g


@register_gradient("PartitionedCall")
@register_gradient("StatefulPartitionedCall")
def _call_grad(op, *grads):
    from flowgraph.gradients.impl import gradients

    name = op.get_attr("f").name
    body = function.find_body(op.graph, name)
    if body is None:
        raise LookupError(
            f"No gradient for the call of function '{name}': its body was not traced in this "
            f"process (an imported FunctionDef)"
        )
    xs = list(op.inputs)
    dys = [_dense(g, y) for g, y in zip(grads, op.outputs)]

    def grad_body(*args):
        inner_xs, inner_dys = list(args[: len(xs)]), list(args[len(xs) :])
        ys = function.inline(body, inner_xs)
        gs = gradients(ys, inner_xs, grad_ys=inner_dys)
        return [_dense(g, x) for g, x in zip(gs, inner_xs)]

    types = [t.dtype.base_dtype for t in xs + dys]
    defined = function.trace(
        grad_body, types, [t.shape for t in xs + dys], f"{name}_grad", graph=op.graph
    )
    inputs = xs + dys + defined.captured_inputs
    call = apply_op(
        op.type,
        [inputs],
        Tin=[t.dtype.base_dtype for t in inputs],
        Tout=defined.output_types,
        f=defined.func_attr,
    )
    for t, x in zip(call.outputs, xs):
        t.set_shape(x.shape)
    return list(call.outputs)

"""Kernels of graph functions: the argument and return-value nodes of a function body, and the
call ops (PartitionedCall) that run a function of the library (runtime/function.py)."""

from __future__ import annotations

from flowgraph.kernels.base import ARGS, RETS, library_of, register_kernel


@register_kernel("_Arg", step=True)
def arg(ctx, step):
    return step.resources[ARGS][ctx.attrs["index"]]


@register_kernel("_Retval", step=True)
def retval(ctx, step, value):
    step.resources[RETS][ctx.attrs["index"]] = value


def _call(ctx, step, *args):
    body = ctx.state
    if body is None:
        body = ctx.state = library_of(ctx.device).instantiate(ctx.attrs["f"], ctx.device)
    out = body(list(args), step)
    return tuple(out)


for _op in ("PartitionedCall", "StatefulPartitionedCall"):
    register_kernel(_op, step=True, expensive=True)(_call)

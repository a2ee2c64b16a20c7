"""Resource edges carry handles, not objects (whitepaper §4.7; core/resource_handle.py).

A kernel whose op outputs a DT_RESOURCE tensor finds or creates its resource in its device's
containers; the binding below turns the resource it returns into a ResourceHandle naming it.
A kernel whose op takes a DT_RESOURCE input gets the resource that its handle names, looked
up in its own device's containers: a handle of another device is an error, a handle whose
resource is gone (its container was reset) is NotFound. Per-step resources (TensorArrays,
stacks) are no different: they live in their step's container of their device
(runtime/resources.py StepContainer) until the step ends.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from flowgraph.core import dtypes, errors, op_def
from flowgraph.core.resource_handle import ResourceHandle


def bind_handles(compute: Callable, ctx, offset: int) -> Callable:
    """`compute` with handles made for its resource outputs and resolved for its resource
    inputs (at `offset` + input index: a step kernel is called with its step first, an
    async kernel with its step and continuation)."""
    definition = op_def.get_op_def(ctx.op_type)
    inputs = [i + offset for i in _resource_positions(definition.inputs, ctx.attrs)]
    outputs = _resource_positions(definition.outputs, ctx.attrs)
    if outputs:
        compute = _making(compute, ctx, outputs, len(ctx.output_types) == 1)
    if inputs:
        compute = _resolving(compute, ctx, inputs)
    return compute


def _resource_positions(args, attrs) -> list[int]:
    """Positions of the tensors of `args` whose OpDef type is `resource` itself: an op that
    is polymorphic in its type (Identity, _Send with T=resource) forwards handles untouched."""
    positions, i = [], 0
    for arg in args:
        if arg.number_attr:
            n = attrs[arg.number_attr]
        elif arg.type_list_attr:
            n = len(attrs[arg.type_list_attr])
        else:
            n = 1
        if arg.type == dtypes.resource and not arg.type_attr:
            positions.extend(range(i, i + n))
        i += n
    return positions


def _making(compute, ctx, outputs: list[int], single: bool) -> Callable:
    def run(*args):
        out = compute(*args)
        if single:
            return handle_of(ctx, out)
        out = list(out)
        for i in outputs:
            out[i] = handle_of(ctx, out[i])
        return tuple(out)

    return run


def handle_of(ctx, resource) -> ResourceHandle:
    """The handle naming `resource` of `ctx`'s device; a kernel may make it once and return
    it on every call (TF's ResourceOpKernel keeps its handle too)."""
    if type(resource) is ResourceHandle:  # a kernel that made the handle itself
        return resource
    names = ctx.resources.name_of(resource)
    if names is None:
        raise errors.InternalError(
            None,
            None,
            f"{ctx.op_type} '{ctx.name}' returned a {type(resource).__name__} that is in no "
            f"container of {ctx.device.name}: a resource output must name a resource",
        )
    return ResourceHandle(ctx.device.name, names[0], names[1], type(resource).__name__)


def _resolving(compute, ctx, positions: list[int]) -> Callable:
    def run(*args):
        args = list(args)
        for p in positions:
            value = args[p]
            if type(value) is np.ndarray and value.dtype == object and value.ndim == 0:
                value = value[()]  # a handle fed by the client arrives as a 0-d array
            if type(value) is ResourceHandle:
                args[p] = resolve(ctx, value)
        return compute(*args)

    return run


def resolve(ctx, handle: ResourceHandle):
    """The resource `handle` names, from the containers of `ctx`'s device."""
    device = ctx.device.name
    if handle.device != device:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Trying to access resource {handle.name} ({handle.maybe_type_name}) located in "
            f"device {handle.device} from device {device}",
        )
    resource = ctx.resources.find(handle.container, handle.name)
    if resource is None:
        raise errors.NotFoundError(
            None,
            None,
            f"Resource {handle.container}/{handle.name} ({handle.maybe_type_name}) does not "
            "exist: its container was reset or the resource was deleted",
        )
    return resource

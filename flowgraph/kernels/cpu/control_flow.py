"""Kernels of the control-flow primitives (§4.4) and of the per-step stacks.

Switch, Merge, Enter, Exit, NextIteration and LoopCond move tensors between branches, frames
and iterations; that movement is the executor's job (runtime/frames.py), which handles these op
types itself. Their kernels here state the value semantics and let placement find them."""

from __future__ import annotations

import itertools
import threading

import numpy as np

from flowgraph.core import errors
from flowgraph.core.dead_value import DEAD
from flowgraph.kernels.base import register_kernel


@register_kernel("Switch")
@register_kernel("RefSwitch")
def switch(ctx, data, pred):
    """(data, DEAD) when pred is false, (DEAD, data) when true."""
    return (DEAD, data) if bool(pred) else (data, DEAD)


def _forward(ctx, data):
    return data


for _op in (
    "Enter",
    "RefEnter",
    "Exit",
    "RefExit",
    "NextIteration",
    "RefNextIteration",
    "LoopCond",
):
    register_kernel(_op)(_forward)


@register_kernel("Merge")
@register_kernel("RefMerge")
def merge(ctx, *inputs):
    """The first live input and its index (the executor fires Merge on its first live input)."""
    for i, x in enumerate(inputs):
        if x is not DEAD and x is not None:
            return x, np.int32(i)
    return DEAD, DEAD


@register_kernel("ControlTrigger")
def control_trigger(ctx):
    return None


@register_kernel("Abort")
def abort(ctx):
    if ctx.attrs["exit_without_error"]:
        raise SystemExit(0)
    raise errors.AbortedError(None, None, f"Abort operation: {ctx.attrs['error_msg']}")


class Stack:
    """A LIFO made by StackV2 in its step's container on its device (TF's per-step Stack): its
    handle is a value naming it, and the push and pop kernels resolve that handle on their
    own device (kernels/resource_handles.py). The container goes when the step ends."""

    def __init__(self, name: str, max_size: int, elem_type):
        self.name = name
        self.max_size = max_size
        self.elem_type = elem_type
        self.items: list = []
        self.closed = False
        self.lock = threading.Lock()


_stack_ids = itertools.count()  # a stack made inside a loop gets one name per iteration


@register_kernel("StackV2", step=True)
def stack_v2(ctx, step, max_size):
    name = f"{ctx.attrs.get('stack_name') or ctx.name}_{next(_stack_ids)}"
    stack = Stack(name, int(max_size), ctx.attrs["elem_type"])
    step.container.create(ctx.resources, name, stack)
    return stack


@register_kernel("StackPushV2")
def stack_push(ctx, stack: Stack, elem):
    with stack.lock:
        if stack.closed:
            raise errors.InvalidArgumentError(
                None, None, f"Stack {stack.name} has already been closed."
            )
        if 0 < stack.max_size <= len(stack.items):
            raise errors.InvalidArgumentError(
                None, None, f"Stack[{stack.name}] overflowed its max_size ({stack.max_size})"
            )
        stack.items.append(elem)
    return elem


@register_kernel("StackPopV2")
def stack_pop(ctx, stack: Stack):
    with stack.lock:
        if stack.closed:
            raise errors.InvalidArgumentError(
                None, None, f"Stack {stack.name} has already been closed."
            )
        if not stack.items:
            raise errors.InvalidArgumentError(
                None, None, f"Stack[{stack.name}] is empty when calling Pop()."
            )
        return stack.items.pop()


@register_kernel("StackCloseV2")
def stack_close(ctx, stack: Stack):
    with stack.lock:
        stack.closed = True
        stack.items.clear()

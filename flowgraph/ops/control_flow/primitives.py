"""Python wrappers of the control-flow primitives (whitepaper §4.4). Programs rarely call them
directly; cond and while_loop are built from them."""

from __future__ import annotations

from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.operation import Tensor


def _ref(t: Tensor) -> str:
    return "Ref" if t.dtype.is_ref_dtype else ""


def switch(data, pred, name=None):
    """Forwards `data` to output 1 if `pred` else output 0; the other output is dead."""
    from flowgraph.framework.convert import convert_to_tensor

    data = convert_to_tensor(data)
    return tuple(apply_op(f"{_ref(data)}Switch", [data, pred], name=name or "Switch").outputs)


def merge(inputs, name=None):
    """Forwards the first live input; returns (output, value_index)."""
    ref = "Ref" if all(t.dtype.is_ref_dtype for t in inputs) else ""
    return tuple(apply_op(f"{ref}Merge", [list(inputs)], name=name or "Merge").outputs)


def enter(data, frame_name, is_constant=False, parallel_iterations=10, name=None):
    """Makes `data` available in iteration 0 (or every iteration, if constant) of a child frame."""
    return apply_op(
        f"{_ref(data)}Enter",
        [data],
        name=name or "Enter",
        frame_name=frame_name,
        is_constant=is_constant,
        parallel_iterations=parallel_iterations,
    ).outputs[0]


def exit(data, name=None):
    """Makes `data` available in the parent frame."""
    return apply_op(f"{_ref(data)}Exit", [data], name=name or "Exit").outputs[0]


def next_iteration(data, name=None):
    """Makes `data` available in the next iteration of the current frame."""
    return apply_op(f"{_ref(data)}NextIteration", [data], name=name or "NextIteration").outputs[0]


def loop_cond(pred, name=None):
    """Marks the loop's termination condition (a bool scalar)."""
    return apply_op("LoopCond", [pred], name=name or "LoopCond").outputs[0]


def control_trigger(name=None):
    return apply_op("ControlTrigger", [], name=name or "ControlTrigger")

"""OpDefs of the control-flow primitives (whitepaper §4.4), in TensorFlow's form so loops and
conditionals exported by TensorFlow import and run: Switch, Merge, Enter, Exit, NextIteration,
LoopCond, ControlTrigger, their Ref variants, and the stack ops TF1 uses to remember forward
values of loop iterations for gradients."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
from flowgraph.opdefs.shape_fns import no_outputs, scalar, unchanged


def _switch_shape(ctx):
    ctx.input_shapes[1].with_rank(0)
    return [ctx.input_shapes[0], ctx.input_shapes[0]]


def _merge_shape(ctx):
    shapes = ctx.input_shapes
    out = shapes[0]
    for s in shapes[1:]:
        out = out.most_specific_compatible_shape(s) if out.ndims == s.ndims else unknown_shape()
    return [out, TensorShape([])]


for _ref in ("", "Ref"):
    _t = "Ref(T)" if _ref else "T"
    register_op(
        OpDef(
            f"{_ref}Switch",
            inputs=[f"data: {_t}", "pred: bool"],
            outputs=[f"output_false: {_t}", f"output_true: {_t}"],
            attrs=["T: type"],
            shape_fn=_switch_shape,
        )
    )
    register_op(
        OpDef(
            f"{_ref}Merge",
            inputs=[f"inputs: N * {_t}"],
            outputs=[f"output: {_t}", "value_index: int32"],
            attrs=["T: type", "N: int >= 1"],
            shape_fn=_merge_shape,
        )
    )
    register_op(
        OpDef(
            f"{_ref}Enter",
            inputs=[f"data: {_t}"],
            outputs=[f"output: {_t}"],
            attrs=[
                "T: type",
                "frame_name: string",
                "is_constant: bool = false",
                "parallel_iterations: int = 10",
            ],
            shape_fn=unchanged,
        )
    )
    register_op(
        OpDef(
            f"{_ref}Exit",
            inputs=[f"data: {_t}"],
            outputs=[f"output: {_t}"],
            attrs=["T: type"],
            shape_fn=unchanged,
        )
    )
    register_op(
        OpDef(
            f"{_ref}NextIteration",
            inputs=[f"data: {_t}"],
            outputs=[f"output: {_t}"],
            attrs=["T: type"],
            shape_fn=unchanged,
        )
    )
register_op(OpDef("LoopCond", inputs=["input: bool"], outputs=["output: bool"], shape_fn=scalar))
register_op(OpDef("ControlTrigger", shape_fn=no_outputs))
register_op(
    OpDef(
        "Abort",
        attrs=["error_msg: string = ''", "exit_without_error: bool = false"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)

# Stacks: per-step LIFO resources that hold forward values of each loop iteration (§4.4, gradients).
register_op(
    OpDef(
        "StackV2",
        inputs=["max_size: int32"],
        outputs=["handle: resource"],
        attrs=["elem_type: type", "stack_name: string = ''"],
        shape_fn=scalar,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "StackPushV2",
        inputs=["handle: resource", "elem: T"],
        outputs=["output: T"],
        attrs=["T: type", "swap_memory: bool = false"],
        shape_fn=lambda ctx: ctx.input_shapes[1],
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "StackPopV2",
        inputs=["handle: resource"],
        outputs=["elem: elem_type"],
        attrs=["elem_type: type"],
        shape_fn=lambda ctx: unknown_shape(),
        is_stateful=True,
    )
)
register_op(
    OpDef("StackCloseV2", inputs=["handle: resource"], shape_fn=no_outputs, is_stateful=True)
)

"""OpDefs of graph functions (TensorFlow's function library, `FunctionDef`): the argument and
return-value nodes of an instantiated function body, and the ops that call a function by name.

A function body runs on the executor like any graph (runtime/function.py); `_Arg` nodes read
the call's arguments and `_Retval` nodes hand back its results.
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape
from flowgraph.opdefs.shape_fns import no_outputs, unknown

register_op(
    OpDef(
        "_Arg",
        outputs=["output: T"],
        attrs=["T: type", "index: int >= 0"],
        shape_fn=unknown,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "_Retval",
        inputs=["input: T"],
        attrs=["T: type", "index: int >= 0"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)

_CALL_ATTRS = [
    "Tin: list(type) >= 0",
    "Tout: list(type) >= 0",
    "f: func",
    "config: string = ''",
    "config_proto: string = ''",
    "executor_type: string = ''",
]


def _call_shapes(ctx):
    return [TensorShape(None)] * len(ctx.attr("Tout"))


for _op, _stateful in (("PartitionedCall", False), ("StatefulPartitionedCall", True)):
    register_op(
        OpDef(
            _op,
            inputs=["args: Tin"],
            outputs=["output: Tout"],
            attrs=_CALL_ATTRS,
            shape_fn=_call_shapes,
            is_stateful=_stateful,
        )
    )

"""OpDefs the runtime inserts itself (§3.2.2, §4.2): _Send and _Recv carry a tensor across a
device boundary or between the client and the graph, through the rendezvous."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.opdefs.shape_fns import no_outputs, unchanged, unknown

_EDGE_ATTRS = [
    "tensor_name: string",
    "send_device: string",
    "send_device_incarnation: int",
    "recv_device: string",
    "client_terminated: bool = false",
]

register_op(
    OpDef(
        "_Send",
        inputs=["tensor: T"],
        attrs=["T: type"] + _EDGE_ATTRS,
        shape_fn=no_outputs,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "_Recv",
        outputs=["tensor: tensor_type"],
        attrs=["tensor_type: type"] + _EDGE_ATTRS,
        shape_fn=unknown,
        is_stateful=True,
    )
)

# The memory optimizer's swap copies (passes/swapping.py), TensorFlow's names: a tensor copied out
# of a device's own memory to its host and back. Real copies, so each memory counts its buffer.
for _op in ("_CopyFromGpuToHost", "_CopyFromHostToGpu"):
    register_op(OpDef(_op, inputs=["input: T"], outputs=["output: T"], attrs=["T: type"],
                      shape_fn=unchanged))  # fmt: skip

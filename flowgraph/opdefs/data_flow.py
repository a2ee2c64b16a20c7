"""OpDefs of queues (whitepaper §4.6): the V2 ops TF1's `tf.FIFOQueue` & co. build (a resource
handle), and the V1 ops with a Ref(string) handle that older GraphDefs hold. The dequeue ops'
output shapes come from the queue's `shapes`, which only the Python wrapper knows, so it sets
them; here they are unknown."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.opdefs.shape_fns import no_outputs, scalar, unknown

_COMMON = ["capacity: int = -1", "container: string = ''", "shared_name: string = ''"]
_QUEUES = {
    "FIFOQueue": ["component_types: list(type) >= 1", "shapes: list(shape) >= 0 = []"],
    "PaddingFIFOQueue": ["component_types: list(type) >= 1", "shapes: list(shape) >= 0 = []"],
    "RandomShuffleQueue": [
        "component_types: list(type) >= 1",
        "shapes: list(shape) >= 0 = []",
        "min_after_dequeue: int = 0",
        "seed: int = 0",
        "seed2: int = 0",
    ],
    "PriorityQueue": ["component_types: list(type) >= 0 = []", "shapes: list(shape) >= 0"],
}
_HANDLE = {"V2": "resource", "": "Ref(string)"}

for _queue, _attrs in _QUEUES.items():
    for _v, _handle in _HANDLE.items():
        register_op(
            OpDef(
                _queue + _v,
                outputs=[f"handle: {_handle}"],
                attrs=_attrs + _COMMON,
                shape_fn=scalar,
                is_stateful=True,
            )
        )

for _v, _handle in _HANDLE.items():
    for _op in ("QueueEnqueue", "QueueEnqueueMany"):
        register_op(
            OpDef(
                _op + _v,
                inputs=[f"handle: {_handle}", "components: Tcomponents"],
                attrs=["Tcomponents: list(type) >= 1", "timeout_ms: int = -1"],
                shape_fn=no_outputs,
                is_stateful=True,
            )
        )
    register_op(
        OpDef(
            "QueueDequeue" + _v,
            inputs=[f"handle: {_handle}"],
            outputs=["components: component_types"],
            attrs=["component_types: list(type) >= 1", "timeout_ms: int = -1"],
            shape_fn=unknown,
            is_stateful=True,
        )
    )
    for _op in ("QueueDequeueMany", "QueueDequeueUpTo"):
        register_op(
            OpDef(
                _op + _v,
                inputs=[f"handle: {_handle}", "n: int32"],
                outputs=["components: component_types"],
                attrs=["component_types: list(type) >= 1", "timeout_ms: int = -1"],
                shape_fn=unknown,
                is_stateful=True,
            )
        )
    register_op(
        OpDef(
            "QueueClose" + _v,
            inputs=[f"handle: {_handle}"],
            attrs=["cancel_pending_enqueues: bool = false"],
            shape_fn=no_outputs,
            is_stateful=True,
        )
    )
    register_op(
        OpDef(
            "QueueSize" + _v,
            inputs=[f"handle: {_handle}"],
            outputs=["size: int32"],
            shape_fn=scalar,
            is_stateful=True,
        )
    )
    register_op(
        OpDef(
            "QueueIsClosed" + _v,
            inputs=[f"handle: {_handle}"],
            outputs=["is_closed: bool"],
            shape_fn=scalar,
            is_stateful=True,
        )
    )

"""OpDef of a fused cluster (whitepaper §10; TensorFlow's `_XlaLaunch`): the compiled-fusion
pass (runtime/passes/fusion.py) replaces a cluster of element-wise nodes, with the reductions
and variable updates that end it, by one node of this op.

`body` is the cluster as a serialized GraphDef in TensorFlow's function-body convention:
`_Arg` nodes (attr `index`) stand for the node's inputs, the member nodes keep their names, ops
and attrs, and `_Retval` nodes (attr `index`) name the node's outputs (none where the cluster
only updates variables: an `_Arg` of a reference type is the variable an Assign in the body
updates). The body travels with the node (to a worker, in `output_partition_graphs`), so a
fused node needs nothing but itself.
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.opdefs.shape_fns import unknown

register_op(
    OpDef(
        "_FusedElementwise",
        inputs=["args: Tin"],
        outputs=["outputs: Tout"],
        attrs=["Tin: list(type) >= 1", "Tout: list(type) >= 0", "body: string"],
        shape_fn=unknown,
    )
)

"""OpDefs of queues (whitepaper §4.6): the V2 ops TF1's `tf.FIFOQueue` & co. build (a resource
handle), and the V1 ops with a Ref(string) handle that older GraphDefs hold. The dequeue ops'
output shapes come from the queue's `shapes`, which only the Python wrapper knows, so it sets
them; here they are unknown."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
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

# -- gradient accumulators (§4.6), a barrier and a staging area ---------------------------------
_ACC = [
    "dtype: numeric",
    "shape: shape",
    "container: string = ''",
    "shared_name: string = ''",
    "reduction_type: {'MEAN', 'SUM'} = 'MEAN'",
]
register_op(
    OpDef(
        "ResourceConditionalAccumulator",
        outputs=["handle: resource"],
        attrs=_ACC,
        shape_fn=scalar,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "ConditionalAccumulator",
        outputs=["handle: Ref(string)"],
        attrs=_ACC,
        shape_fn=lambda ctx: TensorShape([2]),
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "SparseConditionalAccumulator",
        outputs=["handle: Ref(string)"],
        attrs=_ACC,
        shape_fn=lambda ctx: TensorShape([2]),
        is_stateful=True,
    )
)
for _v, _handle in (("Resource", "resource"), ("", "Ref(string)")):
    register_op(
        OpDef(
            f"{_v}AccumulatorApplyGradient",
            inputs=[f"handle: {_handle}", "local_step: int64", "gradient: dtype"],
            attrs=["dtype: numeric"],
            shape_fn=no_outputs,
            is_stateful=True,
        )
    )
    register_op(
        OpDef(
            f"{_v}AccumulatorTakeGradient",
            inputs=[f"handle: {_handle}", "num_required: int32"],
            outputs=["average: dtype"],
            attrs=["dtype: numeric"],
            shape_fn=unknown,
            is_stateful=True,
        )
    )
    register_op(
        OpDef(
            f"{_v}AccumulatorNumAccumulated",
            inputs=[f"handle: {_handle}"],
            outputs=["num_accumulated: int32"],
            shape_fn=scalar,
            is_stateful=True,
        )
    )
    register_op(
        OpDef(
            f"{_v}AccumulatorSetGlobalStep",
            inputs=[f"handle: {_handle}", "new_global_step: int64"],
            shape_fn=no_outputs,
            is_stateful=True,
        )
    )
register_op(
    OpDef(
        "SparseAccumulatorApplyGradient",
        inputs=[
            "handle: Ref(string)",
            "local_step: int64",
            "gradient_indices: int64",
            "gradient_values: dtype",
            "gradient_shape: int64",
        ],
        attrs=["dtype: numeric", "has_known_shape: bool"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "SparseAccumulatorTakeGradient",
        inputs=["handle: Ref(string)", "num_required: int32"],
        outputs=["indices: int64", "values: dtype", "shape: int64"],
        attrs=["dtype: numeric"],
        shape_fn=lambda ctx: [TensorShape([None]), unknown_shape(), TensorShape([None])],
        is_stateful=True,
    )
)

register_op(
    OpDef(
        "Barrier",
        outputs=["handle: Ref(string)"],
        attrs=["component_types: list(type) >= 1", "shapes: list(shape) >= 0 = []"] + _COMMON,
        shape_fn=lambda ctx: TensorShape([2]),
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "BarrierInsertMany",
        inputs=["handle: Ref(string)", "keys: string", "values: T"],
        attrs=["T: type", "component_index: int"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "BarrierTakeMany",
        inputs=["handle: Ref(string)", "num_elements: int32"],
        outputs=["indices: int64", "keys: string", "values: component_types"],
        attrs=[
            "component_types: list(type) >= 1",
            "allow_small_batch: bool = false",
            "wait_for_incomplete: bool = false",
            "timeout_ms: int = -1",
        ],
        shape_fn=unknown,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "BarrierClose",
        inputs=["handle: Ref(string)"],
        attrs=["cancel_pending_enqueues: bool = false"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)
for _op in ("BarrierReadySize", "BarrierIncompleteSize"):
    register_op(
        OpDef(
            _op,
            inputs=["handle: Ref(string)"],
            outputs=["size: int32"],
            shape_fn=scalar,
            is_stateful=True,
        )
    )

_STAGE = [
    "capacity: int >= 0 = 0",
    "memory_limit: int >= 0 = 0",
    "dtypes: list(type)",
    "container: string = ''",
    "shared_name: string = ''",
]
register_op(
    OpDef("Stage", inputs=["values: dtypes"], attrs=_STAGE, shape_fn=no_outputs, is_stateful=True)
)
register_op(
    OpDef("Unstage", outputs=["values: dtypes"], attrs=_STAGE, shape_fn=unknown, is_stateful=True)
)
register_op(
    OpDef(
        "StagePeek",
        inputs=["index: int32"],
        outputs=["values: dtypes"],
        attrs=_STAGE,
        shape_fn=unknown,
        is_stateful=True,
    )
)
register_op(
    OpDef("StageSize", outputs=["size: int32"], attrs=_STAGE, shape_fn=scalar, is_stateful=True)
)
register_op(OpDef("StageClear", attrs=_STAGE, shape_fn=no_outputs, is_stateful=True))

# -- SparseTensorsMap: SparseTensors through queues as int64 handles (tf.train.batch) ------------
_MAP = ["container: string = ''", "shared_name: string = ''"]
register_op(
    OpDef(
        "AddSparseToTensorsMap",
        inputs=["sparse_indices: int64", "sparse_values: T", "sparse_shape: int64"],
        outputs=["sparse_handle: int64"],
        attrs=["T: type"] + _MAP,
        shape_fn=scalar,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "AddManySparseToTensorsMap",
        inputs=["sparse_indices: int64", "sparse_values: T", "sparse_shape: int64"],
        outputs=["sparse_handles: int64"],
        attrs=["T: type"] + _MAP,
        shape_fn=lambda ctx: TensorShape([None]),
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "TakeManySparseFromTensorsMap",
        inputs=["sparse_handles: int64"],
        outputs=["sparse_indices: int64", "sparse_values: dtype", "sparse_shape: int64"],
        attrs=["dtype: type"] + _MAP,
        shape_fn=lambda ctx: [TensorShape([None, None]), TensorShape([None]), TensorShape([None])],
        is_stateful=True,
    )
)

"""OpDefs of stateful ops (Table 1 "Stateful operations", §4.7): ref variables and the
resource-variable ops that current TensorFlow exports."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape
from flowgraph.opdefs.shape_fns import scalar, unchanged, unknown

_VAR_ATTRS = ["shape: shape", "dtype: type", "container: string = ''", "shared_name: string = ''"]


def _assign_shape(ctx):
    if ctx.attrs.get("validate_shape", True):
        return ctx.input_shapes[0].merge_with(ctx.input_shapes[1])
    return ctx.input_shapes[1]


for _op in ("VariableV2", "Variable"):  # Variable is the deprecated name of the same op
    register_op(
        OpDef(
            _op,
            outputs=["ref: Ref(dtype)"],
            attrs=_VAR_ATTRS,
            shape_fn=lambda ctx: ctx.attrs["shape"],
            is_stateful=True,
        )
    )
register_op(
    OpDef(
        "Assign",
        inputs=["ref: Ref(T)", "value: T"],
        outputs=["output_ref: Ref(T)"],
        attrs=["T: type", "validate_shape: bool = true", "use_locking: bool = true"],
        shape_fn=_assign_shape,
        allows_uninitialized_input=True,
    )
)
for _op in ("AssignAdd", "AssignSub"):
    register_op(
        OpDef(
            _op,
            inputs=["ref: Ref(T)", "value: T"],
            outputs=["output_ref: Ref(T)"],
            attrs=["T: numeric", "use_locking: bool = false"],
            shape_fn=lambda ctx: ctx.input_shapes[0].merge_with(ctx.input_shapes[1]),
        )
    )
register_op(
    OpDef(
        "IsVariableInitialized",
        inputs=["ref: Ref(dtype)"],
        outputs=["is_initialized: bool"],
        attrs=["dtype: type"],
        shape_fn=scalar,
        allows_uninitialized_input=True,
    )
)
register_op(
    OpDef(
        "DestroyTemporaryVariable",
        inputs=["ref: Ref(T)"],
        outputs=["value: T"],
        attrs=["T: type", "var_name: string"],
        shape_fn=unchanged,
    )
)

# Resource variables (the form TF2 exports even in graph mode).
register_op(
    OpDef(
        "VarHandleOp",
        outputs=["resource: resource"],
        attrs=[
            "container: string = ''",
            "shared_name: string = ''",
            "dtype: type",
            "shape: shape",
            "allowed_devices: list(string) = []",
            "debug_name: string = ''",
        ],
        shape_fn=scalar,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "ReadVariableOp",
        inputs=["resource: resource"],
        outputs=["value: dtype"],
        attrs=["dtype: type"],
        shape_fn=unknown,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "AssignVariableOp",
        inputs=["resource: resource", "value: dtype"],
        attrs=["dtype: type", "validate_shape: bool = false"],
        shape_fn=lambda ctx: [],
        is_stateful=True,
    )
)
for _op in ("AssignAddVariableOp", "AssignSubVariableOp"):
    register_op(
        OpDef(
            _op,
            inputs=["resource: resource", "value: dtype"],
            attrs=["dtype: type"],
            shape_fn=lambda ctx: [],
            is_stateful=True,
        )
    )
register_op(
    OpDef(
        "VarIsInitializedOp",
        inputs=["resource: resource"],
        outputs=["is_initialized: bool"],
        shape_fn=scalar,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "DestroyResourceOp",
        inputs=["resource: resource"],
        attrs=["ignore_lookup_error: bool = true"],
        shape_fn=lambda ctx: [],
        is_stateful=True,
    )
)

register_op(
    OpDef(
        "ResourceGather",
        inputs=["resource: resource", "indices: Tindices"],
        outputs=["output: dtype"],
        attrs=[
            "batch_dims: int = 0",
            "validate_indices: bool = true",
            "dtype: type",
            "Tindices: {int32, int64}",
        ],
        # The handle carries no shape here; ResourceVariable.sparse_read sets the static shape.
        shape_fn=unknown,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "VariableShape",
        inputs=["input: resource"],
        outputs=["output: out_type"],
        attrs=["out_type: {int32, int64} = DT_INT32"],
        shape_fn=lambda ctx: TensorShape([None]),
        is_stateful=True,  # the shape of a resource variable may change with each assignment
    )
)


# -- sparse updates of ref variables (TF's state_ops.cc) ------------------------------------------
def _scatter_shape(ctx):
    """updates must be a scalar or have shape indices.shape + ref.shape[1:]."""
    ref, indices, updates = ctx.input_shapes
    if updates.ndims == 0 or ref.ndims is None or indices.ndims is None:
        return ref
    want = indices.concatenate(TensorShape(ref.as_list()[1:]))
    if not updates.is_compatible_with(want):
        raise ValueError(
            f"Shapes must be equal rank, and compatible: updates {updates} vs indices.shape + "
            f"ref.shape[1:] = {want}"
        )
    return ref


def _scatter_nd_shape(ctx):
    """indices [..., K] address the first K dims of ref; updates are indices.shape[:-1] +
    ref.shape[K:]."""
    ref, indices, updates = ctx.input_shapes
    if ref.ndims is None or indices.ndims is None or indices.ndims == 0:
        return ref
    k = indices.as_list()[-1]
    if k is None:
        return ref
    if k > ref.ndims:
        raise ValueError(
            f"The last dimension of indices ({k}) must be <= the rank of ref ({ref.ndims})"
        )
    want = TensorShape(indices.as_list()[:-1]).concatenate(TensorShape(ref.as_list()[k:]))
    if not updates.is_compatible_with(want):
        raise ValueError(f"updates shape {updates} is not compatible with the expected {want}")
    return ref


# op type -> (allowed T, default use_locking); TF lets ScatterUpdate lock by default only.
SCATTER = {
    "ScatterUpdate": ("type", "true"),
    "ScatterAdd": ("numeric", "false"),
    "ScatterSub": ("numeric", "false"),
    "ScatterMul": ("numeric", "false"),
    "ScatterDiv": ("numeric", "false"),
    "ScatterMin": ("{half, float, double, int32, int64}", "false"),
    "ScatterMax": ("{half, float, double, int32, int64}", "false"),
}
SCATTER_ND = {
    "ScatterNdUpdate": ("type", "true"),
    "ScatterNdAdd": ("numeric", "false"),
    "ScatterNdSub": ("numeric", "false"),
}
for _table, _shape_fn in ((SCATTER, _scatter_shape), (SCATTER_ND, _scatter_nd_shape)):
    for _op, (_types, _locking) in _table.items():
        register_op(
            OpDef(
                _op,
                inputs=["ref: Ref(T)", "indices: Tindices", "updates: T"],
                outputs=["output_ref: Ref(T)"],
                attrs=[
                    f"T: {_types}",
                    "Tindices: {int32, int64}",
                    f"use_locking: bool = {_locking}",
                ],
                shape_fn=_shape_fn,
            )
        )

# Sparse updates of resource variables: the same rules as Scatter*, always locked, no outputs.
for _op, (_types, _) in SCATTER.items():
    register_op(
        OpDef(
            "Resource" + _op,
            inputs=["resource: resource", "indices: Tindices", "updates: dtype"],
            attrs=[f"dtype: {_types}", "Tindices: {int32, int64}"],
            shape_fn=lambda ctx: [],
            is_stateful=True,
        )
    )
for _op, (_types, _locking) in SCATTER_ND.items():
    register_op(
        OpDef(
            "Resource" + _op,
            inputs=["ref: resource", "indices: Tindices", "updates: T"],
            attrs=[f"T: {_types}", "Tindices: {int32, int64}", f"use_locking: bool = {_locking}"],
            shape_fn=lambda ctx: [],
            is_stateful=True,
        )
    )
register_op(
    OpDef(
        "ResourceCountUpTo",
        inputs=["resource: resource"],
        outputs=["output: T"],
        attrs=["limit: int", "T: {int32, int64}"],
        shape_fn=scalar,
        is_stateful=True,
    )
)

register_op(
    OpDef(
        "CountUpTo",
        inputs=["ref: Ref(T)"],
        outputs=["output: T"],
        attrs=["limit: int", "T: {int32, int64}"],
        shape_fn=lambda ctx: ctx.input_shapes[0].with_rank(0),
    )
)


# -- assignment to a strided slice (`v[:, 0].assign(x)`; TF's array_ops.cc) -----------------------
_SLICE_ASSIGN_ATTRS = [
    "T: type",
    "Index: {int32, int64}",
    "begin_mask: int = 0",
    "end_mask: int = 0",
    "ellipsis_mask: int = 0",
    "new_axis_mask: int = 0",
    "shrink_axis_mask: int = 0",
]
register_op(
    OpDef(
        "StridedSliceAssign",
        inputs=["ref: Ref(T)", "begin: Index", "end: Index", "strides: Index", "value: T"],
        outputs=["output_ref: Ref(T)"],
        attrs=_SLICE_ASSIGN_ATTRS,
        shape_fn=unchanged,
    )
)
register_op(
    OpDef(
        "ResourceStridedSliceAssign",
        inputs=["ref: resource", "begin: Index", "end: Index", "strides: Index", "value: T"],
        attrs=_SLICE_ASSIGN_ATTRS,
        shape_fn=lambda ctx: [],
        is_stateful=True,
    )
)

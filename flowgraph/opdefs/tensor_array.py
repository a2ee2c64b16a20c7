"""OpDefs of TensorArray (TF's V3 ops): a per-step list of tensors that loops read and write
by index. The resource handle is the array; the float `flow` scalar threads the data
dependencies between its reads and writes (and through loop iterations)."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
from flowgraph.opdefs.shape_fns import no_outputs, scalar

_FLOW = lambda ctx: TensorShape([])


def _element_shape(ctx):
    return ctx.attrs.get("element_shape", unknown_shape())


def _gather_shape(ctx):
    n = ctx.input_shapes[1].with_rank(1)[0].value
    return TensorShape([n]).concatenate(ctx.attrs.get("element_shape", unknown_shape()))


register_op(
    OpDef(
        "TensorArrayV3",
        inputs=["size: int32"],
        outputs=["handle: resource", "flow: float"],
        attrs=[
            "dtype: type",
            "element_shape: shape = None",
            "dynamic_size: bool = false",
            "clear_after_read: bool = true",
            "identical_element_shapes: bool = false",
            "tensor_array_name: string = ''",
        ],
        shape_fn=lambda ctx: [TensorShape([2]), TensorShape([])],
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "TensorArrayWriteV3",
        inputs=["handle: resource", "index: int32", "value: T", "flow_in: float"],
        outputs=["flow_out: float"],
        attrs=["T: type"],
        shape_fn=_FLOW,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "TensorArrayReadV3",
        inputs=["handle: resource", "index: int32", "flow_in: float"],
        outputs=["value: dtype"],
        attrs=["dtype: type"],
        shape_fn=lambda ctx: unknown_shape(),
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "TensorArrayGatherV3",
        inputs=["handle: resource", "indices: int32", "flow_in: float"],
        outputs=["value: dtype"],
        attrs=["dtype: type", "element_shape: shape = None"],
        shape_fn=_gather_shape,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "TensorArrayScatterV3",
        inputs=["handle: resource", "indices: int32", "value: T", "flow_in: float"],
        outputs=["flow_out: float"],
        attrs=["T: type"],
        shape_fn=_FLOW,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "TensorArrayConcatV3",
        inputs=["handle: resource", "flow_in: float"],
        outputs=["value: dtype", "lengths: int64"],
        attrs=["dtype: type", "element_shape_except0: shape = None"],
        shape_fn=lambda ctx: [unknown_shape(), TensorShape([None])],
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "TensorArraySplitV3",
        inputs=["handle: resource", "value: T", "lengths: int64", "flow_in: float"],
        outputs=["flow_out: float"],
        attrs=["T: type"],
        shape_fn=_FLOW,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "TensorArraySizeV3",
        inputs=["handle: resource", "flow_in: float"],
        outputs=["size: int32"],
        shape_fn=scalar,
        is_stateful=True,
    )
)
register_op(
    OpDef("TensorArrayCloseV3", inputs=["handle: resource"], shape_fn=no_outputs, is_stateful=True)
)
register_op(
    OpDef(
        "TensorArrayGradV3",
        inputs=["handle: resource", "flow_in: float"],
        outputs=["grad_handle: resource", "flow_out: float"],
        attrs=["source: string"],
        shape_fn=lambda ctx: [TensorShape([2]), TensorShape([])],
        is_stateful=True,
    )
)

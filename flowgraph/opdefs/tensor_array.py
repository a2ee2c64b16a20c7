"""OpDefs of TensorArray (TF's V3 ops): a per-step list of tensors that loops read and write
by index. The resource handle is the array; the float `flow` scalar threads the data
dependencies between its reads and writes (and through loop iterations)."""

from __future__ import annotations

from flowgraph.core import registry
from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
from flowgraph.opdefs.shape_fns import no_outputs, scalar

# _array_op and friends register for the module-level lines below: `flowgraph describe` names those.
registry.machinery(__file__)

_FLOW = lambda ctx: TensorShape([])
_HANDLE_AND_FLOW = lambda ctx: [TensorShape([2]), TensorShape([])]


def _gather_shape(ctx):
    n = ctx.input_shapes[1].with_rank(1)[0].value
    return TensorShape([n]).concatenate(ctx.attrs.get("element_shape", unknown_shape()))


def _array_op(name, inputs, outputs, attrs, shape_fn):
    """Every TensorArray op is stateful: it reads or changes the array behind its handle."""
    register_op(
        OpDef(
            name, inputs=inputs, outputs=outputs, attrs=attrs, shape_fn=shape_fn, is_stateful=True
        )
    )


def _writer(name, *inputs):
    """A write, scatter or split: `inputs` go between the handle and `flow_in`, and the new
    `flow_out` orders later reads after it."""
    _array_op(
        name,
        ["handle: resource", *inputs, "flow_in: float"],
        ["flow_out: float"],
        ["T: type"],
        _FLOW,
    )


def _reader(name, inputs, outputs, attrs, shape_fn):
    """A read, gather, concat, size or grad: it waits for `flow_in`, so for the writes before it."""
    _array_op(name, ["handle: resource", *inputs, "flow_in: float"], outputs, attrs, shape_fn)


_array_op(
    "TensorArrayV3",
    ["size: int32"],
    ["handle: resource", "flow: float"],
    [
        "dtype: type",
        "element_shape: shape = None",
        "dynamic_size: bool = false",
        "clear_after_read: bool = true",
        "identical_element_shapes: bool = false",
        "tensor_array_name: string = ''",
    ],
    _HANDLE_AND_FLOW,
)
_writer("TensorArrayWriteV3", "index: int32", "value: T")
_writer("TensorArrayScatterV3", "indices: int32", "value: T")
_writer("TensorArraySplitV3", "value: T", "lengths: int64")
_reader(
    "TensorArrayReadV3",
    ["index: int32"],
    ["value: dtype"],
    ["dtype: type"],
    lambda ctx: unknown_shape(),
)
_reader(
    "TensorArrayGatherV3",
    ["indices: int32"],
    ["value: dtype"],
    ["dtype: type", "element_shape: shape = None"],
    _gather_shape,
)
_reader(
    "TensorArrayConcatV3",
    [],
    ["value: dtype", "lengths: int64"],
    ["dtype: type", "element_shape_except0: shape = None"],
    lambda ctx: [unknown_shape(), TensorShape([None])],
)
_reader("TensorArraySizeV3", [], ["size: int32"], [], scalar)
_array_op("TensorArrayCloseV3", ["handle: resource"], [], [], no_outputs)
_reader(
    "TensorArrayGradV3",
    [],
    ["grad_handle: resource", "flow_out: float"],
    ["source: string"],
    _HANDLE_AND_FLOW,
)

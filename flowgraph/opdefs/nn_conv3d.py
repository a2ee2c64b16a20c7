"""OpDefs of 3-D convolution and pooling (TensorFlow's nn_ops.cc: Conv3D, its V2 backprops,
MaxPool3D, AvgPool3D and their gradients) over NDHWC or NCDHW tensors. The output geometry of
each spatial dim is convolution's `window_geometry`; the shape functions are the 2-D ones
(nn_conv.py), which read the rank from `data_format`."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.opdefs.nn_conv import (
    conv_shape,
    pool_shape,
    register_conv,
    shape_from_input,
    shape_of_input,
)

_FLOATS = "{half, bfloat16, float, double}"
_PADDING = "padding: {'SAME', 'VALID'}"
_FORMAT = "data_format: {'NDHWC', 'NCDHW'} = 'NDHWC'"

_CONV_ATTRS = [
    f"T: {_FLOATS}",
    "strides: list(int) >= 5",
    _PADDING,
    _FORMAT,
    "dilations: list(int) = [1, 1, 1, 1, 1]",
]
register_conv(
    "Conv3D",
    _CONV_ATTRS,
    conv_shape,
    5,
    suffix="V2",
    input_sizes=("Tshape", ["Tshape: {int32, int64} = DT_INT32"]),
)

_POOL_ATTRS = ["ksize: list(int) >= 5", "strides: list(int) >= 5", _PADDING, _FORMAT]
register_op(
    OpDef(
        "MaxPool3D",
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=_POOL_ATTRS + ["T: {half, bfloat16, float}"],
        shape_fn=pool_shape,
    )
)
register_op(
    OpDef(
        "MaxPool3DGrad",
        inputs=["orig_input: TInput", "orig_output: TInput", "grad: T"],
        outputs=["output: T"],
        attrs=_POOL_ATTRS
        + ["T: {half, bfloat16, float} = DT_FLOAT", "TInput: {half, bfloat16, float} = DT_FLOAT"],
        shape_fn=shape_of_input(0),
    )
)
register_op(
    OpDef(
        "AvgPool3D",
        inputs=["input: T"],
        outputs=["output: T"],
        attrs=_POOL_ATTRS + [f"T: {_FLOATS}"],
        shape_fn=pool_shape,
    )
)
register_op(
    OpDef(
        "AvgPool3DGrad",
        inputs=["orig_input_shape: int32", "grad: T"],
        outputs=["output: T"],
        attrs=_POOL_ATTRS + [f"T: {_FLOATS}"],
        shape_fn=shape_from_input(0, 5),
    )
)

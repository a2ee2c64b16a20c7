"""OpDefs of the element-wise and reduction rows of Table 1 (TensorFlow's math_ops.cc).

Element-wise ops are table rows: an op type and the dtypes it accepts. The dtype sets are
TensorFlow 1.15's, widened only where the NumPy kernel computes the same thing for the extra
types (e.g. unsigned ints for Maximum). Matrix ops (MatMul, BatchMatMul, ...) are in `linalg.py`.
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, broadcast_shape, unknown_shape
from flowgraph.opdefs.shape_fns import broadcast, merge_all, reduction, unchanged

NUMERIC = "numbertypes"
REAL = "realnumbertypes"
FLOAT = "{half, bfloat16, float, double}"
FLOAT_COMPLEX = "{half, bfloat16, float, double, complex64, complex128}"
SIGNED = "{half, bfloat16, float, double, int8, int16, int32, int64, complex64, complex128}"
SIGNED_REAL = "{half, bfloat16, float, double, int8, int16, int32, int64}"
INTEGER = "{uint8, int8, uint16, int16, int32, int64, uint32, uint64}"
FLOAT_INT = "{half, float, double, int8, int16, int32, int64, uint8, uint16, uint32, uint64}"
COMPLEX = "{complex64, complex128}"

# Binary element-wise ops with NumPy broadcasting: op type -> allowed T.
BINARY = {
    "Add": (
        "{half, float, double, uint8, int8, uint16, int16, int32, int64, uint32, uint64, "
        "complex64, complex128, string}"
    ),
    "AddV2": NUMERIC,
    "Sub": NUMERIC,
    "Mul": NUMERIC,
    "Div": NUMERIC,
    "RealDiv": FLOAT_COMPLEX,
    "FloorDiv": REAL,
    "FloorMod": REAL,
    "TruncateDiv": INTEGER,
    "TruncateMod": REAL,
    "Pow": "{half, float, double, int32, int64, complex64, complex128}",
    "Maximum": REAL,
    "Minimum": REAL,
    "SquaredDifference": "{half, float, double, int32, int64, complex64, complex128}",
    "Atan2": FLOAT,
    "DivNoNan": FLOAT_COMPLEX,
    "BitwiseAnd": INTEGER,
    "BitwiseOr": INTEGER,
    "BitwiseXor": INTEGER,
    "LeftShift": INTEGER,
    "RightShift": INTEGER,
    # The kernels TF's gradient functions call: (y, dy) where y is the forward output.
    "TanhGrad": FLOAT_COMPLEX,
    "SigmoidGrad": FLOAT_COMPLEX,
    "SqrtGrad": FLOAT_COMPLEX,
    "RsqrtGrad": FLOAT_COMPLEX,
    "ReciprocalGrad": FLOAT_COMPLEX,
}
_BINARY_ARGS = {name: ["y", "dy"] for name in BINARY if name.endswith("Grad")}
_BINARY_ARGS["Atan2"] = ["y", "x"]
for _op, _types in BINARY.items():
    _a, _b = _BINARY_ARGS.get(_op, ["x", "y"])
    register_op(
        OpDef(
            _op,
            inputs=[f"{_a}: T", f"{_b}: T"],
            outputs=["z: T"],
            attrs=[f"T: {_types}"],
            shape_fn=broadcast,
        )
    )

# Unary element-wise ops: op type -> allowed T. The output has the input's type and shape.
UNARY = {
    "Invert": INTEGER,
    "Neg": SIGNED,
    "Abs": SIGNED_REAL,
    "Sign": SIGNED,
    "Square": SIGNED,
    "Sqrt": FLOAT_COMPLEX,
    "Rsqrt": FLOAT_COMPLEX,
    "Reciprocal": FLOAT_COMPLEX,
    "Inv": FLOAT_COMPLEX,  # Reciprocal's old name, still found in GraphDefs
    "Exp": FLOAT_COMPLEX,
    "Expm1": FLOAT_COMPLEX,
    "Log": FLOAT_COMPLEX,
    "Log1p": FLOAT_COMPLEX,
    "Sin": FLOAT_COMPLEX,
    "Cos": FLOAT_COMPLEX,
    "Tan": FLOAT_COMPLEX,
    "Asin": FLOAT_COMPLEX,
    "Acos": FLOAT_COMPLEX,
    "Atan": FLOAT_COMPLEX,
    "Sinh": FLOAT_COMPLEX,
    "Cosh": FLOAT_COMPLEX,
    "Tanh": FLOAT_COMPLEX,
    "Asinh": FLOAT_COMPLEX,
    "Acosh": FLOAT_COMPLEX,
    "Atanh": FLOAT_COMPLEX,
    "Sigmoid": FLOAT_COMPLEX,
    "Erf": FLOAT,
    "Erfc": FLOAT,
    "Lgamma": FLOAT,
    "Digamma": FLOAT,
    "Floor": FLOAT,
    "Ceil": FLOAT,
    "Rint": FLOAT,
    "Round": SIGNED,
    "Conj": COMPLEX,
}
for _op, _types in UNARY.items():
    register_op(
        OpDef(_op, inputs=["x: T"], outputs=["y: T"], attrs=[f"T: {_types}"], shape_fn=unchanged)
    )

# Float predicates: T -> bool, same shape.
for _op in ("IsNan", "IsInf", "IsFinite"):
    register_op(
        OpDef(_op, inputs=["x: T"], outputs=["y: bool"], attrs=[f"T: {FLOAT}"], shape_fn=unchanged)
    )

# Complex parts: complex T -> real Tout, same shape.
for _op in ("Real", "Imag", "ComplexAbs"):
    register_op(
        OpDef(
            _op,
            inputs=["input: T" if _op != "ComplexAbs" else "x: T"],
            outputs=["output: Tout" if _op != "ComplexAbs" else "y: Tout"],
            attrs=["T: {complex64, complex128} = DT_COMPLEX64", "Tout: {float, double} = DT_FLOAT"],
            shape_fn=unchanged,
        )
    )
register_op(
    OpDef(
        "Complex",
        inputs=["real: T", "imag: T"],
        outputs=["out: Tout"],
        attrs=["T: {float, double} = DT_FLOAT", "Tout: {complex64, complex128} = DT_COMPLEX64"],
        shape_fn=broadcast,
    )
)

# Comparisons: broadcasting, bool output.
for _op in ("Less", "LessEqual", "Greater", "GreaterEqual"):
    register_op(
        OpDef(
            _op,
            inputs=["x: T", "y: T"],
            outputs=["z: bool"],
            attrs=[f"T: {REAL}"],
            shape_fn=broadcast,
        )
    )


def _equality_shape(ctx) -> TensorShape:
    """Broadcast shape; with incompatible_shape_error=false a mismatch gives a scalar."""
    try:
        return broadcast(ctx)
    except ValueError:
        if ctx.attrs["incompatible_shape_error"]:
            raise
        return TensorShape([])


for _op in ("Equal", "NotEqual"):
    register_op(
        OpDef(
            _op,
            inputs=["x: T", "y: T"],
            outputs=["z: bool"],
            attrs=[
                (
                    "T: {half, float, double, uint8, int8, uint16, int16, int32, int64, "
                    "uint32, uint64, complex64, complex128, bool, string}"
                ),
                "incompatible_shape_error: bool = true",
            ],
            shape_fn=_equality_shape,
        )
    )

for _op in ("LogicalAnd", "LogicalOr"):
    register_op(OpDef(_op, inputs=["x: bool", "y: bool"], outputs=["z: bool"], shape_fn=broadcast))
register_op(OpDef("LogicalNot", inputs=["x: bool"], outputs=["y: bool"], shape_fn=unchanged))

register_op(
    OpDef(
        "AddN",
        inputs=["inputs: N * T"],
        outputs=["sum: T"],
        attrs=["N: int >= 1", f"T: {NUMERIC}"],
        shape_fn=merge_all,
    )
)

register_op(
    OpDef(
        "Cast",
        inputs=["x: SrcT"],
        outputs=["y: DstT"],
        attrs=["SrcT: type", "DstT: type", "Truncate: bool = false"],
        shape_fn=unchanged,
    )
)


# -- selection --------------------------------------------------------------------------------
def _where_shape(ctx) -> TensorShape:
    """Where(input) -> int64 [num_true, rank]: the coordinates of the true elements."""
    shape = ctx.input_shapes[0]
    return TensorShape([None, shape.ndims])


def _select_shape(ctx) -> TensorShape:
    """Select(c, t, e): t and e have one shape; c is a scalar, that shape, or a vector over dim
    0."""
    cond, t, e = ctx.input_shapes
    if not t.is_compatible_with(e):
        raise ValueError(f"Shapes must be equal rank and compatible, but are {t} and {e}")
    out = t.merge_with(e)
    if cond.ndims is None or out.ndims is None or cond.ndims == 0:
        return out
    if cond.ndims == 1 and out.ndims > 1:
        if not cond[0].is_compatible_with(out[0]):
            raise ValueError(f"Dimensions must be equal, but are {cond[0]} and {out[0]}")
        return out
    if not cond.is_compatible_with(out):
        raise ValueError(f"Shapes must be equal rank and compatible, but are {cond} and {out}")
    return out.merge_with(cond)


def _select_v2_shape(ctx) -> TensorShape:
    cond, t, e = ctx.input_shapes
    return broadcast_shape(broadcast_shape(cond, t), e)


register_op(
    OpDef(
        "Where",
        inputs=["input: T"],
        outputs=["index: int64"],
        attrs=[
            (
                "T: {bool, half, float, double, int8, int16, int32, int64, uint8, uint16, "
                "uint32, uint64, complex64, complex128} = DT_BOOL"
            )
        ],
        shape_fn=_where_shape,
    )
)
register_op(
    OpDef(
        "Select",
        inputs=["condition: bool", "t: T", "e: T"],
        outputs=["output: T"],
        attrs=["T: type"],
        shape_fn=_select_shape,
    )
)
register_op(
    OpDef(
        "SelectV2",
        inputs=["condition: bool", "t: T", "e: T"],
        outputs=["output: T"],
        attrs=["T: type"],
        shape_fn=_select_v2_shape,
    )
)


# -- reductions -------------------------------------------------------------------------------
_REDUCE_ATTRS = ["keep_dims: bool = false", "Tidx: {int32, int64} = DT_INT32"]
REDUCTIONS = {"Sum": NUMERIC, "Mean": NUMERIC, "Prod": NUMERIC, "Max": REAL, "Min": REAL}
for _op, _types in REDUCTIONS.items():
    register_op(
        OpDef(
            _op,
            inputs=["input: T", "reduction_indices: Tidx"],
            outputs=["output: T"],
            attrs=_REDUCE_ATTRS + [f"T: {_types}"],
            shape_fn=reduction,
        )
    )
for _op in ("Any", "All"):
    register_op(
        OpDef(
            _op,
            inputs=["input: bool", "reduction_indices: Tidx"],
            outputs=["output: bool"],
            attrs=_REDUCE_ATTRS,
            shape_fn=reduction,
        )
    )


def _arg_reduce_shape(ctx) -> TensorShape:
    """ArgMax/ArgMin drop the (scalar) `dimension` axis; unknown axis -> rank-1 unknown dims."""
    shape = ctx.input_shapes[0]
    dim_shape = ctx.input_shapes[1]
    if dim_shape.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {dim_shape.ndims}")
    axis = ctx.input_constant(1)
    if shape.ndims is None:
        return unknown_shape()
    rank = shape.ndims
    if axis is None:
        return unknown_shape(max(rank - 1, 0))
    axis = int(axis)
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"Expected dimension in the range [{-rank}, {rank}), but got {axis}")
    dims = shape.as_list()
    if rank == 0:
        return TensorShape([])
    del dims[axis % rank]
    return TensorShape(dims)


for _op in ("ArgMax", "ArgMin"):
    register_op(
        OpDef(
            _op,
            inputs=["input: T", "dimension: Tidx"],
            outputs=["output: output_type"],
            attrs=[
                f"T: {REAL}",
                "Tidx: {int32, int64} = DT_INT32",
                "output_type: {int32, int64} = DT_INT64",
            ],
            shape_fn=_arg_reduce_shape,
        )
    )


def _scan_shape(ctx) -> TensorShape:
    axis_shape = ctx.input_shapes[1]
    if axis_shape.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {axis_shape.ndims}")
    return ctx.input_shapes[0]


for _op in ("Cumsum", "Cumprod"):
    register_op(
        OpDef(
            _op,
            inputs=["x: T", "axis: Tidx"],
            outputs=["out: T"],
            attrs=[
                "exclusive: bool = false",
                "reverse: bool = false",
                f"T: {NUMERIC}",
                "Tidx: {int32, int64} = DT_INT32",
            ],
            shape_fn=_scan_shape,
        )
    )


def _accumulate_shape(ctx):
    merged = merge_all(ctx)
    declared = TensorShape(ctx.attrs["shape"]) if ctx.attrs.get("shape") is not None else None
    return merged if declared is None else merged.merge_with(declared)


register_op(
    OpDef(
        "AccumulateNV2",  # AddN that TF 1.x may compute in a temporary variable: same sum
        inputs=["inputs: N * T"],
        outputs=["sum: T"],
        attrs=["N: int >= 1", f"T: {NUMERIC}", "shape: shape"],
        shape_fn=_accumulate_shape,
    )
)

"""Element-wise math ops (Table 1 "Element-wise mathematical operations"): arithmetic,
transcendental functions, comparisons, logic, selection and casts, with TF1's signatures.

Reductions and scans are in `reduction.py`, matrix products in `linalg.py`, and the Tensor
operators (`+`, `/`, `<`, `&`, ...) that call these wrappers in `tensor_operators.py`. Single-op
wrappers are generated from a table (one row per op); wrappers that compose several ops, or that
follow TF1's special rules (truediv's casts, div's Python-2 semantics), are written out below.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import apply_op, graph_of
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.operation import Tensor


def name_scope(name, default_name, values):
    """TF's ops.name_scope(name, default_name, values): a scope in the graph of `values`.

    The scope string ends in '/', so an op created with `name=scope` takes exactly that name
    (e.g. "truediv"), while helper ops inside it become "truediv/Cast".
    """
    graph = graph_of(values) if values else default_graph.get()
    return graph.name_scope(name if name else default_name)


def _op(op_type: str, inputs: list, name, **attrs) -> Tensor:
    return apply_op(op_type, inputs, name=name, **attrs).outputs[0]


def _unary(op_type: str, py_name: str, doc: str):
    """A TF1 wrapper `py_name(x, name=None)` for the one-input op `op_type`."""

    def wrapper(x, name=None):
        return _op(op_type, [x], name)

    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = f"{doc}\n\n    Example: y = tf.{py_name}(x)  # op type {op_type!r}"
    return wrapper


def _binary(op_type: str, py_name: str, doc: str, arg_names=("x", "y")):
    """A TF1 wrapper `py_name(x, y, name=None)` for the broadcasting two-input op `op_type`."""
    a_name, b_name = arg_names

    def wrapper(x, y, name=None):
        return _op(op_type, [x, y], name)

    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = (
        f"{doc}\n\n    Args: {a_name}, {b_name}: tensors of one dtype; NumPy broadcasting applies."
        f"\n    Example: z = tf.{py_name}({a_name}, {b_name})  # op type {op_type!r}"
    )
    return wrapper


# -- one op per wrapper: (op type, TF1 name, what it computes) ----------------------------------
subtract = _binary("Sub", "subtract", "x - y element-wise.")
multiply = _binary("Mul", "multiply", "x * y element-wise.")
realdiv = _binary("RealDiv", "realdiv", "x / y for float and complex tensors.")
floormod = _binary("FloorMod", "floormod", "x mod y with the sign of y (Python's %).")
mod = floormod
truncatediv = _binary("TruncateDiv", "truncatediv", "Integer x / y rounded toward zero (C's /).")
truncatemod = _binary("TruncateMod", "truncatemod", "x mod y with the sign of x (C's fmod).")
maximum = _binary("Maximum", "maximum", "max(x, y) element-wise.")
minimum = _binary("Minimum", "minimum", "min(x, y) element-wise.")
squared_difference = _binary("SquaredDifference", "squared_difference", "(x - y) * conj(x - y).")
atan2 = _binary(
    "Atan2",
    "atan2",
    "The angle of the point (x, y): arctan(y / x) in (-pi, pi].",
    arg_names=("y", "x"),
)
div_no_nan = _binary("DivNoNan", "div_no_nan", "x / y, but 0 wherever y == 0.")
less = _binary("Less", "less", "x < y element-wise (bool).")
less_equal = _binary("LessEqual", "less_equal", "x <= y element-wise (bool).")
greater = _binary("Greater", "greater", "x > y element-wise (bool).")
greater_equal = _binary("GreaterEqual", "greater_equal", "x >= y element-wise (bool).")
equal = _binary("Equal", "equal", "x == y element-wise (bool); any dtype, strings included.")
not_equal = _binary("NotEqual", "not_equal", "x != y element-wise (bool).")
logical_and = _binary("LogicalAnd", "logical_and", "x AND y for bool tensors.")
logical_or = _binary("LogicalOr", "logical_or", "x OR y for bool tensors.")

negative = _unary("Neg", "negative", "-x element-wise.")
sign = _unary("Sign", "sign", "-1, 0 or 1 by the sign of x; x / |x| for complex x.")
square = _unary("Square", "square", "x * x element-wise.")
sqrt = _unary("Sqrt", "sqrt", "The square root of x.")
rsqrt = _unary("Rsqrt", "rsqrt", "1 / sqrt(x).")
reciprocal = _unary("Reciprocal", "reciprocal", "1 / x.")
exp = _unary("Exp", "exp", "e ** x.")
expm1 = _unary("Expm1", "expm1", "e ** x - 1, accurate for small x.")
log = _unary("Log", "log", "The natural logarithm of x.")
log1p = _unary("Log1p", "log1p", "log(1 + x), accurate for small x.")
sin = _unary("Sin", "sin", "sin(x).")
cos = _unary("Cos", "cos", "cos(x).")
tan = _unary("Tan", "tan", "tan(x).")
asin = _unary("Asin", "asin", "arcsin(x).")
acos = _unary("Acos", "acos", "arccos(x).")
atan = _unary("Atan", "atan", "arctan(x).")
sinh = _unary("Sinh", "sinh", "sinh(x).")
cosh = _unary("Cosh", "cosh", "cosh(x).")
asinh = _unary("Asinh", "asinh", "arsinh(x).")
acosh = _unary("Acosh", "acosh", "arcosh(x).")
atanh = _unary("Atanh", "atanh", "artanh(x).")
erf = _unary("Erf", "erf", "The Gauss error function of x.")
erfc = _unary("Erfc", "erfc", "1 - erf(x), accurate for large x.")
lgamma = _unary("Lgamma", "lgamma", "log(|Gamma(x)|).")
digamma = _unary("Digamma", "digamma", "Psi(x), the derivative of lgamma(x).")
floor = _unary("Floor", "floor", "The largest integer <= x.")
ceil = _unary("Ceil", "ceil", "The smallest integer >= x.")
rint = _unary("Rint", "rint", "x rounded to the nearest integer, halves to even.")
is_nan = _unary("IsNan", "is_nan", "True where x is NaN.")
is_inf = _unary("IsInf", "is_inf", "True where x is +inf or -inf.")
is_finite = _unary("IsFinite", "is_finite", "True where x is neither inf nor NaN.")
logical_not = _unary("LogicalNot", "logical_not", "NOT x for a bool tensor.")


# -- wrappers with TF1's extra rules ------------------------------------------------------------
def add(x, y, name=None):
    """x + y element-wise with broadcasting: AddV2, or Add for strings (concatenation).

    Example: tf.add(tf.constant([1, 2]), 3)  # -> [4, 5]
    """
    with name_scope(name, "Add", [x, y]) as scope:
        x = convert_to_tensor(x, name="x")
        op_type = "Add" if x.dtype.base_dtype == dtypes.string else "AddV2"
        return _op(op_type, [x, y], scope)


def _same_dtype(x, y):
    """Converts x, then y with x's dtype as a hint; TF1's divisions demand equal dtypes."""
    x = convert_to_tensor(x, name="x")
    y = convert_to_tensor(y, name="y", preferred_dtype=x.dtype.base_dtype)
    if x.dtype.base_dtype != y.dtype.base_dtype:
        raise TypeError(
            f"x and y must have the same dtype, got {x.dtype.name!r} != {y.dtype.name!r}"
        )
    return x, y


# truediv's rule: small ints divide in float32, 32/64-bit ints in float64 (Python 3 division).
_TRUEDIV_CASTS = {
    dtypes.int8: dtypes.float32,
    dtypes.uint8: dtypes.float32,
    dtypes.int16: dtypes.float32,
    dtypes.uint16: dtypes.float32,
    dtypes.int32: dtypes.float64,
    dtypes.int64: dtypes.float64,
}


def truediv(x, y, name=None):
    """x / y with Python 3 semantics: integers are cast to floats first, then RealDiv.

    Example: tf.truediv(tf.constant(3), tf.constant(2))  # float64 1.5
    """
    with name_scope(name, "truediv", [x, y]) as scope:
        x, y = _same_dtype(x, y)
        target = _TRUEDIV_CASTS.get(x.dtype.base_dtype)
        if target is not None:
            x = cast(x, target)
            y = cast(y, target)
        return _op("RealDiv", [x, y], scope)


def divide(x, y, name=None):
    """x / y, the same as the `/` operator (truediv); with `name`, the op gets that name."""
    return truediv(x, y, name=name or None)


def div(x, y, name=None):
    """x / y with Python 2 semantics: floor division for integers, RealDiv for floats.

    Example: tf.div(7, 2) -> 3, tf.div(-7, 2) -> -4, tf.div(7., 2.) -> 3.5
    """
    with name_scope(name, "div", [x, y]) as scope:
        x, y = _same_dtype(x, y)
        if x.dtype.is_floating or x.dtype.is_complex:
            return _op("RealDiv", [x, y], scope)
        return _op("FloorDiv", [x, y], scope)


def floordiv(x, y, name=None):
    """floor(x / y) element-wise; floats are floored too (7.5 // 2 = 3.0)."""
    with name_scope(name, "floordiv", [x, y]) as scope:
        return _op("FloorDiv", [x, y], scope)


def pow(x, y, name=None):
    """x ** y element-wise; integer x to a negative integer power is an error at run time."""
    with name_scope(name, "Pow", [x]) as scope:
        return _op("Pow", [x, y], scope)


def abs(x, name=None):
    """|x| element-wise; for complex x the (real) magnitude, via ComplexAbs."""
    with name_scope(name, "Abs", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        if x.dtype.is_complex:
            return _op("ComplexAbs", [x], scope, Tout=x.dtype.real_dtype)
        return _op("Abs", [x], scope)


def round(x, name=None):
    """Rounds half to even (banker's rounding); integer tensors are returned unchanged."""
    x = convert_to_tensor(x, name="x")
    if x.dtype.is_integer:
        return x
    return _op("Round", [x], name)


def sigmoid(x, name=None):
    """1 / (1 + exp(-x)), computed without overflow."""
    with name_scope(name, "Sigmoid", [x]) as scope:
        return _op("Sigmoid", [x], scope)


def tanh(x, name=None):
    """tanh(x)."""
    with name_scope(name, "Tanh", [x]) as scope:
        return _op("Tanh", [x], scope)


def logical_xor(x, y, name="LogicalXor"):
    """x XOR y for bool tensors, built as (x OR y) AND NOT (x AND y) like TF1."""
    return _op("LogicalAnd", [logical_or(x, y), logical_not(logical_and(x, y))], name)


def add_n(inputs, name=None):
    """The element-wise sum of a list of tensors of one dtype and shape (AddN).

    Example: tf.add_n([a, b, c])
    """
    if not inputs or not isinstance(inputs, (list, tuple)):
        raise ValueError(
            "inputs must be a list of at least one Tensor with the same dtype and shape"
        )
    inputs = [convert_to_tensor(x) for x in inputs]
    if len(inputs) == 1:
        if name:
            return _op("Identity", inputs, name)
        return inputs[0]
    return _op("AddN", [inputs], name)


def accumulate_n(inputs, shape=None, tensor_dtype=None, name=None):
    """The element-wise sum of tensors of one dtype and shape, as TF 1.x's AccumulateNV2 (which
    TensorFlow may compute in a temporary variable; the sum is the same). `shape` and
    `tensor_dtype` check the inputs.

    Example: tf.accumulate_n([a, b, a], shape=[2, 2], tensor_dtype=tf.int32)
    """
    if not inputs or not isinstance(inputs, (list, tuple)):
        raise ValueError(
            "inputs must be a list of at least one Tensor with the same dtype and shape"
        )
    inputs = [convert_to_tensor(x) for x in inputs]
    if any(x.dtype != inputs[0].dtype for x in inputs):
        raise ValueError(
            "inputs must be a list of at least one Tensor with the same dtype and shape"
        )
    merged = TensorShape(None) if shape is None else TensorShape(shape)
    for x in inputs:
        merged = merged.merge_with(x.shape)
    if tensor_dtype is not None and tensor_dtype != inputs[0].dtype:
        raise TypeError(f"tensor_dtype is {tensor_dtype}, but input is of type {inputs[0].dtype}")
    if len(inputs) == 1:
        return _op("Identity", inputs, name) if name else inputs[0]
    return _op("AccumulateNV2", [inputs], name, shape=merged)


def scalar_mul(scalar, x, name=None):
    """scalar * x, where `scalar` must be a 0-d value (ValueError otherwise)."""
    x = convert_to_tensor(x)
    scalar = convert_to_tensor(scalar, dtype=x.dtype.base_dtype, name="scalar")
    if scalar.shape.ndims != 0:
        raise ValueError(f"Only scalar multiply works, got shape {scalar.shape}")
    return _op("Mul", [scalar, x], name)


# -- selection ----------------------------------------------------------------------------------
def where(condition, x=None, y=None, name=None):
    """TF1's where: with only `condition`, the int64 coordinates [n, rank] of its true entries
    (Where op); with x and y, picks from x where condition else from y (Select: condition has
    x's shape, or is a vector over x's first dimension, or a scalar).

    Example: tf.where([True, False, True])  # [[0], [2]]
    """
    if x is None and y is None:
        with name_scope(name, "Where", [condition]) as scope:
            condition = convert_to_tensor(condition, preferred_dtype=dtypes.bool_, name="condition")
            return _op("Where", [condition], scope)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    return _op("Select", [condition, x, y], name)


def where_v2(condition, x=None, y=None, name=None):
    """Like `where`, but condition, x and y broadcast against each other (SelectV2)."""
    if x is None and y is None:
        return where(condition, name=name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    return _op("SelectV2", [condition, x, y], name)


# -- casts and complex numbers ------------------------------------------------------------------
def cast(x, dtype, name=None):
    """`x` converted to `dtype`: floats to ints truncate toward zero, complex to real keeps the
    real part, anything to bool is `!= 0`. A tensor of that dtype already is returned as is.

    Example: tf.cast(tf.constant([1.7, -1.7]), tf.int32)  # [1, -1]
    """
    base = dtypes.as_dtype(dtype).base_dtype
    if isinstance(x, Tensor) and x.dtype.base_dtype == base:
        return x
    with name_scope(name, "Cast", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        if x.dtype.base_dtype != base:
            x = _op("Cast", [x], scope, DstT=base)
        return x


def to_float(x, name="ToFloat"):
    return cast(x, dtypes.float32, name=name)


def to_double(x, name="ToDouble"):
    return cast(x, dtypes.float64, name=name)


def to_int32(x, name="ToInt32"):
    return cast(x, dtypes.int32, name=name)


def to_int64(x, name="ToInt64"):
    return cast(x, dtypes.int64, name=name)


def to_complex64(x, name="ToComplex64"):
    return cast(x, dtypes.complex64, name=name)


def to_complex128(x, name="ToComplex128"):
    return cast(x, dtypes.complex128, name=name)


def saturate_cast(value, dtype, name=None):
    """Casts `value` to `dtype`, first clamping it into dtype's range (no wrap-around)."""
    with name_scope(name, "saturate_cast", [value]) as scope:
        value = convert_to_tensor(value, name="value")
        dtype = dtypes.as_dtype(dtype).base_dtype
        if value.dtype.is_complex and not dtype.is_complex:
            value = real(value)
        src = value.dtype.real_dtype
        limits = dtype.real_dtype
        if src.is_bool or limits.is_bool:
            return cast(value, dtype, name=scope)
        if src.min < limits.min:
            lo = convert_to_tensor(
                np.array(limits.min).astype(value.dtype.as_numpy_dtype), name="min"
            )
            value = maximum(value, lo)
        if src.max > limits.max:
            hi = convert_to_tensor(
                np.array(limits.max).astype(value.dtype.as_numpy_dtype), name="max"
            )
            value = minimum(value, hi)
        return cast(value, dtype, name=scope)


def conj(x, name=None):
    """The complex conjugate; real tensors are returned unchanged (TF1)."""
    if isinstance(x, Tensor) and (x.dtype.is_floating or x.dtype.is_integer):
        return x
    with name_scope(name, "Conj", [x]) as scope:
        x = convert_to_tensor(x, name="x")
        if x.dtype.is_complex:
            return _op("Conj", [x], scope)
        if x.dtype.is_floating or x.dtype.is_integer:
            return x
        raise TypeError(f"Expected numeric tensor, got dtype {x.dtype!r}")


def real(input, name=None):
    """The real part of a complex tensor; a real tensor is returned unchanged."""
    with name_scope(name, "Real", [input]) as scope:
        input = convert_to_tensor(input, name="input")
        if input.dtype.is_complex:
            return _op("Real", [input], scope, Tout=input.dtype.real_dtype)
        return input


def imag(input, name=None):
    """The imaginary part of a complex tensor; zeros for a real tensor."""
    with name_scope(name, "Imag", [input]) as scope:
        input = convert_to_tensor(input, name="input")
        if input.dtype.is_complex:
            return _op("Imag", [input], scope, Tout=input.dtype.real_dtype)
        return _op("ZerosLike", [input], scope)


def complex(real, imag, name=None):
    """real + imag * 1j: two float32 tensors give complex64, two float64 give complex128."""
    real = convert_to_tensor(real, name="real")
    imag = convert_to_tensor(imag, name="imag")
    types = (real.dtype.base_dtype, imag.dtype.base_dtype)
    if types == (dtypes.float64, dtypes.float64):
        tout = dtypes.complex128
    elif types == (dtypes.float32, dtypes.float32):
        tout = dtypes.complex64
    else:
        raise TypeError(f"real and imag have incorrect types: {real.dtype.name} {imag.dtype.name}")
    return _op("Complex", [real, imag], name, Tout=tout)


# -- the kernels gradient functions call (TF's gen_math_ops.*_grad; not in tf.*) ---------------
def tanh_grad(y, dy, name=None):
    """dy * (1 - y * y), with y = tanh(x)."""
    return _op("TanhGrad", [y, dy], name)


def sigmoid_grad(y, dy, name=None):
    """dy * y * (1 - y), with y = sigmoid(x)."""
    return _op("SigmoidGrad", [y, dy], name)


def sqrt_grad(y, dy, name=None):
    """dy * 0.5 / y, with y = sqrt(x)."""
    return _op("SqrtGrad", [y, dy], name)


def rsqrt_grad(y, dy, name=None):
    """dy * -0.5 * y ** 3, with y = rsqrt(x)."""
    return _op("RsqrtGrad", [y, dy], name)


def reciprocal_grad(y, dy, name=None):
    """-dy * y * y, with y = 1 / x."""
    return _op("ReciprocalGrad", [y, dy], name)


__all__ = [
    "abs",
    "accumulate_n",
    "acos",
    "acosh",
    "add",
    "add_n",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "cast",
    "ceil",
    "complex",
    "conj",
    "cos",
    "cosh",
    "digamma",
    "div",
    "div_no_nan",
    "divide",
    "equal",
    "erf",
    "erfc",
    "exp",
    "expm1",
    "floor",
    "floordiv",
    "floormod",
    "greater",
    "greater_equal",
    "imag",
    "is_finite",
    "is_inf",
    "is_nan",
    "less",
    "less_equal",
    "lgamma",
    "log",
    "log1p",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "mod",
    "multiply",
    "negative",
    "not_equal",
    "pow",
    "real",
    "realdiv",
    "reciprocal",
    "rint",
    "round",
    "rsqrt",
    "saturate_cast",
    "scalar_mul",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "sqrt",
    "square",
    "squared_difference",
    "subtract",
    "tan",
    "tanh",
    "to_complex64",
    "to_complex128",
    "to_double",
    "to_float",
    "to_int32",
    "to_int64",
    "truediv",
    "truncatediv",
    "truncatemod",
    "where",
    "where_v2",
]

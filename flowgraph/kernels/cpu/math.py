"""CPU kernels for element-wise math, casts, selection and reductions: table rows over NumPy
ufuncs (whitepaper §5.4: kernels are thin wrappers over optimized libraries).

Element-wise kernels sit on the hot path of every step, so they are plain calls of a ufunc.
NumPy already checks shapes; a failed broadcast is only translated into TensorFlow's message
("Incompatible shapes: [3] vs. [4]") after the fact, which costs nothing when it succeeds.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.special

from flowgraph.core import dtypes, errors
from flowgraph.kernels.base import register_kernel

_INTS = dtypes.INTEGER
# bfloat16 is not here: kernels/cpu/bfloat16.py computes it in float32 and rounds, as TF does.
_FLOATS = (dtypes.float16, dtypes.float32, dtypes.float64)
_NOT_INTS = _FLOATS + dtypes.COMPLEX


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def incompatible(*arrays) -> errors.InvalidArgumentError:
    """TensorFlow's message for operands that do not broadcast."""
    shapes = " vs. ".join(_shape_str(np.shape(a)) for a in arrays)
    return errors.InvalidArgumentError(None, None, f"Incompatible shapes: {shapes}")


def _binary(fn):
    def kernel(ctx, x, y):
        try:
            return fn(x, y)
        except errors.OpError:
            raise  # the function's own error (division by zero), not a shape mismatch
        except ValueError:
            raise incompatible(x, y) from None

    kernel.direct = fn  # the same result when it succeeds (runtime/step_code.py calls it)
    return kernel


def _no_zero_divisor(fn):
    """Integer division by zero is an error in TF (NumPy would return 0 with a warning)."""

    def checked(x, y):
        # Only divisors that meet a dividend count: (empty axes) % rank-0 is empty, not an error.
        if not np.all(y) and 0 not in np.broadcast_shapes(np.shape(x), np.shape(y)):
            raise errors.InvalidArgumentError(None, None, "Integer division by zero")
        return fn(x, y)

    return checked


def _truncate_div(x, y):
    # x - fmod(x, y) is an exact multiple of y, so floor division of it truncates toward zero.
    return np.floor_divide(np.subtract(x, np.fmod(x, y)), y)


def _float_floor_div(x, y):
    return np.floor(np.true_divide(x, y))


def _int_pow(x, y):
    if np.any(np.less(y, 0)):
        raise errors.InvalidArgumentError(
            None, None, "Integers to negative integer powers are not allowed"
        )
    return np.power(x, y)


def _squared_difference(x, y):
    d = np.subtract(x, y)
    return np.multiply(d, np.conj(d)) if d.dtype.kind == "c" else np.square(d)


def _div_no_nan(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.true_divide(x, y)
    return np.where(np.equal(y, 0), np.zeros((), q.dtype), q)


def _shift(shift):
    """TF's shifts: the amount clamped to [0, bits - 1]; signed right shifts are arithmetic."""

    def kernel(x, y):
        bits = np.dtype(x.dtype).itemsize * 8
        return shift(x, np.clip(y, 0, bits - 1).astype(x.dtype))

    return kernel


# op type -> ufunc (or {dtype tuple: function} where the formula depends on the dtype).
BINARY = {
    "BitwiseAnd": np.bitwise_and,
    "BitwiseOr": np.bitwise_or,
    "BitwiseXor": np.bitwise_xor,
    "LeftShift": _shift(np.left_shift),
    "RightShift": _shift(np.right_shift),
    "Add": np.add,
    "AddV2": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "RealDiv": np.true_divide,
    "Div": {_NOT_INTS: np.true_divide, _INTS: _no_zero_divisor(_truncate_div)},
    "FloorDiv": {_FLOATS: _float_floor_div, _INTS: _no_zero_divisor(np.floor_divide)},
    "FloorMod": {_FLOATS: np.mod, _INTS: _no_zero_divisor(np.mod)},
    "TruncateDiv": _no_zero_divisor(_truncate_div),
    "TruncateMod": {_FLOATS: np.fmod, _INTS: _no_zero_divisor(np.fmod)},
    "Pow": {_NOT_INTS: np.power, (dtypes.int32, dtypes.int64): _int_pow},
    "Maximum": np.maximum,
    "Minimum": np.minimum,
    "SquaredDifference": _squared_difference,
    "Atan2": np.arctan2,
    "DivNoNan": _div_no_nan,
    "Less": np.less,
    "LessEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterEqual": np.greater_equal,
    "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
    # Gradient kernels: (y, dy) with y the forward op's output (TF's cwise_op_*_grad formulas).
    "TanhGrad": lambda y, dy: dy * (1 - y * y),
    "SigmoidGrad": lambda y, dy: dy * (y * (1 - y)),
    "SqrtGrad": lambda y, dy: dy * 0.5 / y,
    "RsqrtGrad": lambda y, dy: dy * (-0.5 * (y * y * y)),
    "ReciprocalGrad": lambda y, dy: -dy * (y * y),
}


def _register_table(table: dict, wrap) -> None:
    for op_type, fn in table.items():
        if isinstance(fn, dict):
            for types, typed_fn in fn.items():
                register_kernel(op_type, dtypes_=types)(wrap(typed_fn))
        else:
            register_kernel(op_type)(wrap(fn))


_register_table(BINARY, _binary)


def _float_result(fn):
    """SciPy's special functions compute float16 in float32/64; the result keeps x's dtype."""

    def call(x):
        return fn(x).astype(x.dtype, copy=False)

    return call


def _sigmoid(x):
    if x.dtype.kind == "c":
        return 1 / (1 + np.exp(-x))
    return scipy.special.expit(x).astype(x.dtype, copy=False)


UNARY = {
    "Invert": np.invert,
    "Neg": np.negative,
    "Abs": np.abs,
    "Sign": np.sign,
    "Square": np.square,
    "Sqrt": np.sqrt,
    "Rsqrt": lambda x: 1 / np.sqrt(x),
    "Reciprocal": np.reciprocal,
    "Inv": np.reciprocal,
    "Exp": np.exp,
    "Expm1": np.expm1,
    "Log": np.log,
    "Log1p": np.log1p,
    "Sin": np.sin,
    "Cos": np.cos,
    "Tan": np.tan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Atan": np.arctan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Tanh": np.tanh,
    "Asinh": np.arcsinh,
    "Acosh": np.arccosh,
    "Atanh": np.arctanh,
    "Sigmoid": _sigmoid,
    "Erf": _float_result(scipy.special.erf),
    "Erfc": _float_result(scipy.special.erfc),
    "Lgamma": _float_result(scipy.special.gammaln),
    "Digamma": _float_result(scipy.special.psi),
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Rint": np.rint,
    "Round": np.round,  # half to even, like TF
    "Conj": np.conj,
    "IsNan": np.isnan,
    "IsInf": np.isinf,
    "IsFinite": np.isfinite,
    "LogicalNot": np.logical_not,
    "Real": np.real,
    "Imag": np.imag,
    "ComplexAbs": np.abs,
}


def _unary(fn):
    def kernel(ctx, x):
        return fn(x)

    kernel.direct = fn  # the same result (runtime/step_code.py calls it)
    return kernel


_register_table(UNARY, _unary)


@register_kernel("Complex")
def complex_(ctx, real, imag):
    # Assigning the parts (rather than real + 1j * imag) keeps inf imaginary parts exact.
    try:
        shape = np.broadcast_shapes(np.shape(real), np.shape(imag))
    except ValueError:
        raise incompatible(real, imag) from None
    out = np.empty(shape, ctx.attrs["Tout"].as_numpy_dtype)
    out.real = real
    out.imag = imag
    return out


def _equality(fn, mismatch_value: bool):
    def kernel(ctx, x, y):
        try:
            return fn(x, y)
        except ValueError:
            if ctx.attrs.get("incompatible_shape_error", True):
                raise incompatible(x, y) from None
            return np.bool_(mismatch_value)

    return kernel


register_kernel("Equal")(_equality(np.equal, False))
register_kernel("NotEqual")(_equality(np.not_equal, True))


@register_kernel("AddN")
def add_n(ctx, *xs):
    first = np.shape(xs[0])
    for i, x in enumerate(xs[1:], 1):
        if np.shape(x) != first:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Inputs to operation AddN must have the same size and shape.  Input 0: "
                f"{_shape_str(first)} != input {i}: {_shape_str(np.shape(x))}",
            )
    if len(xs) == 1:
        return xs[0]
    out = np.add(xs[0], xs[1])
    for x in xs[2:]:
        out = np.add(out, x, out=out) if isinstance(out, np.ndarray) else out + x
    return out


# -- casts --------------------------------------------------------------------------------------
_CASTABLE = dtypes.NUMERIC + (dtypes.bool_,)


@register_kernel("Cast", constraints={"SrcT": _CASTABLE, "DstT": _CASTABLE})
def cast(ctx, x):
    """Float -> int truncates toward zero; complex -> real keeps the real part (as TF does)."""
    dst = ctx.attrs["DstT"].as_numpy_dtype
    x = np.asarray(x)
    if x.dtype.kind == "c" and np.dtype(dst).kind != "c":
        x = x.real
    if x.dtype.kind == "f" and np.dtype(dst).kind in "iub":
        with np.errstate(invalid="ignore"):  # NaN/out of range is undefined in TF as in C
            return x.astype(dst)
    out = x.astype(dst, copy=False)
    if ctx.attrs.get("Truncate") and x.dtype.kind == "f" and out.dtype.itemsize < x.dtype.itemsize:
        # Round toward zero instead of to nearest: step back wherever rounding grew |x|.
        grew = np.abs(out.astype(x.dtype)) > np.abs(x)
        out = np.where(grew, np.nextafter(out, np.zeros((), out.dtype)), out)
    return out


@register_kernel("Cast")
def cast_unsupported(ctx, x):
    src, dst = ctx.attrs["SrcT"].name, ctx.attrs["DstT"].name
    if src == dst:
        return x
    raise errors.UnimplementedError(None, None, f"Cast {src} to {dst} is not supported")


# -- selection ----------------------------------------------------------------------------------
@register_kernel("Where")
def where(ctx, x):
    """The int64 coordinates [num_true, rank] of the true (non-zero) elements, in row-major
    order."""
    return np.argwhere(x).astype(np.int64, copy=False)


@register_kernel("Select")
def select(ctx, cond, t, e):
    if np.shape(t) != np.shape(e):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"'then' and 'else' must have the same size.  but received: "
            f"{_shape_str(np.shape(t))} vs. {_shape_str(np.shape(e))}",
        )
    cond = np.asarray(cond)
    if cond.ndim == 0:
        return t if cond else e
    if cond.shape == np.shape(t):
        return np.where(cond, t, e)
    if cond.ndim == 1 and np.ndim(t) >= 1 and cond.shape[0] == np.shape(t)[0]:
        return np.where(cond.reshape((-1,) + (1,) * (np.ndim(t) - 1)), t, e)
    raise errors.InvalidArgumentError(
        None,
        None,
        f"'condition' must be a scalar, a vector of size {np.shape(t)[:1]} or have the shape of "
        f"'then': {_shape_str(cond.shape)} vs. {_shape_str(np.shape(t))}",
    )


@register_kernel("SelectV2")
def select_v2(ctx, cond, t, e):
    try:
        return np.where(cond, t, e)
    except ValueError:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"condition {_shape_str(np.shape(cond))}, then {_shape_str(np.shape(t))}, and else "
            f"{_shape_str(np.shape(e))} must be broadcastable",
        ) from None


# -- reductions ---------------------------------------------------------------------------------
def reduction_axes(rank: int, axes) -> tuple:
    """The non-negative axes of `axes` for a value of `rank`, sorted; a repeated axis is an
    error, as in TF (also what a fused reduction checks: kernels/cpu/fused.py)."""
    if np.ndim(axes) > 1:
        raise errors.InvalidArgumentError(
            None, None, f"reduction_indices must be at most 1-D, got shape {np.shape(axes)}"
        )
    flat = axes.tolist() if isinstance(axes, np.ndarray) else np.asarray(axes).tolist()
    if not isinstance(flat, list):
        flat = [flat]
    for a in flat:
        if not -rank <= a < rank:
            raise errors.InvalidArgumentError(
                None, None, f"Invalid reduction dimension ({a} for input with {rank} dimension(s)"
            )
    distinct = sorted({a % rank for a in flat})
    if len(distinct) != len(flat):
        dup = next(a % rank for i, a in enumerate(flat) if a % rank in [b % rank for b in flat[:i]])
        raise errors.InvalidArgumentError(
            None, None, f"Invalid reduction arguments: Axes contains duplicate dimension: {dup}"
        )
    return tuple(distinct)


def _accumulator(dtype):
    """Half is summed in float32, like TF's Eigen reducers; other types in their own type."""
    return np.float32 if dtype == np.float16 else dtype


def _reduce(fn):
    def kernel(ctx, x, axes):
        x = np.asarray(x)
        return fn(x, reduction_axes(x.ndim, axes), ctx.attrs["keep_dims"])

    return kernel


def _sum(x, axes, keep):
    # np.add.reduce is np.sum without its Python dispatch layers (~1 us of a 64-value sum)
    return np.add.reduce(x, axis=axes, keepdims=keep, dtype=_accumulator(x.dtype)).astype(
        x.dtype, copy=False
    )


def _prod(x, axes, keep):
    return np.multiply.reduce(x, axis=axes, keepdims=keep, dtype=_accumulator(x.dtype)).astype(
        x.dtype, copy=False
    )


def _mean(x, axes, keep):
    count = math.prod([x.shape[a] for a in axes])
    if count and (x.dtype == np.float32 or x.dtype == np.float64):
        # The common case (a loss, an accuracy), which can neither divide by zero nor round
        # into a narrower type, without mean_of_sum's error-state scope: a 64-value mean took
        # ~10 us, mostly Python around two ufunc calls.
        return np.true_divide(np.add.reduce(x, axis=axes, keepdims=keep), count)
    # TF sums integers in a wider type: uint8 [255, 255, 1] has mean 170, int32 [2**31-1] * 2
    # keeps it
    wide = _accumulator(x.dtype) if x.dtype.kind not in "iu" else np.int64
    wide = np.uint64 if x.dtype == np.uint64 else wide
    return mean_of_sum(np.sum(x, axis=axes, keepdims=keep, dtype=wide), count, x.dtype)


def mean_of_sum(total, count: int, dtype):
    """The mean of `count` values of `dtype` whose sum is `total` (accumulated in a wider type
    for integers): an empty mean is NaN, or 0 for integers; integer means truncate toward zero,
    as C++ division does ([-1, -2, -4] -> -2)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        with np.errstate(invalid="ignore", divide="ignore"):  # empty -> NaN, as in TF, silently
            return np.true_divide(total, count).astype(dtype, copy=False)
    if count == 0:
        return np.zeros(np.shape(total), dtype=dtype)
    wide = np.asarray(total).dtype.type
    quotient = np.floor_divide(total, wide(count))
    if wide is np.int64:
        quotient += (quotient * count != total) & (quotient < 0)
    return np.asarray(quotient).astype(dtype)


def _extremum(fn, identity):
    """Max/Min; an empty reduction gives the identity (lowest/highest value) as in TF."""

    def reduce(x, axes, keep):
        if x.size == 0:
            return fn(x, axis=axes, keepdims=keep, initial=identity(x.dtype))
        return fn(x, axis=axes, keepdims=keep)

    return reduce


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _highest(dtype):
    return np.inf if dtype.kind == "f" else np.iinfo(dtype).max


REDUCTIONS = {
    "Sum": _sum,
    "Prod": _prod,
    "Mean": _mean,
    "Max": _extremum(np.max, _lowest),
    "Min": _extremum(np.min, _highest),
    "Any": lambda x, axes, keep: np.any(x, axis=axes, keepdims=keep),
    "All": lambda x, axes, keep: np.all(x, axis=axes, keepdims=keep),
}
_register_table(REDUCTIONS, _reduce)


def _scalar_axis(x, axis, what: str) -> int:
    rank = np.ndim(x)
    if np.ndim(axis) != 0:
        raise errors.InvalidArgumentError(
            None, None, f"{what} must be a scalar, got shape {_shape_str(np.shape(axis))}"
        )
    axis = int(axis)
    if not -rank <= axis < rank:
        raise errors.InvalidArgumentError(
            None, None, f"Expected dimension in the range [{-rank}, {rank}), but got {axis}"
        )
    return axis % rank


def _arg_reduce(fn, worst: float):
    def kernel(ctx, x, dimension):
        axis = _scalar_axis(x, dimension, "dimension")
        if np.shape(x)[axis] == 0:
            raise errors.InvalidArgumentError(
                None, None, f"Reduction axis {axis} is empty in shape {_shape_str(np.shape(x))}"
            )
        x = np.asarray(x)
        if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
            # TF's reducer only moves to a strictly better value, so NaN never wins (an all-NaN
            # row gives index 0); NumPy would return the first NaN.
            x = np.where(np.isnan(x), worst, x)
        return fn(x, axis=axis).astype(ctx.attrs["output_type"].as_numpy_dtype, copy=False)

    return kernel


register_kernel("ArgMax")(_arg_reduce(np.argmax, -np.inf))  # ties: the first index, as in TF
register_kernel("ArgMin")(_arg_reduce(np.argmin, np.inf))


def _scan(fn, identity: int):
    """Cumsum/Cumprod along a scalar axis; `exclusive` shifts in the identity, `reverse` scans
    from the end."""

    def kernel(ctx, x, axis):
        x = np.asarray(x)
        axis = _scalar_axis(x, axis, "axis")
        reverse, exclusive = ctx.attrs["reverse"], ctx.attrs["exclusive"]
        if reverse:
            x = np.flip(x, axis)
        out = fn(x, axis=axis, dtype=_accumulator(x.dtype)).astype(x.dtype, copy=False)
        if exclusive and x.shape[axis] > 0:
            head = [slice(None)] * x.ndim
            head[axis] = slice(0, 1)
            body = [slice(None)] * x.ndim
            body[axis] = slice(0, -1)
            out = np.concatenate([np.full_like(x[tuple(head)], identity), out[tuple(body)]], axis)
        return np.flip(out, axis) if reverse else out

    return kernel


register_kernel("Cumsum")(_scan(np.cumsum, 0))
register_kernel("Cumprod")(_scan(np.cumprod, 1))


@register_kernel("AccumulateNV2")
def accumulate_n_v2(ctx, *xs):
    return add_n(ctx, *xs)

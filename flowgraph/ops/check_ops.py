"""tf.debugging's assertions (TF 1.15's check_ops): ops that fail the step with
InvalidArgumentError when a condition on tensors does not hold, and Python checks of dtypes,
ranks and shapes that fail at graph construction when the answer is already known.

Each assert returns an op to put under `tf.control_dependencies`; its message lists `message`,
the condition and the tensors (the first `summarize` entries of each), as TensorFlow's do.

Example:
    with tf.control_dependencies([tf.assert_positive(x), tf.assert_rank(x, 2)]):
        y = tf.log(x)
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.framework import default_graph
from flowgraph.framework.convert import constant_value, convert_to_tensor
from flowgraph.framework.operation import Tensor
from flowgraph.framework.scopes import control_dependencies, name_scope
from flowgraph.framework.sparse_tensor import SparseTensor
from flowgraph.ops import array, array_index, logging, reduction
from flowgraph.ops import math as math_ops
from flowgraph.ops.control_flow import cond

__all__ = [
    "add_check_numerics_ops",
    "assert_equal",
    "assert_greater",
    "assert_greater_equal",
    "assert_integer",
    "assert_less",
    "assert_less_equal",
    "assert_near",
    "assert_negative",
    "assert_non_negative",
    "assert_non_positive",
    "assert_none_equal",
    "assert_positive",
    "assert_proper_iterable",
    "assert_rank",
    "assert_rank_at_least",
    "assert_rank_in",
    "assert_same_float_dtype",
    "assert_scalar",
    "assert_type",
    "is_non_decreasing",
    "is_numeric_tensor",
    "is_strictly_increasing",
]

NUMERIC_TYPES = frozenset(dtypes.NUMERIC) | {dtypes.bfloat16}


# -- element-wise comparisons --------------------------------------------------------------------
def _static_failure(data):
    """InvalidArgumentError with `data` joined as TF prints a statically failed assert."""

    def text(d):
        if not isinstance(d, Tensor):
            return str(d)
        value = constant_value(d)
        return str(value) if value is not None else str(d)

    return errors.InvalidArgumentError(None, None, "\n".join(text(d) for d in data))


def _binary_assert(symbol, default_name, compare, x, y, data, summarize, message, name, check):
    """Assert(reduce_all(compare(x, y))), with TF's default data; `check` evaluates the
    comparison now when both sides are constants (assert_equal does, as in TF 1.15)."""
    message = message or ""
    with name_scope(name, default_name, [x, y] + list(data or [])):
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, name="y")
        if data is None:
            data = [
                message,
                f"Condition x {symbol} y did not hold element-wise:",
                f"x ({x.name}) = ",
                x,
                f"y ({y.name}) = ",
                y,
            ]
        # The comparison op first: incompatible shapes fail in its shape function, as in TF.
        condition = reduction.reduce_all(compare(x, y))
        if check is not None:
            x_static, y_static = constant_value(x), constant_value(y)
            if (
                x_static is not None
                and y_static is not None
                and not np.all(check(x_static, y_static))
            ):
                raise _static_failure(data)
        return logging.Assert(condition, data, summarize=summarize)


def assert_equal(x, y, data=None, summarize=None, message=None, name=None):
    """Asserts x == y element-wise (broadcasting); constants are checked at construction."""
    return _binary_assert(
        "==", "assert_equal", math_ops.equal, x, y, data, summarize, message, name, np.equal
    )


def assert_none_equal(x, y, data=None, summarize=None, message=None, name=None):
    """Asserts x != y for every element."""
    message = message or ""
    with name_scope(name, "assert_none_equal", [x, y] + list(data or [])):
        x, y = convert_to_tensor(x, name="x"), convert_to_tensor(y, name="y")
        if data is None:
            data = [
                message,
                "Condition x != y did not hold for every single element:",
                f"x ({x.name}) = ",
                x,
                f"y ({y.name}) = ",
                y,
            ]
        condition = reduction.reduce_all(math_ops.not_equal(x, y))
        return logging.Assert(condition, data, summarize=summarize)


def assert_less(x, y, data=None, summarize=None, message=None, name=None):
    """Asserts x < y element-wise."""
    return _binary_assert(
        "<", "assert_less", math_ops.less, x, y, data, summarize, message, name, None
    )


def assert_less_equal(x, y, data=None, summarize=None, message=None, name=None):
    """Asserts x <= y element-wise."""
    return _binary_assert(
        "<=", "assert_less_equal", math_ops.less_equal, x, y, data, summarize, message, name, None
    )


def assert_greater(x, y, data=None, summarize=None, message=None, name=None):
    """Asserts x > y element-wise."""
    return _binary_assert(
        ">", "assert_greater", math_ops.greater, x, y, data, summarize, message, name, None
    )


def assert_greater_equal(x, y, data=None, summarize=None, message=None, name=None):
    """Asserts x >= y element-wise."""
    compare = math_ops.greater_equal
    return _binary_assert(
        ">=", "assert_greater_equal", compare, x, y, data, summarize, message, name, None
    )


def _sign_assert(default_name, condition, zero_on_left, strict, x, data, summarize, message, name):
    message = message or ""
    with name_scope(name, default_name, [x] + list(data or [])):
        x = convert_to_tensor(x, name="x")
        if data is None:
            data = [
                message,
                f"Condition x {condition} 0 did not hold element-wise:",
                f"x ({x.name}) = ",
                x,
            ]
        zero = convert_to_tensor(0, dtype=x.dtype)
        check = assert_less if strict else assert_less_equal
        left, right = (zero, x) if zero_on_left else (x, zero)
        return check(left, right, data=data, summarize=summarize)


def assert_negative(x, data=None, summarize=None, message=None, name=None):
    """Asserts x < 0 element-wise."""
    return _sign_assert("assert_negative", "<", False, True, x, data, summarize, message, name)


def assert_positive(x, data=None, summarize=None, message=None, name=None):
    """Asserts x > 0 element-wise."""
    return _sign_assert("assert_positive", ">", True, True, x, data, summarize, message, name)


def assert_non_negative(x, data=None, summarize=None, message=None, name=None):
    """Asserts x >= 0 element-wise."""
    return _sign_assert("assert_non_negative", ">=", True, False, x, data, summarize, message, name)


def assert_non_positive(x, data=None, summarize=None, message=None, name=None):
    """Asserts x <= 0 element-wise."""
    return _sign_assert(
        "assert_non_positive", "<=", False, False, x, data, summarize, message, name
    )


def assert_near(x, y, rtol=None, atol=None, data=None, summarize=None, message=None, name=None):
    """Asserts |x - y| < atol + rtol * |y| element-wise (default tolerances 10 eps of x's
    dtype)."""
    message = message or ""
    with name_scope(name, "assert_near", [x, y, rtol, atol] + list(data or [])):
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, name="y", dtype=x.dtype)
        eps = np.finfo(x.dtype.as_numpy_dtype).eps
        rtol = convert_to_tensor(10 * eps if rtol is None else rtol, name="rtol", dtype=x.dtype)
        atol = convert_to_tensor(10 * eps if atol is None else atol, name="atol", dtype=x.dtype)
        if data is None:
            data = [
                message,
                f"x and y not equal to tolerance rtol = {rtol}, atol = {atol}",
                f"x ({x.name}) = ",
                x,
                f"y ({y.name}) = ",
                y,
            ]
        tolerance = atol + rtol * math_ops.abs(y)
        condition = reduction.reduce_all(math_ops.less(math_ops.abs(x - y), tolerance))
        return logging.Assert(condition, data, summarize=summarize)


# -- ranks ---------------------------------------------------------------------------------------
def _rank_assert(x, ranks, static_ok, dynamic_ok, data, summarize, message, what):
    """A no-op when x's static rank satisfies static_ok(rank, ranks); ValueError when it does
    not; else an Assert on the run-time rank. Each of `ranks` must be a scalar."""
    for rank in ranks:
        if rank.dtype.base_dtype != dtypes.int32:
            raise TypeError(f"  {rank.name} must be of type {dtypes.int32}")
    statics = [constant_value(rank) for rank in ranks]
    if all(s is not None for s in statics):
        if any(np.ndim(s) != 0 for s in statics):
            raise ValueError("Rank must be a scalar.")
        x_rank = x.shape.ndims
        if x_rank is not None:
            wanted = [int(s) for s in statics]
            if not static_ok(x_rank, wanted):
                wanted_text = wanted[0] if len(wanted) == 1 else tuple(wanted)
                raise ValueError(
                    f"{message}.  Tensor {x.name} must have {what} {wanted_text}.  Received rank "
                    f"{x_rank}, shape {x.shape}"
                )
            return array.no_op(name="static_checks_determined_all_ok")
    condition = dynamic_ok(array.rank(x), ranks)
    checks = [
        assert_rank(rank, 0, data=["Rank must be a scalar. Received rank: ", rank])
        for rank, s in zip(ranks, statics)
        if s is None
    ]
    with control_dependencies(checks):
        condition = array.identity(condition)
    return logging.Assert(condition, data, summarize=summarize)


def assert_rank(x, rank, data=None, summarize=None, message=None, name=None):
    """Asserts rank(x) == rank: a ValueError now when x's rank is known, else a run-time check."""
    with name_scope(name, "assert_rank", [x, rank] + list(data or [])):
        x = convert_to_tensor(x, name="x")
        rank = convert_to_tensor(rank, name="rank")
        message = message or ""
        if data is None:
            data = [
                message,
                f"Tensor {x.name} must have rank",
                rank,
                "Received shape: ",
                array.shape(x),
            ]
        return _rank_assert(
            x,
            [rank],
            lambda actual, wanted: actual == wanted[0],
            lambda actual, wanted: math_ops.equal(actual, wanted[0]),
            data,
            summarize,
            message,
            "rank",
        )


def assert_rank_at_least(x, rank, data=None, summarize=None, message=None, name=None):
    """Asserts rank(x) >= rank."""
    with name_scope(name, "assert_rank_at_least", [x, rank] + list(data or [])):
        x = convert_to_tensor(x, name="x")
        rank = convert_to_tensor(rank, name="rank")
        message = message or ""
        if data is None:
            data = [
                message,
                f"Tensor {x.name} must have rank at least",
                rank,
                "Received shape: ",
                array.shape(x),
            ]
        return _rank_assert(
            x,
            [rank],
            lambda actual, wanted: actual >= wanted[0],
            lambda actual, wanted: math_ops.greater_equal(actual, wanted[0]),
            data,
            summarize,
            message,
            "rank at least",
        )


def assert_rank_in(x, ranks, data=None, summarize=None, message=None, name=None):
    """Asserts rank(x) is one of `ranks`."""
    with name_scope(name, "assert_rank_in", [x, *ranks] + list(data or [])):
        x = convert_to_tensor(x, name="x")
        ranks = [convert_to_tensor(rank, name="rank") for rank in ranks]
        message = message or ""
        if data is None:
            data = [message, f"Tensor {x.name} must have rank in", *ranks]
            data += ["Received shape: ", array.shape(x)]

        def dynamic(actual, wanted):
            hits = [math_ops.equal(actual, w) for w in wanted]
            return reduction.reduce_any(array.stack(hits))

        return _rank_assert(
            x,
            ranks,
            lambda actual, wanted: actual in wanted,
            dynamic,
            data,
            summarize,
            message,
            "rank in",
        )


def assert_scalar(tensor, name=None, message=None):
    """Returns `tensor` if its static shape is a scalar; ValueError otherwise."""
    with name_scope(name, "assert_scalar", [tensor]) as scope:
        tensor = convert_to_tensor(tensor, name=scope)
        if tensor.shape.ndims != 0:
            raise ValueError(
                f"{message or ''}Expected scalar shape for {tensor.name}, saw shape: "
                f"{tensor.shape}."
            )
        return tensor


# -- dtypes and Python values --------------------------------------------------------------------
def assert_type(tensor, tf_type, message=None, name=None):
    """A no-op if `tensor` has dtype `tf_type`; TypeError otherwise (a static check)."""
    with name_scope(name, "assert_type", [tensor]):
        tensor = convert_to_tensor(tensor, name="tensor")
        if tensor.dtype != tf_type:
            raise TypeError(f"{message or ''}  {tensor.name} must be of type {tf_type}")
        return array.no_op("statically_determined_correct_type")


def assert_integer(x, message=None, name=None):
    """A no-op if `x` has an integer dtype; TypeError otherwise (a static check)."""
    with name_scope(name, "assert_integer", [x]):
        x = convert_to_tensor(x, name="x")
        if not x.dtype.is_integer:
            raise TypeError(
                f'{message or ""}  Expected "x" to be integer type.  Found: {x.name} of dtype '
                f"{x.dtype}"
            )
        return array.no_op("statically_determined_was_integer")


def assert_proper_iterable(values):
    """TypeError unless `values` is an iterable other than a tensor, array or string."""
    if isinstance(values, (Tensor, SparseTensor, np.ndarray, bytes, str)):
        raise TypeError(
            f'Expected argument "values" to be a "proper" iterable.  Found: {type(values)}'
        )
    if not hasattr(values, "__iter__"):
        raise TypeError(f'Expected argument "values" to be iterable.  Found: {type(values)}')


def assert_same_float_dtype(tensors=None, dtype=None):
    """The common floating dtype of `tensors` (and `dtype`), float32 if there is none;
    ValueError on a mismatch or a non-floating dtype."""
    if tensors:
        first = None
        for item in tensors:
            if item is None:
                continue
            item_type = item.dtype.base_dtype
            if dtype is None:
                dtype, first = item_type, getattr(item, "name", str(item))
            elif item_type != dtype:
                origin = f" as {first}" if first else ""
                raise ValueError(
                    f"{getattr(item, 'name', str(item))}, type={item_type}, must be of the same "
                    f"type ({dtype}){origin}."
                )
    if not dtype:
        return dtypes.float32
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype}.")
    return dtype


def is_numeric_tensor(tensor) -> bool:
    """True for a Tensor of a numeric dtype."""
    return isinstance(tensor, Tensor) and tensor.dtype.base_dtype in NUMERIC_TYPES


def _successive_differences(x):
    """x flattened, x[1:] - x[:-1] ([] when x has fewer than two elements)."""
    x = array.reshape(x, [-1])
    if not is_numeric_tensor(x):
        raise TypeError(f"Expected x to be numeric, instead found: {x}")
    length = array.shape(x) - 1
    return cond(
        math_ops.less(array.size(x), 2),
        lambda: convert_to_tensor(np.zeros([0], x.dtype.as_numpy_dtype)),
        lambda: (
            array_index.strided_slice(x, [1], 1 + length)
            - array_index.strided_slice(x, [0], length)
        ),
    )


def is_non_decreasing(x, name=None):
    """A bool scalar: each element of flattened x is <= the next (True for fewer than two)."""
    with name_scope(name, "is_non_decreasing", [x]):
        diff = _successive_differences(convert_to_tensor(x, name="x"))
        zero = convert_to_tensor(0, dtype=diff.dtype)
        return reduction.reduce_all(math_ops.less_equal(zero, diff))


def is_strictly_increasing(x, name=None):
    """A bool scalar: each element of flattened x is < the next (True for fewer than two)."""
    with name_scope(name, "is_strictly_increasing", [x]):
        diff = _successive_differences(convert_to_tensor(x, name="x"))
        zero = convert_to_tensor(0, dtype=diff.dtype)
        return reduction.reduce_all(math_ops.less(zero, diff))


def add_check_numerics_ops():
    """A group of CheckNumerics over every floating output in the default graph, chained so
    that the first NaN or Inf is reported (TF1's debugging aid; no control flow allowed)."""
    chain = []
    graph = default_graph.get()
    for op in graph.get_operations():
        for output in op.outputs:
            if output.dtype.base_dtype not in (dtypes.float16, dtypes.float32, dtypes.float64):
                continue
            if op._control_flow_context is not None:
                raise ValueError(
                    "`tf.add_check_numerics_ops() is not compatible with TensorFlow control flow "
                    "operations such as `tf.cond()` or `tf.while_loop()`."
                )
            with control_dependencies(chain):
                chain = [logging.check_numerics(output, f"{op.name}:{output.value_index}")]
    return array.group(*chain)

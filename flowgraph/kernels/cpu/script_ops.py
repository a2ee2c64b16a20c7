"""CPU kernel of PyFunc and PyFuncStateless: call a registered Python callable on NumPy values.

The callable is looked up by the node's `token` in `flowgraph.core.py_funcs` each time the node
runs (so this module needs nothing of the client side). Inputs reach it as NumPy arrays it may
modify (copies, since tensors are shared and read-only), and scalars as NumPy scalars (a string
scalar as `bytes`), as in TF.

Results are converted as TF's FuncRegistry converts them (`np.asarray`, text to bytes) and must
then have exactly the declared `Tout` dtype: nothing is cast, as in TF. A Python float is a
float64 and a Python int an int64, so a callable declared `tf.float32` returns
`np.float32(...)` or `.astype(np.float32)`; a mismatch is an InvalidArgumentError naming the
value's index, the callable's token and both dtypes.

Exceptions raised by the callable (but KeyboardInterrupt and SystemExit, which pass through)
become TF's classes (TF's py_func.cc): ValueError and
TypeError -> InvalidArgumentError, StopIteration -> OutOfRangeError, MemoryError ->
ResourceExhaustedError, NotImplementedError -> UnimplementedError, an OpError keeps its class,
anything else -> UnknownError; the message carries the Python traceback.
"""

from __future__ import annotations

import traceback

import numpy as np

from flowgraph.core import dtypes, errors, py_funcs
from flowgraph.kernels.base import register_kernel

_EXCEPTION_CLASSES = (
    ((ValueError, TypeError), errors.InvalidArgumentError),
    ((StopIteration,), errors.OutOfRangeError),
    ((MemoryError,), errors.ResourceExhaustedError),
    ((NotImplementedError,), errors.UnimplementedError),
)


def _argument(x):
    """What the callable receives for one input tensor."""
    x = np.asarray(x)
    if x.ndim == 0:
        return x[()]  # a NumPy scalar, or the bytes object of a string scalar
    return np.array(x, copy=True)


def _as_bytes(v):
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    raise TypeError(f"{type(v).__name__} is not a string")


_AS_BYTES = np.frompyfunc(_as_bytes, 1, 1)


def _mismatch(index: int, token: str, got: str, want: dtypes.DType) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        None, None, f"{index}-th value returned by {token} is {got}, but expects {want.name}"
    )


def _to_string_tensor(value, index, token, want):
    arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
    if arr.dtype.kind not in "SUO":
        raise _mismatch(index, token, dtypes.as_dtype(arr.dtype).name, want)
    try:
        return np.asarray(_AS_BYTES(arr), dtype=object)
    except TypeError as e:
        raise _mismatch(index, token, f"an array holding non-strings ({e})", want) from None


def _dtype_name(dtype: np.dtype) -> str:
    try:
        return dtypes.as_dtype(dtype).name
    except (TypeError, ValueError, KeyError):
        return str(dtype)


def _to_tensor(value, index: int, token: str, want: dtypes.DType) -> np.ndarray:
    """`value` returned by the callable as an array, which must be of dtype `want` (see the
    module docstring)."""
    if want == dtypes.string:
        return _to_string_tensor(value, index, token, want)
    try:
        arr = np.asarray(value)
    except ValueError as e:  # ragged nested lists
        raise _mismatch(index, token, f"not a rectangular array ({e})", want) from None
    if arr.dtype != np.dtype(want.as_numpy_dtype):
        got = "string" if arr.dtype.kind in "SU" else _dtype_name(arr.dtype)
        raise _mismatch(index, token, got, want)
    return arr


def _call(token: str, args: list):
    try:
        func = py_funcs.lookup(token)
    except KeyError as e:
        raise errors.InvalidArgumentError(None, None, e.args[0]) from None
    try:
        return func(*args)
    except (errors.OpError, KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        cls = next(
            (c for kinds, c in _EXCEPTION_CLASSES if isinstance(e, kinds)), errors.UnknownError
        )
        trace = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        raise cls(None, None, f"{type(e).__name__}: {e}\n{trace}") from e


@register_kernel("PyFunc")
@register_kernel("PyFuncStateless")
def py_func(ctx, *inputs):
    token = ctx.attrs["token"]
    tout = [dtypes.as_dtype(t) for t in ctx.attrs["Tout"]]
    result = _call(token, [_argument(x) for x in inputs])
    if not tout and result is None:
        return None
    if isinstance(result, bytes):
        result = [result]  # TF: a bytes result is one string value, not a sequence
    values = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(values) != len(tout):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"{token} returns {len(values)} values, but expects to see {len(tout)} values.",
        )
    outputs = tuple(_to_tensor(v, i, token, t) for i, (v, t) in enumerate(zip(values, tout)))
    return outputs if outputs else None

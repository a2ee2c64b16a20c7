"""Conversions TF1 performs implicitly: a (nested) list holding Tensors becomes a Pack op
(autopacking: `tf.reshape(x, [n, -1])` with `n` a Tensor), a list of known Dimensions a constant,
and a fully defined TensorShape or Dimension its int32 (or int64) value. Registered with
convert_to_tensor when flowgraph.ops.array is imported.
"""

from __future__ import annotations

import builtins

from flowgraph.core import dtypes
from flowgraph.core.shapes import Dimension, TensorShape
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import (
    constant,
    convert_to_tensor,
    register_tensor_conversion_function,
)
from flowgraph.framework.operation import Tensor


def contains_tensor(value) -> bool:
    if isinstance(value, Tensor) or hasattr(value, "_as_graph_element"):
        return True
    if isinstance(value, (list, builtins.tuple)):
        return any(contains_tensor(v) for v in value)
    return False


def _autopack(value, dtype=None, name=None, as_ref=False):
    """Converts a (nested) list holding Tensors into Pack ops, as TF1 does for [t, 3]; a list
    holding known Dimensions (`[x.shape[0], -1]`) becomes a constant of their values."""
    if as_ref:
        return NotImplemented
    if not contains_tensor(value):
        if not _contains_dimension(value):
            return NotImplemented
        return constant(_dimension_values(value), dtype=dtype, name=name or "Const")
    if dtype is None:
        dtype = _first_dtype(value)
    items = [
        _autopack(v, dtype) if isinstance(v, (list, builtins.tuple)) and contains_tensor(v) else v
        for v in value
    ]
    items = [convert_to_tensor(v, dtype=dtype) for v in items]
    return apply_op("Pack", [items], name=name or "packed", axis=0).outputs[0]


def _first_dtype(value):
    for v in value:
        if isinstance(v, (list, builtins.tuple)) and contains_tensor(v):
            return _first_dtype(v)
        if contains_tensor(v) and not isinstance(v, (list, builtins.tuple)):
            return v.dtype.base_dtype
    return None


def _contains_dimension(value) -> bool:
    if isinstance(value, Dimension):
        return True
    return isinstance(value, (list, builtins.tuple)) and any(_contains_dimension(v) for v in value)


def _dimension_values(value):
    if isinstance(value, (list, builtins.tuple)):
        return [_dimension_values(v) for v in value]
    if isinstance(value, Dimension):
        if value.value is None:
            raise ValueError("Cannot convert an unknown Dimension to a Tensor: ?")
        return value.value
    return value


def _shape_dtype(dims, dtype):
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype)
        if dtype not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"Cannot convert a TensorShape to dtype: {dtype.name}")
        return dtype
    return dtypes.int64 if any(d >= 2**31 for d in dims) else dtypes.int32


def _shape_to_tensor(value, dtype=None, name=None, as_ref=False):
    """A fully defined TensorShape converts to its 1-D int32 (or int64) value, as in TF1."""
    if not value.is_fully_defined():
        raise ValueError(f"Cannot convert a partially known TensorShape to a Tensor: {value}")
    dims = value.as_list()
    return constant(dims, dtype=_shape_dtype(dims, dtype), name=name or "shape_as_tensor")


def _dimension_to_tensor(value, dtype=None, name=None, as_ref=False):
    if value.value is None:
        raise ValueError("Cannot convert an unknown Dimension to a Tensor: ?")
    return constant(
        value.value, dtype=_shape_dtype([value.value], dtype), name=name or "shape_as_tensor"
    )


register_tensor_conversion_function((list, builtins.tuple), _autopack, priority=99)
register_tensor_conversion_function(TensorShape, _shape_to_tensor, priority=99)
register_tensor_conversion_function(Dimension, _dimension_to_tensor, priority=99)

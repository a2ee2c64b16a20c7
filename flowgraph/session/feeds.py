"""Feeds of Session.run and callables: which Tensor a feed_dict key names, and the feed value as
an array of that Tensor's dtype and shape, with TensorFlow's errors (TypeError for a value the
dtype cannot hold, InvalidArgumentError for a malformed one, ValueError for an unfeedable key).
"""

from __future__ import annotations

import collections.abc

import numpy as np

from flowgraph.core import dtypes, errors, ieee
from flowgraph.framework import nest, sparse_tensor
from flowgraph.framework.operation import Operation, Tensor


def flatten_feeds(feed_dict):
    """(key, value) pairs with structured keys flattened against their values (TF's
    nest.flatten_dict_items): a tuple or namedtuple key pairs its leaves with the value's."""
    if not isinstance(feed_dict, collections.abc.Mapping):
        raise TypeError(f"feed_dict must be a dictionary, got {type(feed_dict).__name__}")
    for key, value in feed_dict.items():
        if not nest.is_sequence(key):
            yield key, value
            continue
        keys, values = nest.flatten(key), nest.flatten(value)
        if len(keys) != len(values):
            raise ValueError(
                f"Could not flatten dictionary. Key had {len(keys)} elements, but value had "
                f"{len(values)} elements. Key: {keys}, value: {values}."
            )
        yield from zip(keys, values)


def expand_sparse_feeds(items):
    """(key, value) pairs with each SparseTensor key replaced by its three component feeds."""
    for key, value in items:
        if isinstance(key, sparse_tensor.SparseTensor):
            yield from sparse_tensor.expand_feed(key, value)
        else:
            yield key, value


def feed_tensor(graph, key) -> Tensor:
    """The feedable Tensor of `graph` that a feed_dict key names (a Tensor, a name, or an object
    with `_as_graph_element`, like a Variable)."""
    if hasattr(key, "_as_graph_element") and not isinstance(key, (Tensor, Operation)):
        key = key._as_graph_element()
    try:
        t = graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
    except (KeyError, ValueError, TypeError) as e:
        raise TypeError(f"Cannot interpret feed_dict key as Tensor: {e}") from None
    if not graph.is_feedable(t):
        raise ValueError(f"Tensor {t.name} may not be fed.")
    return t


def feed_array(t: Tensor, value):
    """`value` as an array of `t`'s dtype, with TF's errors: TypeError for a value NumPy cannot
    convert (an object, a dict) or a Python int the dtype cannot hold, InvalidArgumentError (a
    ValueError) for a malformed one. Casts are silent (NaN into an int), as TF's are."""
    if isinstance(value, (Tensor, Operation)):
        raise TypeError(
            "The value of a feed cannot be a tf.Tensor object. Acceptable feed values include "
            f"Python scalars, strings, lists, numpy ndarrays, or TensorHandles. (feed for {t.name})"
        )
    dtype = t.dtype.base_dtype
    np_type = dtype.as_numpy_dtype
    if type(value) is np.ndarray and value.dtype.type is np_type and np_type is not object:
        _check_shape(t, value)  # the common case: an array of the dtype, copied as it is
        return np.array(value)
    token = ieee.ignore()
    try:
        arr = _as_feed_dtype(value, dtype)
    except (TypeError, OverflowError) as e:
        hint = (
            " Try a larger type for the feed tensor (e.g. int64)."
            if isinstance(e, OverflowError)
            else ""
        )
        raise TypeError(
            f"Cannot feed value {_short(value)} of type {type(value).__name__} for Tensor "
            f"'{t.name}' of dtype {dtype.name}: {e}.{hint}"
        ) from None
    except ValueError as e:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Cannot feed value {_short(value)} for Tensor '{t.name}' of dtype {dtype.name}: {e}",
        ) from None
    finally:
        ieee.restore(token)
    python_int = isinstance(value, int) and not isinstance(value, bool)
    if python_int and arr.dtype.kind in "iuf" and arr.item() != value:
        raise TypeError(
            f"Type of feed value {value} with type {type(value)} is not compatible with "
            f"Tensor type {dtype.name} (feed for Tensor '{t.name}'). Try explicitly setting "
            f"the type of the feed tensor to a larger type (e.g. int64)."
        )
    _check_shape(t, arr)
    return arr


def _check_shape(t: Tensor, arr: np.ndarray) -> None:
    dims = t.shape.as_tuple()
    if dims is None:
        return
    shape = arr.shape
    if len(dims) == len(shape):
        for d, n in zip(dims, shape):
            if d is not None and d != n:
                break
        else:
            return
    raise errors.InvalidArgumentError(
        None,
        None,
        f"Cannot feed value of shape {arr.shape!r} for Tensor '{t.name}', which has shape "
        f"'{t.shape}'",
    )


def _as_feed_dtype(value, dtype):
    if dtype == dtypes.string:
        arr = np.asarray(value, dtype=object)
        if arr.ndim == 0:
            return np.asarray(value.encode() if isinstance(value, str) else value, dtype=object)
        return np.vectorize(lambda v: v.encode() if isinstance(v, str) else v, otypes=[object])(arr)
    if isinstance(value, int) and not isinstance(value, bool) and dtype.is_integer:
        # NumPy raises OverflowError for a Python int out of range: TF's TypeError follows.
        return np.asarray(value if _fits(value, dtype) else 0, dtype=dtype.as_numpy_dtype)
    if isinstance(value, np.ndarray):  # a copy: the caller may change its array later
        return np.array(value, dtype=dtype.as_numpy_dtype)
    return np.asarray(value, dtype=dtype.as_numpy_dtype)


def _fits(value: int, dtype) -> bool:
    info = np.iinfo(dtype.as_numpy_dtype)
    return info.min <= value <= info.max


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."

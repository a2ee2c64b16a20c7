"""IndexedSlices: a sparse gradient, rows `values` of a dense tensor at positions `indices`
(whitepaper §4.1; TF1's tf.IndexedSlices).

The gradient of a gather touches only the gathered rows of a (possibly huge) embedding matrix,
so it is kept as (values, indices, dense_shape) instead of a dense tensor of zeros. It is
densified only when a consumer needs a Tensor: `convert_to_tensor(slices)` builds
UnsortedSegmentSum(values, indices, dense_shape[0]), which also sums repeated indices.
"""

from __future__ import annotations

import collections

import numpy as np

from flowgraph.core import dtypes
from flowgraph.framework import convert
from flowgraph.framework.operation import Tensor


class IndexedSlices:
    """The rows `values[i]` of a dense tensor of shape `dense_shape` at row `indices[i]`.

    Example: g = IndexedSlices(values, indices, dense_shape); dense = tf.convert_to_tensor(g)
    """

    def __init__(self, values: Tensor, indices: Tensor, dense_shape: Tensor | None = None):
        self._values = values
        self._indices = indices
        self._dense_shape = dense_shape

    @property
    def values(self) -> Tensor:
        return self._values

    @property
    def indices(self) -> Tensor:
        return self._indices

    @property
    def dense_shape(self) -> Tensor | None:
        return self._dense_shape

    @property
    def name(self) -> str:
        return self._values.name

    @property
    def device(self) -> str:
        return self._values.device

    @property
    def op(self):
        return self._values.op

    @property
    def dtype(self) -> dtypes.DType:
        return self._values.dtype

    @property
    def graph(self):
        return self._values.graph

    @property
    def shape(self):
        """The static dense shape: from `dense_shape` if constant, else rows unknown."""
        from flowgraph.core.shapes import TensorShape

        if self._dense_shape is not None:
            known = convert.constant_value_as_shape(self._dense_shape)
            return known.merge_with(TensorShape([None]).concatenate(self._values.shape[1:]))
        return TensorShape([None]).concatenate(self._values.shape[1:])

    def get_shape(self):
        return self.shape

    def consumers(self) -> list:
        return self._values.consumers() + self._indices.consumers()

    def __neg__(self) -> IndexedSlices:
        from flowgraph.gradients.util import build

        return IndexedSlices(build("Neg", self._values), self._indices, self._dense_shape)

    def __repr__(self):
        shape = "" if self._dense_shape is None else f", dense_shape={self._dense_shape}"
        return f"IndexedSlices(indices={self._indices}, values={self._values}{shape})"


def _to_dense(value: IndexedSlices, dtype=None, name=None, as_ref=False) -> Tensor:
    """Densifies `value` with UnsortedSegmentSum (TF's conversion of IndexedSlices)."""
    from flowgraph.gradients.util import build, slice_first

    if dtype is not None and not dtypes.as_dtype(dtype).is_compatible_with(value.dtype):
        raise ValueError(
            f"Tensor conversion requested dtype {dtypes.as_dtype(dtype).name} for IndexedSlices "
            f"with dtype {value.dtype.name}"
        )
    if as_ref:
        raise ValueError(f"Cannot convert IndexedSlices {value!r} to a reference tensor")
    if value.dense_shape is None:
        raise ValueError(
            f"Tensor conversion requested for IndexedSlices without dense_shape: {value!r}"
        )
    known = convert.constant_value(value.dense_shape)
    if known is not None:
        rows = np.asarray(known).reshape(-1)[0]
        num_segments = convert.constant(rows, dtype=value.dense_shape.dtype, graph=value.graph)
    else:
        num_segments = slice_first(value.dense_shape)
    return build("UnsortedSegmentSum", value.values, value.indices, num_segments, name=name)


convert.register_tensor_conversion_function(IndexedSlices, _to_dense)


class IndexedSlicesValue(
    collections.namedtuple("IndexedSlicesValue", ["values", "indices", "dense_shape"])
):
    """What Session.run returns for a fetched IndexedSlices (TF1's tf.IndexedSlicesValue)."""

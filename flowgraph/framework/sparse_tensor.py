"""SparseTensor: a tensor stored as the coordinates and values of its non-zero entries
(TF1's tf.SparseTensor, tf.SparseTensorValue).

A SparseTensor is not a graph value of its own: it is three ordinary Tensors that travel
together through the dataflow graph (whitepaper §2), `indices` (int64 [N, rank], one row per
entry, normally in row-major order), `values` ([N]) and `dense_shape` (int64 [rank]). Sparse ops
take and return the three; Session.run fetches a SparseTensor as a SparseTensorValue and feeds
one from a SparseTensorValue or an (indices, values, dense_shape) triple, component by
component (`expand_feed`, `fetch_parts`).
"""

from __future__ import annotations

import collections

import numpy as np

from flowgraph.core import dtypes, shapes
from flowgraph.framework import convert
from flowgraph.framework.operation import Tensor
from flowgraph.framework.scopes import name_scope

__all__ = [
    "SparseTensor",
    "SparseTensorValue",
    "convert_to_tensor_or_sparse_tensor",
    "is_sparse",
]


class SparseTensorValue(
    collections.namedtuple("SparseTensorValue", ["indices", "values", "dense_shape"])
):
    """The value of a SparseTensor: what Session.run returns for one and accepts as its feed."""


class SparseTensor:
    """A sparse tensor: `values[i]` sits at `indices[i]` of a dense tensor of `dense_shape`.

    Example:
      st = tf.SparseTensor(indices=[[0, 0], [1, 2]], values=[1., 2.], dense_shape=[3, 4])
      sess.run(tf.sparse.to_dense(st))   # [[1,0,0,0],[0,0,2,0],[0,0,0,0]]
    """

    @classmethod
    def from_value(cls, sparse_tensor_value) -> SparseTensor:
        """A SparseTensor of constants holding `sparse_tensor_value` (a SparseTensorValue)."""
        if not is_sparse(sparse_tensor_value):
            raise TypeError(f"Neither a SparseTensor nor SparseTensorValue: {sparse_tensor_value}.")
        return cls(
            sparse_tensor_value.indices,
            sparse_tensor_value.values,
            sparse_tensor_value.dense_shape,
        )

    def __init__(self, indices, values, dense_shape):
        with name_scope(None, "SparseTensor", [indices, values, dense_shape]):
            indices = convert.convert_to_tensor(indices, name="indices", dtype=dtypes.int64)
            values = convert.convert_to_tensor(values, name="values")
            dense_shape = convert.convert_to_tensor(
                dense_shape, name="dense_shape", dtype=dtypes.int64
            )
        indices.shape.with_rank(2)
        values.shape.with_rank(1)
        dense_shape.shape.with_rank(1)
        # The entry counts of indices and values, and the rank, must agree where known.
        indices.shape[0].merge_with(values.shape[0])
        indices.shape[1].merge_with(dense_shape.shape[0])
        self._indices = indices
        self._values = values
        self._dense_shape = dense_shape
        self._dense_shape_default = None  # sparse_placeholder's partially known shape

    @property
    def indices(self) -> Tensor:
        """int64 [N, rank]: the coordinates of the entries."""
        return self._indices

    @property
    def values(self) -> Tensor:
        """[N]: the entries' values."""
        return self._values

    @property
    def dense_shape(self) -> Tensor:
        """int64 [rank]: the shape of the dense tensor this represents."""
        return self._dense_shape

    @property
    def dtype(self) -> dtypes.DType:
        return self._values.dtype

    @property
    def op(self):
        """The op producing `values` (TF's convention)."""
        return self._values.op

    @property
    def graph(self):
        return self._indices.graph

    @property
    def shape(self) -> shapes.TensorShape:
        """The static dense shape, as far as it is known at graph-construction time."""
        if self._dense_shape_default is not None:
            return self._dense_shape_default
        known = convert.constant_value_as_shape(self._dense_shape)
        rank = self._indices.shape[1].value
        return known if rank is None else known.merge_with(shapes.unknown_shape(rank))

    def get_shape(self) -> shapes.TensorShape:
        return self.shape

    def consumers(self) -> list:
        seen = []
        for t in (self._indices, self._values, self._dense_shape):
            seen.extend(op for op in t.consumers() if op not in seen)
        return seen

    def eval(self, feed_dict=None, session=None) -> SparseTensorValue:
        """Runs this SparseTensor in `session` (default: the default session)."""
        from flowgraph.session import default_session

        session = session or default_session.get()
        if session is None:
            raise ValueError("Cannot evaluate a SparseTensor: no default session is registered.")
        return session.run(self, feed_dict)

    def __repr__(self):
        return (
            f"SparseTensor(indices={self._indices}, values={self._values}, "
            f"dense_shape={self._dense_shape})"
        )

    __str__ = __repr__


def is_sparse(x) -> bool:
    """True for a SparseTensor or a SparseTensorValue."""
    return isinstance(x, (SparseTensor, SparseTensorValue))


def sparse_input(value, name: str = "sp_input") -> SparseTensor:
    """The SparseTensor argument `name` of a sparse op (a SparseTensorValue becomes constants);
    anything else is a TypeError naming the argument."""
    value = convert_to_tensor_or_sparse_tensor(value)
    if not isinstance(value, SparseTensor):
        raise TypeError(f"Input {name} must be a SparseTensor, got {type(value).__name__}.")
    return value


def convert_to_tensor_or_sparse_tensor(value, dtype=None, name=None):
    """`value` as a SparseTensor if it is sparse (a SparseTensorValue becomes constants), else
    as a Tensor."""
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype)
    if isinstance(value, SparseTensorValue):
        value = SparseTensor.from_value(value)
    if isinstance(value, SparseTensor):
        if dtype and not dtype.is_compatible_with(value.dtype):
            raise RuntimeError(
                f"Sparse dtype: requested = {dtype.name}, actual = {value.dtype.name}"
            )
        return value
    return convert.convert_to_tensor(value, dtype=dtype, name=name)


def _to_dense_refused(value, dtype=None, name=None, as_ref=False):
    raise TypeError(
        f"Failed to convert SparseTensor to Tensor: {value!r}. Use tf.sparse.to_dense to make it "
        "dense, or an op of tf.sparse that takes it as it is."
    )


convert.register_tensor_conversion_function(SparseTensor, _to_dense_refused)


# -- Session.run support ------------------------------------------------------------------------
def fetch_parts(value: SparseTensor) -> tuple[Tensor, Tensor, Tensor]:
    """The tensors Session.run fetches for `value`; `SparseTensorValue(*results)` rebuilds it."""
    return value.indices, value.values, value.dense_shape


def expand_feed(key: SparseTensor, value) -> list[tuple[Tensor, object]]:
    """(tensor, value) pairs feeding a SparseTensor key from a SparseTensorValue or a triple."""
    if isinstance(value, SparseTensor):
        raise TypeError(
            "The value of a feed cannot be a tf.SparseTensor object; feed a SparseTensorValue."
        )
    if not (isinstance(value, (tuple, list)) and len(value) == 3):
        raise TypeError(
            f"The value fed for SparseTensor {key!r} must be a SparseTensorValue or a tuple "
            f"(indices, values, dense_shape), got {type(value).__name__}."
        )
    indices, values, dense_shape = value
    indices = np.asarray(indices, np.int64)
    if indices.size == 0:
        indices = indices.reshape(0, np.size(dense_shape))
    return [(key.indices, indices), (key.values, values), (key.dense_shape, dense_shape)]

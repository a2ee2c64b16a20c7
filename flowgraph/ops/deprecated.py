"""Deprecated tf.* names that TF 1.15 still exports and older TF1 programs still call.

Each is the function it was renamed to, with the old signature; none has behaviour of its own.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework.scopes import name_scope
from flowgraph.ops import linalg, math, reduction, variable_scope

__all__ = [
    "arg_max",
    "arg_min",
    "floor_div",
    "op_scope",
    "sparse_matmul",
    "to_bfloat16",
    "variable_op_scope",
]


def arg_max(input, dimension, output_type=dtypes.int64, name=None):
    """tf.argmax's old name: the index of the largest value along `dimension`."""
    return reduction.argmax(input, axis=dimension, name=name, output_type=output_type)


def arg_min(input, dimension, output_type=dtypes.int64, name=None):
    """tf.argmin's old name: the index of the smallest value along `dimension`."""
    return reduction.argmin(input, axis=dimension, name=name, output_type=output_type)


def to_bfloat16(x, name="ToBFloat16"):
    """tf.cast(x, tf.bfloat16)."""
    return math.cast(x, dtypes.bfloat16, name=name)


def floor_div(x, y, name=None):
    """The FloorDiv op (tf.floordiv without its name scope)."""
    return math.floordiv(x, y, name=name)


def sparse_matmul(
    a, b, transpose_a=False, transpose_b=False, a_is_sparse=False, b_is_sparse=False, name=None
):
    """a @ b for float matrices; the sparsity hints choose no other algorithm (BLAS either way)."""
    return linalg.matmul(
        a,
        b,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
        a_is_sparse=a_is_sparse,
        b_is_sparse=b_is_sparse,
        name=name,
    )


def op_scope(values, name, default_name=None):
    """tf.name_scope with TF 0.x's argument order (values first)."""
    return name_scope(name, default_name, values)


def variable_op_scope(values, name_or_scope, default_name=None, **kwargs):
    """tf.variable_scope with TF 0.x's argument order (values first); the other keyword
    arguments (initializer, reuse, ...) are variable_scope's."""
    return variable_scope.variable_scope(name_or_scope, default_name, values=values, **kwargs)

"""tf.debugging.assert_shapes (TF 1.15's check_ops.assert_shapes): shapes of several tensors
against symbolic shapes, with named dimensions shared between tensors.

Each constraint is `(tensor, shape)`: an entry of `shape` that parses as an int is an explicit
size, None or '.' is any size, any other hashable (usually a letter) names a size that must be
the same wherever it appears; a leading `...` or '*' leaves the outer dimensions free. A scalar
and an empty shape both count as one dimension of size one. What is known at construction is
checked then (ValueError); the rest becomes Asserts that run with the step.

Example:
    tf.debugging.assert_shapes([(x, ("N", "Q")), (y, ("N", "D")), (b, ("Q",))])
"""

from __future__ import annotations

import collections

from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.scopes import control_dependencies, name_scope
from flowgraph.ops import array, logging
from flowgraph.ops import math as math_ops
from flowgraph.ops.check_ops import assert_rank, assert_rank_at_least, assert_rank_in
from flowgraph.ops.control_flow import cond

__all__ = ["assert_shapes"]

# One constraint: the tensor, whether outer dims are free, its sizes (int where static, else a
# scalar tensor) and the symbols its shape was given.
_Sizes = collections.namedtuple("_Sizes", ["x", "unspecified_dim", "actual", "symbols"])


def _dimension_sizes(x):
    """Static sizes as ints, unknown ones as tensors; a scalar is [1]."""
    rank = x.shape.ndims
    if rank == 0:
        return (1,)
    dynamic = array.shape(x)
    if rank is not None:
        return [d if d is not None else dynamic[i] for i, d in enumerate(x.shape.as_list())]
    is_scalar = math_ops.equal(array.rank(x), 0)
    return cond(is_scalar, lambda: array.constant([1]), lambda: dynamic)


def _known(size) -> bool:
    try:
        int(size)
    except (TypeError, ValueError):
        return False
    return size is not None


def _constraints(shapes, message):
    """The (tensor, symbolic shape) pairs as _Sizes, checking where `...` may appear."""
    result = []
    for x, symbolic in shapes:
        if symbolic is None:
            continue
        x = convert_to_tensor(x)
        if not (hasattr(symbolic, "__iter__") or hasattr(symbolic, "__getitem__")):
            raise ValueError(
                f"{message}.  Tensor {x.name}.  Specified shape must be an iterable.  An "
                f"iterable has the attribute `__iter__` or `__getitem__`.  Received specified "
                f"shape: {symbolic}"
            )
        symbols = tuple(symbolic)
        for i, symbol in enumerate(symbols):
            if (symbol is Ellipsis or symbol == "*") and i != 0:
                raise ValueError(
                    f"{message}.  Tensor {x.name} specified shape index {i}.  Symbol `...` or "
                    "`*` for a variable number of unspecified dimensions is only allowed as the "
                    "first entry"
                )
        free = bool(symbols) and (symbols[0] is Ellipsis or symbols[0] == "*")
        symbols = symbols[1:] if free else symbols
        result.append(_Sizes(x, free, _dimension_sizes(x), symbols or (1,)))
    return result


def _rank_checks(constraints, data, summarize, message, name):
    checks = []
    for c in constraints:
        rank = len(c.symbols)
        kwargs = {"data": data, "summarize": summarize, "message": message, "name": name}
        if c.unspecified_dim:
            if rank > 1:
                checks.append(assert_rank_at_least(c.x, rank, **kwargs))
        elif rank in (0, 1):
            checks.append(assert_rank_in(c.x, [0, 1], **kwargs))
        else:
            checks.append(assert_rank(c.x, rank, **kwargs))
    return checks


def assert_shapes(shapes, data=None, summarize=None, message=None, name=None):
    """Asserts that tensors have the given symbolic shapes (see the module docstring).

    Returns an op to run (a group of Asserts, a no-op when everything was checked statically);
    raises ValueError when a constraint already fails at construction.
    """
    if isinstance(shapes, dict):
        shapes = shapes.items()
    message = message or ""
    with name_scope(name, "assert_shapes"):
        constraints = _constraints(list(shapes), message)
        rank_checks = _rank_checks(constraints, data, summarize, message, name)
        size_checks, specified = [], {}
        for c in constraints:
            for i, symbol in enumerate(c.symbols):
                if symbol is None or symbol == ".":
                    continue
                dim = i - len(c.symbols) if c.unspecified_dim else i
                if not (_known(symbol) or symbol in specified):
                    with control_dependencies(rank_checks):
                        specified[symbol] = (c.actual[dim], c.x, dim)
                    continue
                if _known(symbol):
                    size, how = int(symbol), "Specified explicitly"
                else:
                    size, by, at = specified[symbol]
                    how = f"Specified by tensor {by.name} dimension {at}"
                with control_dependencies(rank_checks):
                    actual = c.actual[dim]
                if _known(actual) and _known(size):
                    if int(actual) != int(size):
                        raise ValueError(
                            f"{message}.  {how}.  Tensor {c.x.name} dimension {dim} must have "
                            f"size {int(size)}.  Received size {int(actual)}, shape {c.x.shape}"
                        )
                    continue
                condition = math_ops.equal(convert_to_tensor(actual), convert_to_tensor(size))
                shown = data
                if data is None:
                    shown = [message, how, f"Tensor {c.x.name} dimension", dim, "must have size"]
                    shown += [size, "Received shape: ", array.shape(c.x)]
                size_checks.append(logging.Assert(condition, shown, summarize=summarize))
        with control_dependencies(rank_checks):
            return array.group(*size_checks)

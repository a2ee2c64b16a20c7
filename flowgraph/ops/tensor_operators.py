"""Tensor's Python operators (TF1's math_ops._OverrideBinaryOperatorHelper): `x + 1`,
`a @ b`, `x < y`, `-x`, ... build the same ops, with the same names, as the wrappers they call.

They are installed on Tensor when the ops package is imported (ops/__init__.py), so that every
Tensor has them whichever op module a program imports first; `framework/` defines Tensor but
cannot import the ops.
"""

from __future__ import annotations

from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.operation import Tensor
from flowgraph.ops.linalg import matmul
from flowgraph.ops.math import (
    abs,
    add,
    div,
    floordiv,
    floormod,
    greater,
    greater_equal,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    multiply,
    name_scope,
    negative,
    pow,
    subtract,
    truediv,
)


def _binary_overloads(fn, op_name: str):
    """`x <op> y` and `y <op> x` for a Tensor x: the other operand is converted with x's dtype
    (as a hint going forward, strictly in reverse, like TF1), inside a scope named `op_name`,
    so `x + 1` builds add/y (Const) and add (AddV2)."""

    def forward(x, y):
        with name_scope(None, op_name, [x, y]) as scope:
            if not isinstance(y, Tensor):
                try:
                    y = convert_to_tensor(y, preferred_dtype=x.dtype.base_dtype, name="y")
                except TypeError:
                    if hasattr(type(y), f"__r{op_name}__"):
                        return NotImplemented
                    raise
            return fn(x, y, name=scope)

    def reverse(y, x):
        with name_scope(None, op_name, [x, y]) as scope:
            x = convert_to_tensor(x, dtype=y.dtype.base_dtype, name="x")
            return fn(x, y, name=scope)

    forward.__name__, reverse.__name__ = f"__{op_name}__", f"__r{op_name}__"
    return forward, reverse


_BINARY_OPERATORS = {  # dunder stem -> (wrapper, TF1's scope name)
    "add": (add, "add"),
    "sub": (subtract, "sub"),
    "mul": (multiply, "mul"),
    "truediv": (truediv, "truediv"),
    "div": (div, "div"),
    "floordiv": (floordiv, "floordiv"),
    "mod": (floormod, "mod"),
    "pow": (pow, "pow"),
    "matmul": (matmul, "matmul"),
    "and": (logical_and, "and"),
    "or": (logical_or, "or"),
    "xor": (logical_xor, "xor"),
}
for _stem, (_fn, _scope_name) in _BINARY_OPERATORS.items():
    _forward, _reverse = _binary_overloads(_fn, _scope_name)
    setattr(Tensor, f"__{_stem}__", _forward)
    setattr(Tensor, f"__r{_stem}__", _reverse)

# Comparisons and unary operators call the op directly, so the op keeps its default name
# ("Less", "Neg"); `==` stays identity, as in TF1, so tensors can be dict keys.
Tensor.__lt__ = lambda self, other: less(self, other)
Tensor.__le__ = lambda self, other: less_equal(self, other)
Tensor.__gt__ = lambda self, other: greater(self, other)
Tensor.__ge__ = lambda self, other: greater_equal(self, other)
Tensor.__neg__ = lambda self: negative(self)
Tensor.__abs__ = lambda self: abs(self)
Tensor.__invert__ = lambda self: logical_not(self)
Tensor.__array_priority__ = 100  # NumPy defers `ndarray + tensor` to Tensor.__radd__

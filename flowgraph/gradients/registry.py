"""The gradient registry: the third table keyed by op type (OpDefs, kernels, gradients).

A gradient function receives the forward Operation (its inputs and outputs) and one incoming
gradient per output (None for outputs that do not reach the loss... see gradients/impl.py), and
returns one gradient per input (None where an input gets none):

    @register_gradient("Mul")
    def _mul_grad(op, grad):
        x, y = op.inputs
        return grad * y, grad * x
"""

from __future__ import annotations

import traceback

from flowgraph.core import errors

_GRADIENTS: dict[str, object] = {}  # op type -> function, or None for "not differentiable"
_SITES: dict[str, str] = {}


def _site() -> str:
    """'file:line' of the innermost caller outside this module: where the user registered."""
    for frame in reversed(traceback.extract_stack()):
        if frame.filename != __file__:
            return f"{frame.filename}:{frame.lineno}"
    return "<unknown>"


def register_gradient(op_type: str):
    """Decorator: registers the gradient function of `op_type` (TF1's tf.RegisterGradient)."""
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a string")

    def decorate(fn):
        if op_type in _GRADIENTS:
            raise errors.AlreadyExistsError(
                None,
                None,
                f"gradient for '{op_type}' already registered at {_SITES[op_type]} (again at {_site()})",
            )
        _GRADIENTS[op_type] = fn
        _SITES[op_type] = _site()
        return fn

    return decorate


def not_differentiable(op_type: str):
    """Declares that `op_type` has no gradient (TF1's tf.NotDifferentiable / tf.NoGradient)."""
    if op_type in _GRADIENTS:
        raise errors.AlreadyExistsError(
            None, None, f"gradient for '{op_type}' already registered at {_SITES[op_type]}"
        )
    _GRADIENTS[op_type] = None
    _SITES[op_type] = _site()


def get_gradient_function(op_type: str):
    """The registered function; None if declared not differentiable; LookupError if unknown."""
    if op_type not in _GRADIENTS:
        raise LookupError(f"No gradient defined for operation type '{op_type}'")
    return _GRADIENTS[op_type]


class RegisterGradient:
    """TF1's class-style decorator: @tf.RegisterGradient("MyOp")."""

    def __init__(self, op_type: str):
        self._op_type = op_type

    def __call__(self, fn):
        return register_gradient(self._op_type)(fn)

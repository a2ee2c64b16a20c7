"""The gradient registry: the third table keyed by op type (OpDefs, kernels, gradients;
core/registry.py).

A gradient function receives the forward Operation (its inputs and outputs) and one incoming
gradient per output (None for outputs that do not reach the loss... see gradients/impl.py), and
returns one gradient per input (None where an input gets none):

    @register_gradient("Mul")
    def _mul_grad(op, grad):
        x, y = op.inputs
        return grad * y, grad * x
"""

from __future__ import annotations

from flowgraph.core import registry

# op type -> gradient function, or None for "not differentiable"
_GRADIENTS = registry.Registry("gradient", op_type_of=lambda op_type: op_type)
registry.machinery(__file__)


def register_gradient(op_type: str):
    """Decorator: registers the gradient function of `op_type` (TF1's tf.RegisterGradient);
    AlreadyExistsError naming both sites if `op_type` has one."""
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a string")

    def decorate(fn):
        _GRADIENTS.register(op_type, fn)
        return fn

    return decorate


def not_differentiable(op_type: str):
    """Declares that `op_type` has no gradient (TF1's tf.NotDifferentiable / tf.NoGradient)."""
    _GRADIENTS.register(op_type, None)


def get_gradient_function(op_type: str):
    """The registered function; None if declared not differentiable; LookupError if unknown."""
    if op_type not in _GRADIENTS:
        raise LookupError(f"No gradient defined for operation type '{op_type}'")
    return _GRADIENTS.get(op_type)


class RegisterGradient:
    """TF1's class-style decorator: @tf.RegisterGradient("MyOp")."""

    def __init__(self, op_type: str):
        self._op_type = op_type

    def __call__(self, fn):
        return register_gradient(self._op_type)(fn)

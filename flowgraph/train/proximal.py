"""Proximal optimizers (FOBOS: Duchi and Singer, 2009): a gradient step, then the proximal step
of the L1 and L2 penalties, which sets small weights exactly to zero (sparse models).

ProximalGradientDescentOptimizer steps by the learning rate, ProximalAdagradOptimizer by
Adagrad's per-coordinate rate lr / sqrt(accumulator). Each update is one fused op
(Apply/SparseApply/Resource forms of ApplyProximal*), as in TF 1.15.
"""

from __future__ import annotations

from flowgraph.framework.convert import convert_to_tensor
from flowgraph.train.optimizer import Optimizer
from flowgraph.train.optimizers import AdagradOptimizer

__all__ = ["ProximalAdagradOptimizer", "ProximalGradientDescentOptimizer"]


class _Proximal(Optimizer):
    """Shared: the learning rate and the two regularization strengths as tensors."""

    def __init__(self, learning_rate, l1, l2, use_locking, name):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._l1 = l1
        self._l2 = l2

    def _prepare(self):
        lr = self._call_if_callable(self._learning_rate)
        self._learning_rate_tensor = convert_to_tensor(lr, name="learning_rate")
        self._l1_tensor = convert_to_tensor(self._l1, name="l1_regularization_strength")
        self._l2_tensor = convert_to_tensor(self._l2, name="l2_regularization_strength")

    def _coefficients(self, var):
        return [
            self._cast(t, var)
            for t in (self._learning_rate_tensor, self._l1_tensor, self._l2_tensor)
        ]


class ProximalGradientDescentOptimizer(_Proximal):
    """var = prox(var - lr * grad): soft-thresholded by lr * l1 and shrunk by 1 + lr * l2.

    Example: tf.train.ProximalGradientDescentOptimizer(0.1, l1_regularization_strength=0.01)
    """

    def __init__(
        self,
        learning_rate,
        l1_regularization_strength=0.0,
        l2_regularization_strength=0.0,
        use_locking=False,
        name="ProximalGradientDescent",
    ):
        super().__init__(
            learning_rate, l1_regularization_strength, l2_regularization_strength, use_locking, name
        )

    def _apply_dense(self, grad, var):
        return self._fused("apply_proximal_gradient_descent", var, *self._coefficients(var), grad)

    def _apply_sparse(self, grad, var):
        return self._fused(
            "sparse_apply_proximal_gradient_descent",
            var,
            *self._coefficients(var),
            grad.values,
            grad.indices,
        )


class ProximalAdagradOptimizer(_Proximal):
    """Adagrad's rate lr / sqrt(accum) (accum += grad^2 first, from initial_accumulator_value)
    in the proximal step.

    Example: tf.train.ProximalAdagradOptimizer(0.1, l1_regularization_strength=0.001)
    """

    def __init__(
        self,
        learning_rate,
        initial_accumulator_value=0.1,
        l1_regularization_strength=0.0,
        l2_regularization_strength=0.0,
        use_locking=False,
        name="ProximalAdagrad",
    ):
        if initial_accumulator_value <= 0.0:
            raise ValueError(
                f"initial_accumulator_value must be positive: {initial_accumulator_value}"
            )
        super().__init__(
            learning_rate, l1_regularization_strength, l2_regularization_strength, use_locking, name
        )
        self._initial_accumulator_value = initial_accumulator_value

    # The accumulator slot is Adagrad's, made the same way (TF's ProximalAdagrad reuses it too).
    _create_slots = AdagradOptimizer._create_slots

    def _apply_dense(self, grad, var):
        acc = self.get_slot(var, "accumulator")
        return self._fused("apply_proximal_adagrad", var, acc, *self._coefficients(var), grad)

    def _apply_sparse(self, grad, var):
        acc = self.get_slot(var, "accumulator")
        return self._fused(
            "sparse_apply_proximal_adagrad",
            var,
            acc,
            *self._coefficients(var),
            grad.values,
            grad.indices,
        )

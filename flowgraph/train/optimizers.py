"""The first-order optimizers of TF1's tf.train: gradient descent, momentum, Adagrad, Adadelta and
RMSProp. Each builds its state in `_create_slots`, converts its hyper-parameters to tensors
named as TF names them in `_prepare` (`<name>/learning_rate`, ...), and updates a variable
with one fused op from training_ops.py; sparse gradients use the SparseApply* forms, and
resource variables the Resource* forms of the same ops (`Optimizer._fused`).
"""

from __future__ import annotations

from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import init_ops, variable_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops.resource_variables import is_resource_variable
from flowgraph.train.optimizer import Optimizer

__all__ = [
    "AdadeltaOptimizer",
    "AdagradOptimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "RMSPropOptimizer",
]


class GradientDescentOptimizer(Optimizer):
    """var -= learning_rate * grad (ApplyGradientDescent; ScatterSub for sparse gradients).

    Example: train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    """

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._learning_rate_tensor = None

    def _prepare(self):
        lr = self._call_if_callable(self._learning_rate)
        self._learning_rate_tensor = convert_to_tensor(lr, name="learning_rate")

    def _apply_dense(self, grad, var):
        lr = self._cast(self._learning_rate_tensor, var)
        return self._fused("apply_gradient_descent", var, lr, grad)

    def _apply_sparse_duplicate_indices(self, grad, var):
        # ScatterSub / ResourceScatterAdd accumulate repeated indices, so no de-duplication.
        lr = self._cast(self._learning_rate_tensor, var)
        delta = math_ops.multiply(grad.values, lr)
        if is_resource_variable(var):  # TF1: resource_scatter_add of -lr * grad
            negated = math_ops.negative(delta)
            return apply_op("ResourceScatterAdd", [var.handle, grad.indices, negated])
        return variable_ops.scatter_sub(var, grad.indices, delta, use_locking=self._use_locking).op


class MomentumOptimizer(Optimizer):
    """accum = momentum * accum + grad; var -= lr * accum (or the Nesterov form).

    Example: tf.train.MomentumOptimizer(0.2, momentum=0.9).minimize(loss, global_step)
    """

    def __init__(
        self, learning_rate, momentum, use_locking=False, name="Momentum", use_nesterov=False
    ):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self):
        self._learning_rate_tensor = convert_to_tensor(
            self._call_if_callable(self._learning_rate), name="learning_rate"
        )
        self._momentum_tensor = convert_to_tensor(
            self._call_if_callable(self._momentum), name="momentum"
        )

    def _args(self, var):
        return self._cast(self._learning_rate_tensor, var), self._cast(self._momentum_tensor, var)

    def _apply_dense(self, grad, var):
        lr, mom = self._args(var)
        return self._fused(
            "apply_momentum",
            var,
            self.get_slot(var, "momentum"),
            lr,
            grad,
            mom,
            use_nesterov=self._use_nesterov,
        )

    def _apply_sparse(self, grad, var):
        lr, mom = self._args(var)
        return self._fused(
            "sparse_apply_momentum",
            var,
            self.get_slot(var, "momentum"),
            lr,
            grad.values,
            grad.indices,
            mom,
            use_nesterov=self._use_nesterov,
        )


class AdagradOptimizer(Optimizer):
    """accum += grad^2; var -= lr * grad / sqrt(accum), with accum starting at a positive value.

    Example: tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.1).minimize(loss)
    """

    def __init__(
        self, learning_rate, initial_accumulator_value=0.1, use_locking=False, name="Adagrad"
    ):
        if initial_accumulator_value <= 0.0:
            raise ValueError(
                f"initial_accumulator_value must be positive: {initial_accumulator_value}"
            )
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value

    def _create_slots(self, var_list):
        for v in var_list:
            dtype = v.dtype.base_dtype
            if v.get_shape().is_fully_defined():
                init = init_ops.constant_initializer(self._initial_accumulator_value, dtype=dtype)
                self._get_or_make_slot_with_initializer(
                    v, init, v.get_shape(), dtype, "accumulator", self._name
                )
            else:
                value = array_ops.ones_like(v.initialized_value()) * self._initial_accumulator_value
                self._get_or_make_slot(v, value, "accumulator", self._name)

    def _prepare(self):
        self._learning_rate_tensor = convert_to_tensor(
            self._call_if_callable(self._learning_rate), name="learning_rate"
        )

    def _apply_dense(self, grad, var):
        lr = self._cast(self._learning_rate_tensor, var)
        acc = self.get_slot(var, "accumulator")
        return self._fused("apply_adagrad", var, acc, lr, grad)

    def _apply_sparse(self, grad, var):
        lr = self._cast(self._learning_rate_tensor, var)
        acc = self.get_slot(var, "accumulator")
        return self._fused("sparse_apply_adagrad", var, acc, lr, grad.values, grad.indices)


class AdadeltaOptimizer(Optimizer):
    """Adadelta: step sizes from running averages of squared gradients and squared updates.

    Example: tf.train.AdadeltaOptimizer(1.0, rho=0.95, epsilon=1e-6).minimize(loss)
    """

    def __init__(
        self, learning_rate=0.001, rho=0.95, epsilon=1e-8, use_locking=False, name="Adadelta"
    ):
        super().__init__(use_locking, name)
        self._lr, self._rho, self._epsilon = learning_rate, rho, epsilon

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "accum", self._name)
            self._zeros_slot(v, "accum_update", self._name)

    def _prepare(self):
        self._lr_t = convert_to_tensor(self._call_if_callable(self._lr), name="lr")
        self._rho_t = convert_to_tensor(self._call_if_callable(self._rho), name="rho")
        self._epsilon_t = convert_to_tensor(self._call_if_callable(self._epsilon), name="epsilon")

    def _args(self, var):
        return [self._cast(t, var) for t in (self._lr_t, self._rho_t, self._epsilon_t)]

    def _slots_of(self, var):
        return [self.get_slot(var, "accum"), self.get_slot(var, "accum_update")]

    def _apply_dense(self, grad, var):
        return self._fused("apply_adadelta", var, *self._slots_of(var), *self._args(var), grad)

    def _apply_sparse(self, grad, var):
        return self._fused(
            "sparse_apply_adadelta",
            var,
            *self._slots_of(var),
            *self._args(var),
            grad.values,
            grad.indices,
        )


class RMSPropOptimizer(Optimizer):
    """RMSProp: divides the gradient by a running root-mean-square (optionally centered).

    Example: tf.train.RMSPropOptimizer(0.01, decay=0.9, momentum=0.5).minimize(loss)
    """

    def __init__(
        self,
        learning_rate,
        decay=0.9,
        momentum=0.0,
        epsilon=1e-10,
        use_locking=False,
        centered=False,
        name="RMSProp",
    ):
        super().__init__(use_locking, name)
        self._learning_rate, self._decay, self._momentum = learning_rate, decay, momentum
        self._epsilon, self._centered = epsilon, centered

    def _create_slots(self, var_list):
        for v in var_list:
            dtype = v.dtype.base_dtype
            if v.get_shape().is_fully_defined():
                init = init_ops.ones_initializer(dtype=dtype)
                self._get_or_make_slot_with_initializer(
                    v, init, v.get_shape(), dtype, "rms", self._name
                )
            else:
                self._get_or_make_slot(
                    v, array_ops.ones_like(v.initialized_value()), "rms", self._name
                )
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self):
        call = self._call_if_callable
        self._learning_rate_tensor = convert_to_tensor(
            call(self._learning_rate), name="learning_rate"
        )
        self._decay_tensor = convert_to_tensor(call(self._decay), name="decay")
        self._momentum_tensor = convert_to_tensor(call(self._momentum), name="momentum")
        self._epsilon_tensor = convert_to_tensor(call(self._epsilon), name="epsilon")

    def _args(self, var):
        tensors = (
            self._learning_rate_tensor,
            self._decay_tensor,
            self._momentum_tensor,
            self._epsilon_tensor,
        )
        return [self._cast(t, var) for t in tensors]

    def _slots_of(self, var):
        names = ["mg", "rms", "momentum"] if self._centered else ["rms", "momentum"]
        return [self.get_slot(var, n) for n in names]

    def _op(self, sparse):
        base = "centered_rms_prop" if self._centered else "rms_prop"
        return ("sparse_apply_" if sparse else "apply_") + base

    def _apply_dense(self, grad, var):
        return self._fused(self._op(False), var, *self._slots_of(var), *self._args(var), grad)

    def _apply_sparse(self, grad, var):
        return self._fused(
            self._op(True), var, *self._slots_of(var), *self._args(var), grad.values, grad.indices
        )

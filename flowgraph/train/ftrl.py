"""FtrlOptimizer: FTRL-Proximal (McMahan et al., 2013) with L1, online L2 and shrinkage L2.

Slots per variable: the squared-gradient accumulator (starting at `initial_accumulator_value`)
and the linear term z, named `<var>/Ftrl` and `<var>/Ftrl_1` unless `accum_name` /
`linear_name` say otherwise. Without shrinkage the update is ApplyFtrl; with
`l2_shrinkage_regularization_strength > 0` it is ApplyFtrlV2, where the shrinkage enters only the
linear term (TF's "shrinkage-type L2").
"""

from __future__ import annotations

from flowgraph.framework.convert import constant, convert_to_tensor
from flowgraph.ops import math as math_ops
from flowgraph.train.optimizer import Optimizer

__all__ = ["FtrlOptimizer"]


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal, suited to wide sparse linear models.

    Example: tf.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01).minimize(loss)
    """

    def __init__(
        self,
        learning_rate,
        learning_rate_power=-0.5,
        initial_accumulator_value=0.1,
        l1_regularization_strength=0.0,
        l2_regularization_strength=0.0,
        use_locking=False,
        name="Ftrl",
        accum_name=None,
        linear_name=None,
        l2_shrinkage_regularization_strength=0.0,
        beta=None,
    ):
        super().__init__(use_locking, name)
        checks = (
            (initial_accumulator_value, "initial_accumulator_value", "positive or zero", 1),
            (learning_rate_power, "learning_rate_power", "negative or zero", -1),
            (l1_regularization_strength, "l1_regularization_strength", "positive or zero", 1),
            (l2_regularization_strength, "l2_regularization_strength", "positive or zero", 1),
            (
                l2_shrinkage_regularization_strength,
                "l2_shrinkage_regularization_strength",
                "positive or zero",
                1,
            ),
        )
        for value, what, needs, sign in checks:
            if value * sign < 0.0:
                raise ValueError(f"{what} {value:f} needs to be {needs}")
        self._learning_rate = learning_rate
        self._learning_rate_power = learning_rate_power
        self._initial_accumulator_value = initial_accumulator_value
        self._l1 = l1_regularization_strength
        self._l2 = l2_regularization_strength
        self._beta = 0.0 if beta is None else beta
        self._l2_shrinkage = l2_shrinkage_regularization_strength
        self._accum_name = accum_name
        self._linear_name = linear_name

    def _create_slots(self, var_list):
        for v in var_list:
            with v.op.graph.as_default():
                val = constant(
                    self._initial_accumulator_value,
                    dtype=v.dtype.base_dtype,
                    shape=v.get_shape().as_list(),
                )
            self._get_or_make_slot(v, val, "accum", self._accum_name or self._name)
            self._zeros_slot(v, "linear", self._linear_name or self._name)

    def _prepare(self):
        lr = self._call_if_callable(self._learning_rate)
        self._learning_rate_tensor = convert_to_tensor(lr, name="learning_rate")
        self._l1_tensor = convert_to_tensor(self._l1, name="l1_regularization_strength")
        # beta folds into the L2 strength, so the kernels need no extra input (TF does the same).
        if self._beta == 0.0:
            l2 = self._l2
        elif isinstance(lr, (int, float)):
            l2 = self._l2 + self._beta / (2.0 * max(lr, 1e-36))
        else:
            l2 = self._l2 + self._beta / (2.0 * math_ops.maximum(self._learning_rate_tensor, 1e-36))
        self._l2_tensor = convert_to_tensor(l2, name="adjusted_l2_regularization_strength")
        self._l2_shrinkage_tensor = convert_to_tensor(
            self._l2_shrinkage, name="l2_shrinkage_regularization_strength"
        )
        self._power_tensor = convert_to_tensor(
            self._learning_rate_power, name="learning_rate_power"
        )

    def _inputs(self, var):
        """(lr, l1, l2[, l2_shrinkage], lr_power) cast to the variable's type."""
        tensors = [self._learning_rate_tensor, self._l1_tensor, self._l2_tensor]
        if self._l2_shrinkage > 0.0:
            tensors.append(self._l2_shrinkage_tensor)
        tensors.append(self._power_tensor)
        return [self._cast(t, var) for t in tensors]

    def _apply_dense(self, grad, var):
        op = "apply_ftrl_v2" if self._l2_shrinkage > 0.0 else "apply_ftrl"
        accum, linear = self.get_slot(var, "accum"), self.get_slot(var, "linear")
        return self._fused(op, var, accum, linear, grad, *self._inputs(var))

    def _apply_sparse(self, grad, var):
        op = "sparse_apply_ftrl_v2" if self._l2_shrinkage > 0.0 else "sparse_apply_ftrl"
        accum, linear = self.get_slot(var, "accum"), self.get_slot(var, "linear")
        return self._fused(op, var, accum, linear, grad.values, grad.indices, *self._inputs(var))

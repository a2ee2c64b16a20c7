"""AdamOptimizer (Kingma & Ba, 2015) as TF1 builds it.

State: slots `m` and `v` per variable (named `<var>/Adam` and `<var>/Adam_1`) and two non-slot
variables, `beta1_power` and `beta2_power`, colocated with the first variable by name; they hold
beta^t and are multiplied by beta after every step (`_finish`). The dense update is ApplyAdam,
whose step size is lr * sqrt(1 - beta2^t) / (1 - beta1^t) with epsilon added to sqrt(v) (the
"epsilon hat" of the paper's section 2). Sparse gradients follow TF1's `_apply_sparse_shared`:
decay all of m and v, scatter-add the scaled gradient rows, then update the variable densely.
"""

from __future__ import annotations

from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.indexed_slices import IndexedSlices
from flowgraph.ops import array as array_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import variable_ops
from flowgraph.ops.resource_variables import is_resource_variable
from flowgraph.train.optimizer import Optimizer

__all__ = ["AdamOptimizer"]


class AdamOptimizer(Optimizer):
    """Adam: per-coordinate steps from bias-corrected first and second gradient moments.

    Example: train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step)
    """

    def __init__(
        self,
        learning_rate=0.001,
        beta1=0.9,
        beta2=0.999,
        epsilon=1e-8,
        use_locking=False,
        name="Adam",
    ):
        super().__init__(use_locking, name)
        self._lr, self._beta1, self._beta2, self._epsilon = learning_rate, beta1, beta2, epsilon
        self._lr_t = self._beta1_t = self._beta2_t = self._epsilon_t = None

    def _get_beta_accumulators(self, graph=None):
        return self._get_non_slot_variable("beta1_power", graph), self._get_non_slot_variable(
            "beta2_power", graph
        )

    def _create_slots(self, var_list):
        first_var = min(var_list, key=lambda x: x.name)
        self._create_non_slot_variable(self._beta1, "beta1_power", first_var)
        self._create_non_slot_variable(self._beta2, "beta2_power", first_var)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name + "_1")

    def _prepare(self):
        call = self._call_if_callable
        self._lr_t = convert_to_tensor(call(self._lr), name="learning_rate")
        self._beta1_t = convert_to_tensor(call(self._beta1), name="beta1")
        self._beta2_t = convert_to_tensor(call(self._beta2), name="beta2")
        self._epsilon_t = convert_to_tensor(call(self._epsilon), name="epsilon")

    def _apply_dense(self, grad, var):
        beta1_power, beta2_power = self._get_beta_accumulators(var.op.graph)
        cast = self._cast
        return self._fused(
            "apply_adam",
            var,
            self.get_slot(var, "m"),
            self.get_slot(var, "v"),
            cast(beta1_power, var),
            cast(beta2_power, var),
            cast(self._lr_t, var),
            cast(self._beta1_t, var),
            cast(self._beta2_t, var),
            cast(self._epsilon_t, var),
            grad,
        )

    def _apply_sparse(self, grad, var):
        """m and v decay everywhere and gain the scaled rows; the step then uses all of them."""
        graph = var.op.graph
        beta1_power, beta2_power = (self._cast(b, var) for b in self._get_beta_accumulators(graph))
        lr_t, beta1_t, beta2_t, epsilon_t = (
            self._cast(t, var) for t in (self._lr_t, self._beta1_t, self._beta2_t, self._epsilon_t)
        )
        lr = lr_t * math_ops.sqrt(1 - beta2_power) / (1 - beta1_power)
        locking = self._use_locking
        m = self.get_slot(var, "m")
        m_scaled_g_values = grad.values * (1 - beta1_t)
        m_t = variable_ops.assign(m, m * beta1_t, use_locking=locking)
        with graph.control_dependencies([m_t]):
            m_t = self._scatter_add(m, grad.indices, m_scaled_g_values)
        v = self.get_slot(var, "v")
        v_scaled_g_values = (grad.values * grad.values) * (1 - beta2_t)
        v_t = variable_ops.assign(v, v * beta2_t, use_locking=locking)
        with graph.control_dependencies([v_t]):
            v_t = self._scatter_add(v, grad.indices, v_scaled_g_values)
        v_sqrt = math_ops.sqrt(v_t)
        var_update = variable_ops.assign_sub(
            var, lr * m_t / (v_sqrt + epsilon_t), use_locking=locking
        )
        return array_ops.group(var_update, m_t, v_t)

    def _scatter_add(self, slot, indices, values):
        """slot[indices] += values, then the slot's new value (ScatterAdd's ref output, or a
        read after ResourceScatterAdd for a resource slot, as TF1's _resource_scatter_add)."""
        if is_resource_variable(slot):
            return slot.scatter_add(IndexedSlices(values, indices))
        return variable_ops.scatter_add(slot, indices, values, use_locking=self._use_locking)

    def _finish(self, update_ops, name_scope):
        """beta1_power *= beta1 and beta2_power *= beta2, after every variable's update."""
        graph = update_ops[0].graph if update_ops else None
        beta1_power, beta2_power = self._get_beta_accumulators(graph)
        graph = beta1_power.op.graph
        with graph.control_dependencies(update_ops), graph.colocate_with(beta1_power.op):
            update_beta1 = beta1_power.assign(
                beta1_power * self._beta1_t, use_locking=self._use_locking
            )
            update_beta2 = beta2_power.assign(
                beta2_power * self._beta2_t, use_locking=self._use_locking
            )
        return array_ops.group(*update_ops, update_beta1, update_beta2, name=name_scope)

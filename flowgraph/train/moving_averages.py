"""Exponential moving averages of variables and tensors (TF1's moving_averages.py).

`ExponentialMovingAverage.apply(var_list)` creates one shadow variable per input, named
`<var>/ExponentialMovingAverage`, and returns an op that moves each shadow toward its input:
shadow -= (1 - decay) * (shadow - value). A variable's shadow starts at the variable's initial
value; a tensor's starts at zero, and with `zero_debias` it is corrected for that start (Adam's
bias correction) using two helper variables `<shadow>/biased` and `<shadow>/local_step`.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import default_graph
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.graph import GraphKeys
from flowgraph.ops import array as array_ops
from flowgraph.ops import init_ops, variable_ops, variable_scope, variables
from flowgraph.ops import math as math_ops
from flowgraph.train import slot_creator

__all__ = ["ExponentialMovingAverage", "assign_moving_average"]

_FLOAT_TYPES = (dtypes.bfloat16, dtypes.float16, dtypes.float32, dtypes.float64)


def assign_moving_average(variable, value, decay, zero_debias=True, name=None):
    """variable -= (1 - decay) * (variable - value); returns the updated variable.

    With `zero_debias`, `variable` is treated as the debiased view of an average that started at
    zero. Example: update = tf.train.assign_moving_average(avg, batch_mean, 0.99)
    """
    graph = variable.op.graph
    with graph.as_default(), graph.name_scope(name or "AssignMovingAvg") as scope:
        decay = convert_to_tensor(1.0 - decay, name="decay")
        if decay.dtype.base_dtype != variable.dtype.base_dtype:
            decay = math_ops.cast(decay, variable.dtype.base_dtype)
        if zero_debias:
            return _zero_debias(variable, value, decay)
        return variable_ops.assign_sub(variable, (variable - value) * decay, name=scope)


def _zero_debias(unbiased_var, value, decay):
    """Keeps the zero-started average in `biased` and writes biased / (1 - (1-decay)^t).

    `decay` here is already 1 - decay (the weight of the new value)."""
    graph = unbiased_var.op.graph
    with variable_scope.variable_scope(unbiased_var.op.name, values=[unbiased_var, value, decay]):
        with graph.control_dependencies(None):
            biased = variable_scope.get_variable(
                "biased",
                initializer=init_ops.zeros_initializer(),
                shape=unbiased_var.get_shape(),
                dtype=unbiased_var.dtype.base_dtype,
                trainable=False,
            )
            local_step = variable_scope.get_variable(
                "local_step",
                shape=[],
                dtype=unbiased_var.dtype.base_dtype,
                initializer=init_ops.zeros_initializer(),
                trainable=False,
            )
        update_biased = variable_ops.assign_sub(biased, (biased - value) * decay)
        update_local_step = local_step.assign_add(1)
        bias_factor = 1 - math_ops.pow(1.0 - decay, update_local_step)
        return variable_ops.assign(
            unbiased_var, update_biased / bias_factor, name=graph.get_name_scope() + "/"
        )


class ExponentialMovingAverage:
    """Maintains shadow copies of variables that follow them with exponential decay.

    Example:
        ema = tf.train.ExponentialMovingAverage(decay=0.999)
        with tf.control_dependencies([train_op]):
            train_op = ema.apply([w, b])
        w_avg = ema.average(w)
    """

    def __init__(self, decay, num_updates=None, zero_debias=False, name="ExponentialMovingAverage"):
        self._decay = decay
        self._num_updates = num_updates
        self._zero_debias = zero_debias
        self._name = name
        self._averages: dict = {}  # id(var or tensor) -> (var or tensor, shadow variable)

    @property
    def name(self) -> str:
        return self._name

    def apply(self, var_list=None):
        """Creates the shadows of `var_list` (default: trainable variables); returns the update op.

        With `num_updates`, the decay used is min(decay, (1 + num_updates) / (10 + num_updates)),
        so early averages move faster.
        """
        graph = default_graph.get()
        if var_list is None:
            var_list = variables.trainable_variables()
        var_list = list(var_list)
        debiased = set()
        for var in var_list:
            if var.dtype.base_dtype not in _FLOAT_TYPES:
                raise TypeError(f"The variables must be half, float, or double: {var.name}")
            if id(var) in self._averages:
                continue
            with graph.control_dependencies(None):
                if isinstance(var, variables.Variable):
                    avg = slot_creator.create_slot(var, var.initialized_value(), self._name)
                    graph.add_to_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, var)
                else:
                    colocate = var.op.type in ("Variable", "VariableV2", "VarHandleOp")
                    avg = slot_creator.create_zeros_slot(
                        var, self._name, colocate_with_primary=colocate
                    )
                    if self._zero_debias:
                        debiased.add(id(avg))
            self._averages[id(var)] = (var, avg)
        with graph.name_scope(self._name) as scope:
            decay = convert_to_tensor(self._decay, name="decay")
            if self._num_updates is not None:
                num_updates = math_ops.cast(self._num_updates, dtypes.float32, name="num_updates")
                decay = math_ops.minimum(decay, (1.0 + num_updates) / (10.0 + num_updates))
            updates = []
            for var in var_list:
                avg = self._averages[id(var)][1]
                updates.append(
                    assign_moving_average(avg, var, decay, zero_debias=id(avg) in debiased)
                )
            return array_ops.group(*updates, name=scope)

    def average(self, var):
        """The shadow variable of `var`, or None if `apply` has not seen it."""
        entry = self._averages.get(id(var))
        return entry[1] if entry is not None else None

    def average_name(self, var) -> str:
        """The name of `var`'s shadow: the existing one, or the name `apply` would give it."""
        entry = self._averages.get(id(var))
        if entry is not None:
            return entry[1].op.name
        return var.op.graph.unique_name(var.op.name + "/" + self._name, mark_as_used=False)

    def variables_to_restore(self, moving_avg_variables=None) -> dict:
        """{checkpoint name: variable} restoring each averaged variable from its shadow's value.

        Example: saver = tf.train.Saver(ema.variables_to_restore())
        """
        if moving_avg_variables is None:
            moving_avg_variables = (
                variables.trainable_variables() + variables.moving_average_variables()
            )
        averaged = list({id(v): v for v in moving_avg_variables}.values())
        name_map = {self.average_name(v): v for v in averaged}
        averaged_names = {v.name for v in averaged}
        for v in variables.global_variables():
            if v.name not in averaged_names and v.op.name not in name_map:
                name_map[v.op.name] = v
        return name_map

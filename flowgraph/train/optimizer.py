"""The Optimizer base class (TF1's tf.train.Optimizer): gradients in, update ops out (§4.1).

`minimize` is `compute_gradients` (symbolic differentiation of the loss with tf.gradients) then
`apply_gradients`, which builds, for each (gradient, variable) pair, one fused update op
(`ApplyMomentum`, ...) under the name scope `<name>/update_<variable>` and colocated with the
variable, then groups them; with a global step the train op is the `AssignAdd` on it, run
after the group. A subclass provides `_create_slots` (its per-variable state), `_prepare` (its
hyper-parameters as tensors), `_apply_dense` / `_apply_sparse` (the update for a Tensor / an
IndexedSlices gradient), and optionally `_finish` (updates after all variables, e.g. Adam's beta
powers). One update method serves both kinds of variable: `_fused("apply_momentum", var, ...)`
builds ApplyMomentum on a reference variable and ResourceApplyMomentum on a resource variable
(TF1's `_resource_apply_dense` / `_resource_apply_sparse` paths), whose slots are resource
variables too.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.graph import GraphKeys
from flowgraph.framework.indexed_slices import IndexedSlices
from flowgraph.framework.operation import Operation, Tensor
from flowgraph.gradients import impl as gradients_impl
from flowgraph.ops import array as array_ops
from flowgraph.ops import array_index, variable_ops, variables
from flowgraph.ops import math as math_ops
from flowgraph.train import slot_creator, training_ops

__all__ = ["Optimizer"]


def _var_key(var):
    """Slots are keyed by the variable's (graph, op name), like TF: stable across wrappers."""
    return (var.op.graph, var.op.name)


def _is_resource(var) -> bool:
    dtype = getattr(var, "dtype", None)
    return getattr(var, "handle", None) is not None and not getattr(dtype, "is_ref_dtype", False)


def _is_sparse(grad) -> bool:
    return isinstance(grad, IndexedSlices) or (
        hasattr(grad, "values") and hasattr(grad, "indices") and hasattr(grad, "dense_shape")
    )


def _deduplicate_indexed_slices(values, indices):
    """Sums the rows of repeated indices: (summed values, unique indices), as TF does before a
    sparse update, so rules that are not linear in the gradient (Adam's g*g) see each row once."""
    unique_indices, positions = array_index.unique(indices)
    num_segments = array_ops.shape(unique_indices)[0]
    summed = apply_op("UnsortedSegmentSum", [values, positions, num_segments]).outputs[0]
    return summed, unique_indices


def _group(ops, name=None):
    return array_ops.group(*ops, name=name)


class Optimizer:
    """Base class of the optimizers; see the module docstring for what a subclass provides.

    Example:
        opt = tf.train.GradientDescentOptimizer(0.1)
        train_op = opt.minimize(loss, global_step=tf.train.get_or_create_global_step())
    """

    # How much compute_gradients serializes: GATE_NONE computes and applies gradients as soon
    # as they are ready; GATE_OP waits for all gradients of each op (TF's default); GATE_GRAPH
    # waits for every gradient before any variable is updated.
    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking, name):
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = use_locking
        self._name = name
        self._slots: dict[str, dict] = {}  # slot name -> {_var_key(var): slot variable}
        self._non_slot_dict: dict = {}  # (name, graph) -> variable (e.g. Adam's beta1_power)

    def get_name(self) -> str:
        return self._name

    # -- the public API ---------------------------------------------------------------------
    def minimize(
        self,
        loss,
        global_step=None,
        var_list=None,
        gate_gradients=GATE_OP,
        aggregation_method=None,
        colocate_gradients_with_ops=False,
        name=None,
        grad_loss=None,
    ):
        """Adds ops that update `var_list` to minimize `loss`; returns the train op."""
        grads_and_vars = self.compute_gradients(
            loss,
            var_list=var_list,
            gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
            grad_loss=grad_loss,
        )
        if not [v for g, v in grads_and_vars if g is not None]:
            raise ValueError(
                "No gradients provided for any variable, check your graph for ops that do not "
                f"support gradients, between variables {[str(v) for _, v in grads_and_vars]} "
                f"and loss {loss}."
            )
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def compute_gradients(
        self,
        loss,
        var_list=None,
        gate_gradients=GATE_OP,
        aggregation_method=None,
        colocate_gradients_with_ops=False,
        grad_loss=None,
    ):
        """Returns [(gradient, variable)] for `var_list` (default: the trainable variables).

        A gradient is a Tensor, an IndexedSlices, or None where the loss does not depend on the
        variable.
        """
        if callable(loss):
            raise NotImplementedError(
                "compute_gradients(loss=<callable>) is eager-mode only; pass the loss Tensor"
            )
        if gate_gradients not in (Optimizer.GATE_NONE, Optimizer.GATE_OP, Optimizer.GATE_GRAPH):
            raise ValueError(
                "gate_gradients must be one of: Optimizer.GATE_NONE, Optimizer.GATE_OP, "
                f"Optimizer.GATE_GRAPH.  Not {gate_gradients}"
            )
        self._assert_valid_dtypes([loss])
        if grad_loss is not None:
            self._assert_valid_dtypes([grad_loss])
        graph = loss.graph if isinstance(loss, Tensor) else default_graph.get()
        if var_list is None:
            var_list = graph.get_collection(GraphKeys.TRAINABLE_VARIABLES) + graph.get_collection(
                GraphKeys.TRAINABLE_RESOURCE_VARIABLES
            )
            var_list = list(dict.fromkeys(var_list))
        else:
            var_list = _flatten(var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        targets = [v.handle if _is_resource(v) else _ref(v) for v in var_list]
        grads = gradients_impl.gradients(
            loss,
            targets,
            grad_ys=grad_loss,
            gate_gradients=gate_gradients == Optimizer.GATE_OP,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
        )
        if gate_gradients == Optimizer.GATE_GRAPH:
            grads = array_ops.tuple_(grads)
        grads_and_vars = list(zip(grads, var_list))
        self._assert_valid_dtypes(
            [v for g, v in grads_and_vars if g is not None and not _is_resource(v)]
        )
        return grads_and_vars

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Applies the gradients; returns the train op (the global step's AssignAdd if given).

        Example: train_op = opt.apply_gradients(zip(clipped, variables), global_step)
        """
        converted = []
        for g, v in tuple(grads_and_vars):
            if g is not None:
                if not _is_sparse(g):
                    try:
                        g = convert_to_tensor(g)
                    except (TypeError, ValueError):
                        raise TypeError(
                            "Gradient must be convertible to a Tensor or IndexedSlices, or None: "
                            f"{g}"
                        ) from None
                if not isinstance(g, Tensor) and not _is_sparse(g):
                    raise TypeError(f"Gradient must be a Tensor, IndexedSlices, or None: {g}")
            if not hasattr(v, "op") or not hasattr(v, "dtype"):
                raise NotImplementedError(f"Trying to update a Tensor {v}")
            converted.append((g, v))
        if not converted:
            raise ValueError("No variables provided.")
        var_list = [v for g, v in converted if g is not None]
        if not var_list:
            raise ValueError(
                f"No gradients provided for any variable: {[str(v) for _, v in converted]}."
            )
        graph = var_list[0].op.graph
        with graph.as_default():
            with graph.control_dependencies(None):  # TF's init_scope: slots never wait on a step
                self._create_slots(var_list)
            with graph.name_scope(name or self._name) as scope:
                self._prepare()
                update_ops = []
                for grad, var in converted:
                    if grad is None:
                        continue
                    with graph.name_scope("update_" + var.op.name), graph.colocate_with(var.op):
                        update_ops.append(self._update_op(grad, var))
                if global_step is None:
                    apply_updates = self._finish(update_ops, scope)
                else:
                    finished = self._finish(update_ops, "update")
                    with (
                        graph.control_dependencies([finished]),
                        graph.colocate_with(global_step.op),
                    ):
                        apply_updates = variable_ops.assign_add(global_step, 1, name=scope)
            if isinstance(apply_updates, Tensor):
                apply_updates = apply_updates.op
            train_ops = graph.get_collection_ref(GraphKeys.TRAIN_OP)
            if apply_updates not in train_ops:
                train_ops.append(apply_updates)
        return apply_updates

    def get_slot(self, var, name):
        """The slot `name` ('momentum', 'm', ...) of `var`, or None."""
        named = self._slots.get(name)
        if not named:
            return None
        return named.get(_var_key(var))

    def get_slot_names(self) -> list:
        """The names of the slots this optimizer created, sorted."""
        return sorted(self._slots)

    def variables(self) -> list:
        """The optimizer's variables in the default graph (slots and non-slots), sorted by name."""
        graph = default_graph.get()
        found = [v for (_, g), v in self._non_slot_dict.items() if g is graph]
        for named in self._slots.values():
            found.extend(v for v in named.values() if v.op.graph is graph)
        return sorted(found, key=lambda v: v.name)

    # -- for subclasses ---------------------------------------------------------------------
    def _create_slots(self, var_list):
        pass  # an optimizer without per-variable state (gradient descent) needs none

    def _prepare(self):
        pass  # an optimizer without tensor hyper-parameters needs none

    def _apply_dense(self, grad, var):
        raise NotImplementedError(f"{type(self).__name__} has no dense update")

    def _apply_sparse(self, grad, var):
        raise NotImplementedError(f"{type(self).__name__} has no sparse update")

    def _apply_sparse_duplicate_indices(self, grad, var):
        summed, unique = _deduplicate_indexed_slices(grad.values, grad.indices)
        return self._apply_sparse(IndexedSlices(summed, unique, grad.dense_shape), var)

    def _finish(self, update_ops, name_scope):
        return _group(update_ops, name=name_scope)

    def _update_op(self, grad, var):
        """The update of one variable (TF's per-variable-kind 'processor')."""
        if _is_sparse(grad):
            update = self._apply_sparse_duplicate_indices(grad, var)
        else:
            update = self._apply_dense(grad, var)
        constraint = getattr(var, "constraint", None)
        if constraint is None:
            return update
        with var.op.graph.control_dependencies([update]):
            return var.assign(constraint(var))

    def _fused(self, op_name, var, *args, **attrs):
        """The fused training op `op_name` ("apply_momentum", "sparse_apply_adam", ...) on `var`
        and its slots: the ref op for a reference variable, `Resource<Op>` for a resource
        variable (its handles are passed). Returns the Operation."""
        if _is_resource(var):
            op_name = "resource_" + op_name
        out = getattr(training_ops, op_name)(var, *args, use_locking=self._use_locking, **attrs)
        return out if isinstance(out, Operation) else out.op

    def _valid_dtypes(self):
        return {dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64}

    def _assert_valid_dtypes(self, tensors):
        valid = self._valid_dtypes()
        for t in tensors:
            dtype = t.dtype.base_dtype
            if dtype not in valid:
                raise ValueError(
                    f"Invalid type {dtype!r} for {t.name}, expected: "
                    f"{sorted(d.name for d in valid)}."
                )

    @staticmethod
    def _call_if_callable(param):
        return param() if callable(param) else param

    def _cast(self, value, var):
        """A hyper-parameter tensor in the variable's element type (no op when it matches)."""
        dtype = var.dtype.base_dtype
        value = convert_to_tensor(value)
        return value if value.dtype.base_dtype == dtype else math_ops.cast(value, dtype)

    # -- slots ------------------------------------------------------------------------------
    def _slot_dict(self, slot_name) -> dict:
        return self._slots.setdefault(slot_name, {})

    def _zeros_slot(self, var, slot_name, op_name):
        named = self._slot_dict(slot_name)
        if _var_key(var) not in named:
            named[_var_key(var)] = slot_creator.create_zeros_slot(var, op_name)
        return named[_var_key(var)]

    def _get_or_make_slot(self, var, val, slot_name, op_name):
        named = self._slot_dict(slot_name)
        if _var_key(var) not in named:
            named[_var_key(var)] = slot_creator.create_slot(var, val, op_name)
        return named[_var_key(var)]

    def _get_or_make_slot_with_initializer(
        self, var, initializer, shape, dtype, slot_name, op_name
    ):
        named = self._slot_dict(slot_name)
        if _var_key(var) not in named:
            named[_var_key(var)] = slot_creator.create_slot_with_initializer(
                var, initializer, shape, dtype, op_name
            )
        return named[_var_key(var)]

    def _create_non_slot_variable(self, initial_value, name, colocate_with):
        """One variable per optimizer and graph (e.g. Adam's beta1_power), not per variable."""
        graph = colocate_with.op.graph
        key = (name, graph)
        v = self._non_slot_dict.get(key)
        if v is None:
            with graph.as_default(), graph.colocate_with(colocate_with.op):
                v = variables.Variable(
                    initial_value,
                    name=name,
                    trainable=False,
                    use_resource=_is_resource(colocate_with),
                )
            self._non_slot_dict[key] = v
        return v

    def _get_non_slot_variable(self, name, graph=None):
        graph = graph if graph is not None else default_graph.get()
        return self._non_slot_dict.get((name, graph))


def _ref(var):
    """The tensor gradients are taken with respect to: a ref variable's reference output."""
    if hasattr(var, "_ref"):
        return var._ref()
    if isinstance(var, Tensor):
        return var
    raise TypeError(f"Cannot optimize {var!r}: not a Variable or Tensor")


def _flatten(var_list) -> list:
    out = []
    for v in var_list:
        if isinstance(v, (list, tuple)):
            out.extend(_flatten(v))
        else:
            out.append(v)
    return out

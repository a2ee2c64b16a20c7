"""Which variables a graph has, and the ops that initialize them or report on them.

The collections are the graph's (GLOBAL_VARIABLES, TRAINABLE_VARIABLES, ...): a Variable adds
itself when it is built (variables.py), so these functions only read them.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.graph import GraphKeys
from flowgraph.ops import variable_ops

__all__ = [
    "all_variables",
    "assert_variables_initialized",
    "global_variables",
    "global_variables_initializer",
    "initialize_all_variables",
    "initialize_local_variables",
    "initialize_variables",
    "local_variables",
    "local_variables_initializer",
    "model_variables",
    "moving_average_variables",
    "report_uninitialized_variables",
    "trainable_variables",
    "variables_initializer",
]

_VARIABLE_OPS = ("Variable", "VariableV2", "AutoReloadVariable", "VarHandleOp")


# -- collections ----------------------------------------------------------------------------------
def global_variables(scope=None) -> list:
    """Variables in GLOBAL_VARIABLES (optionally those whose name matches regex `scope`)."""
    return default_graph.get().get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


def all_variables() -> list:
    """Deprecated TF1 name of `global_variables()`."""
    return global_variables()


def trainable_variables(scope=None) -> list:
    return default_graph.get().get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope=None) -> list:
    return default_graph.get().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope=None) -> list:
    return default_graph.get().get_collection(GraphKeys.MODEL_VARIABLES, scope)


def moving_average_variables(scope=None) -> list:
    return default_graph.get().get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


# -- initialization -------------------------------------------------------------------------------
def variables_initializer(var_list, name="init"):
    """One NoOp that runs the initializers of `var_list`.

    Example: sess.run(tf.variables_initializer([w]))
    """
    graph = default_graph.get()
    with graph.control_dependencies([v.initializer for v in var_list] or None):
        return apply_op("NoOp", [], name=name, graph=graph)


def initialize_variables(var_list, name="init"):
    """Deprecated TF1 name of `variables_initializer`."""
    return variables_initializer(var_list, name=name)


def global_variables_initializer():
    """The op named "init" that initializes every global variable."""
    return variables_initializer(global_variables())


def initialize_all_variables():
    """Deprecated TF1 name of `global_variables_initializer`."""
    return global_variables_initializer()


def local_variables_initializer():
    return variables_initializer(local_variables())


def initialize_local_variables():
    """Deprecated TF1 name of `local_variables_initializer`."""
    return local_variables_initializer()


def _default_var_list() -> list:
    var_list = global_variables() + local_variables()
    if not var_list:
        var_list = [
            op.outputs[0] for op in default_graph.get().get_operations() if op.type in _VARIABLE_OPS
        ]
    return var_list


def report_uninitialized_variables(var_list=None, name="report_uninitialized_variables"):
    """A 1-D string tensor: the names of the variables in `var_list` (default: global and
    local variables) that are not initialized when it runs."""
    if var_list is None:
        var_list = _default_var_list()
    graph = default_graph.get()
    with graph.name_scope(name):
        if not var_list:
            return convert_to_tensor([], dtype=dtypes.string)
        flags = [variable_ops.is_variable_initialized(v) for v in var_list]
        with graph.device("/cpu:0"):
            mask = apply_op("LogicalNot", [apply_op("Pack", [flags], axis=0).outputs[0]]).outputs[0]
            names = convert_to_tensor([v.op.name for v in var_list])
            where = apply_op("Where", [mask]).outputs[0]
            rows = apply_op("Squeeze", [where], squeeze_dims=[1]).outputs[0]
            return apply_op("GatherV2", [names, rows, 0]).outputs[0]


def assert_variables_initialized(var_list=None):
    """An op that fails with FailedPreconditionError if a variable in `var_list` is uninitialized
    (it reads each variable's rank); None when there are no variables."""
    if var_list is None:
        var_list = _default_var_list()
    if not var_list:
        return None
    graph = default_graph.get()
    ranks = []
    for var in var_list:
        with graph.colocate_with(var.op):
            ranks.append(apply_op("Rank", [var]).outputs[0])
    if len(ranks) == 1:
        return ranks[0]
    return apply_op("Pack", [ranks], axis=0).outputs[0]

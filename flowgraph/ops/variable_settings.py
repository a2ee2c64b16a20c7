"""What both kinds of variable share besides the Variable class: the distribution settings
(TF's VariableSynchronization and VariableAggregation) and their checks, building outside the
caller's control flow, and the scope arithmetic of VariableDef names.

Reference variables (variables.py) and resource variables (resource_variables.py) build
different graphs, but they validate their settings, escape loops and conds, and name their
nodes in a VariableDef the same way; this module is that common part, so neither reaches into
the other's private names.
"""

from __future__ import annotations

import contextlib
import enum

__all__ = ["VariableAggregation", "VariableSynchronization"]


@contextlib.contextmanager
def outside_control_flow(graph):
    """Builds ops at the top level of `graph`, outside any while loop or cond (TF1 clears the
    control-flow context with the control dependencies), so a variable's initializer and
    snapshot run once per step, and loops reach the variable through a constant Enter."""
    saved = graph._control_flow_context
    graph._control_flow_context = None
    try:
        yield
    finally:
        graph._control_flow_context = saved


class VariableSynchronization(enum.Enum):
    """When a distributed variable is aggregated (TF's tf.VariableSynchronization)."""

    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


class VariableAggregation(enum.Enum):
    """How replicas' updates of a distributed variable combine (TF's tf.VariableAggregation)."""

    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3
    ONLY_FIRST_TOWER = 3  # noqa: PIE796 (TF1's deprecated alias)


def validate_distribution(synchronization, aggregation, trainable, name):
    """TF's checks: enum members only, and ON_READ variables cannot be trainable."""
    if aggregation is None:
        aggregation = VariableAggregation.NONE
    elif not isinstance(aggregation, VariableAggregation):
        try:
            aggregation = VariableAggregation(aggregation)
        except ValueError:
            raise ValueError(
                f"Invalid variable aggregation mode: {aggregation} for variable: {name}"
            ) from None
    if synchronization is None:
        synchronization = VariableSynchronization.AUTO
    elif not isinstance(synchronization, VariableSynchronization):
        try:
            synchronization = VariableSynchronization(synchronization)
        except ValueError:
            raise ValueError(
                f"Invalid variable synchronization mode: {synchronization} for variable: {name}"
            ) from None
    if trainable is None:
        trainable = synchronization != VariableSynchronization.ON_READ
    elif trainable and synchronization == VariableSynchronization.ON_READ:
        raise ValueError(
            "Synchronization value can be set to VariableSynchronization.ON_READ only for "
            f"non-trainable variables. You have specified trainable=True and "
            f"synchronization=VariableSynchronization.ON_READ for variable {name}."
        )
    return synchronization, aggregation, bool(trainable)


def prepend_scope(name: str, import_scope) -> str:
    """A VariableDef's node name as imported under `import_scope`."""
    return f"{import_scope}/{name}" if import_scope else name


def strip_scope(name: str, export_scope) -> str:
    """A node name as a VariableDef exported from `export_scope` records it."""
    if export_scope and name.startswith(export_scope + "/"):
        return name[len(export_scope) + 1 :]
    return name

"""The tf.* functions that open scopes on, or reach the collections of, the default graph
(TF1's `tf.name_scope`, `tf.control_dependencies`, `tf.device`, `tf.colocate_with`,
`tf.get_collection`, ...). Each is a thin front for the `Graph` method of the same name, so the
behaviour lives in one place (framework/graph.py, whitepaper §2).
"""

from __future__ import annotations

import contextlib

from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import graph_of

__all__ = [
    "add_to_collection",
    "add_to_collections",
    "colocate_with",
    "container",
    "control_dependencies",
    "device",
    "get_collection",
    "get_collection_ref",
    "init_scope",
    "name_scope",
]


@contextlib.contextmanager
def name_scope(name, default_name=None, values=None):
    """Opens a name scope in the graph of `values` (else the default graph) and yields its
    prefix ("scope/"). `name` None uses `default_name` (made unique); "" or None without a
    default returns to the top level; a name ending in "/" re-enters that scope exactly.

    Example:
      with tf.name_scope("layer1") as scope:  # scope == "layer1/"
        w = tf.constant(1.0, name="w")          # w.op.name == "layer1/w"
    """
    if name is None and default_name is None and values is not None:
        raise ValueError(
            f"At least one of name ({name}) and default_name ({default_name}) must be provided."
        )
    graph = graph_of(list(values)) if values else default_graph.get()
    with graph.name_scope(name if name is not None else default_name) as scope:
        yield scope


@contextlib.contextmanager
def init_scope():
    """Lifts the ops created in the block out of function bodies, control-flow contexts and
    control dependencies, into the outermost graph, keeping the current name scope: where
    variables' initializers and other one-time setup belong (TF's init_scope).

    Example:
      with tf.init_scope():
        counter = tf.Variable(0)   # even inside a tf.while_loop body or a Defun
    """
    graph = default_graph.get()
    scope = graph.get_name_scope()
    outer = graph
    while getattr(outer, "outer_graph", None) is not None:  # function bodies (FuncGraph)
        outer = outer.outer_graph
    scopes = outer.name_scope(f"{scope}/" if scope else ""), outer.control_dependencies(None)
    with outer.as_default(), scopes[0], scopes[1]:
        context, outer._control_flow_context = outer._control_flow_context, None
        try:
            yield
        finally:
            outer._control_flow_context = context


def control_dependencies(control_inputs):
    """Ops created in the block run after `control_inputs` (None clears outer blocks).

    Example:
      with tf.control_dependencies([update]):
        out = tf.identity(x)   # runs after `update`
    """
    return default_graph.get().control_dependencies(control_inputs)


def device(device_name_or_function):
    """Requests a device ("/job:worker/task:1/device:GPU:0", partial specs merge with outer
    scopes) or a function op -> device string for the ops created in the block."""
    return default_graph.get().device(device_name_or_function)


def container(container_name):
    """Stateful ops created in the block keep their state in resource container
    `container_name` of the default graph (tf.Session.reset can clear it alone)."""
    return default_graph.get().container(container_name)


def colocate_with(op, ignore_existing=False):
    """Places the ops created in the block with `op` (a Tensor, Operation or Variable)."""
    return default_graph.get().colocate_with(op, ignore_existing)


def get_collection(key, scope=None) -> list:
    """A copy of collection `key` of the default graph, filtered by the regex `scope`."""
    return default_graph.get().get_collection(key, scope)


def get_collection_ref(key) -> list:
    """The collection list itself: appending to it changes the collection."""
    return default_graph.get().get_collection_ref(key)


def add_to_collection(name, value):
    """Appends `value` to collection `name` of the default graph."""
    default_graph.get().add_to_collection(name, value)


def add_to_collections(names, value):
    """Appends `value` to each collection in `names` (once per distinct name)."""
    default_graph.get().add_to_collections(names, value)

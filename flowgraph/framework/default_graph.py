"""The one explicit default-graph stack (no thread-locals: threads see the same default graph).

`Graph.as_default()` pushes; leaving the block pops. When the stack is empty, a lazily created
global graph is the default; `reset_default_graph()` replaces it.
"""

from __future__ import annotations

import contextlib

_stack: list = []
_global = None


def get():
    """The innermost graph of `as_default()` blocks, else the global default graph."""
    global _global
    if _stack:
        return _stack[-1]
    if _global is None:
        from flowgraph.framework.graph import Graph

        _global = Graph()
    return _global


@contextlib.contextmanager
def push(graph):
    _stack.append(graph)
    try:
        yield graph
    finally:
        _stack.remove(graph) if _stack[-1] is not graph else _stack.pop()


def clear_stack():
    """Leaves every `as_default()` block (TF's `_default_graph_stack.reset()`): a test's set-up
    starts from the global default graph even if an earlier test failed inside a block."""
    _stack.clear()


def reset():
    """Clears the global default graph (TF1: only legal outside every `as_default()` block)."""
    global _global
    if _stack:
        raise AssertionError(
            "Do not use tf.reset_default_graph() to clear nested graphs. If you need a cleared "
            "graph, exit the nesting and create a new graph."
        )
    _global = None

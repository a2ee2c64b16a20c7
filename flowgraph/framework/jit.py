"""`jit_scope`: marks the ops created inside for compiled fusion (whitepaper §10), as TF1's
`tf.xla.experimental.jit_scope` and `tf.contrib.compiler.jit.experimental_jit_scope` do.

Ops get the attrs TensorFlow sets: `_XlaCompile` (whether to compile; `compile_ops` may be a
callable of the op's NodeDef), `_XlaSeparateCompiledGradients`, and, for an outermost scope,
`_XlaScope` = "jit_scope_<n>", which the fusion pass (runtime/passes/fusion.py) uses to keep
separate scopes in separate clusters. Nested scopes share their outermost scope's name. The
gradients of a marked op are marked too (`maybe_compile`, TF's `_MaybeCompile`): in the op's
scope, or with `separate_compiled_gradients` in a scope of their own per gradient name scope.

Example:
    with tf.xla.experimental.jit_scope():
        m_t = beta1 * m + (1 - beta1) * g   # one fused loop, not four NumPy passes
"""

from __future__ import annotations

import contextlib

from flowgraph.core.protos import AttrValue
from flowgraph.framework import default_graph

_XLA_SCOPE_KEY = ("__xla_scope",)


class _XlaScope:
    """The graph's count of outermost jit scopes, and the nesting depth now."""

    def __init__(self):
        self.count = 0
        self.depth = 0


@contextlib.contextmanager
def jit_scope(compile_ops=True, separate_compiled_gradients: bool = False):
    """Marks ops created inside for compilation (or not, with compile_ops=False)."""
    if callable(compile_ops):

        def xla_compile(node_def):
            return AttrValue(b=bool(compile_ops(node_def)))

    else:
        xla_compile = AttrValue(b=bool(compile_ops))
    attrs = {
        "_XlaCompile": xla_compile,
        "_XlaSeparateCompiledGradients": AttrValue(b=bool(separate_compiled_gradients)),
    }
    graph = default_graph.get()
    counters = graph.get_collection(_XLA_SCOPE_KEY)
    if counters:
        counter = counters[0]
    else:
        counter = _XlaScope()
        graph.add_to_collection(_XLA_SCOPE_KEY, counter)
    if counter.depth == 0:
        attrs["_XlaScope"] = AttrValue(s=f"jit_scope_{counter.count}".encode())
        counter.count += 1
    counter.depth += 1
    try:
        with graph._attr_scope(attrs):
            yield
    finally:
        counter.depth -= 1


@contextlib.contextmanager
def maybe_compile(graph, scope: str, op):
    """Marks the ops created inside (the gradient of `op`, under name scope `scope`) for
    compilation when `op` itself is marked."""
    try:
        compile_ = op.get_attr("_XlaCompile")
        separate = op.get_attr("_XlaSeparateCompiledGradients")
        xla_scope = op.get_attr("_XlaScope")
    except ValueError:
        compile_ = False
    if not compile_:
        yield
        return
    if isinstance(xla_scope, bytes):
        xla_scope = xla_scope.decode()
    if separate:
        xla_scope = f"{xla_scope}_grad_{scope.rstrip('/').replace('/', '_')}"
    attrs = {"_XlaCompile": AttrValue(b=True), "_XlaScope": AttrValue(s=xla_scope.encode())}
    with graph._attr_scope(attrs):
        yield

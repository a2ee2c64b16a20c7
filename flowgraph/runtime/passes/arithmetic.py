"""Arithmetic simplification (TensorFlow Grappler's ArithmeticOptimizer and the Identity part of
its DependencyOptimizer): nodes that return one of their inputs unchanged stop computing it.

    x * 1, 1 * x, x + 0, 0 + x, x - 0   -> Identity(x)   (when broadcasting keeps x's shape)
    Transpose(Transpose(x, p), q)        -> Identity(x)   (when p[q[i]] == i for every i)
    AddN(x)                              -> Identity(x)
    Identity chains                      -> consumers read the chain's input

The rewritten node keeps its name (a fetched or target node is still there) and gains the
control inputs of the constants it no longer reads. A constant operand must be a Const (constant
folding runs first) of the node's dtype, which the OpDefs guarantee. Like TensorFlow, `x + 0` is
taken to be `x`, although IEEE gives +0.0 for -0.0 + 0.0. An Identity is not bypassed on a ref
edge, across devices (it moves a tensor), after a control-flow op (a Switch's Identity is a
branch's pivot), before a control-flow op or a fetch, or when it has or is a control input.

`x * 1` and `x + 0` copy `x`, and programs rely on that copy: `global_step + 0` is TF's snapshot
of a reference variable, whose reads alias the buffer that later updates write in place. So those
rewrites skip any `x` that may alias a variable (downstream of a ref read through ops other than
the arithmetic that always allocates its result). AddN of one input and a double transpose
return (a view of) their input already, so bypassing them changes no aliasing.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes
from flowgraph.runtime.nodes import Node, make_node
from flowgraph.runtime.passes import rules
from flowgraph.runtime.passes.static_shapes import StaticShapes

_FRESH = frozenset({"Add", "AddV2", "Sub", "Mul", "MatMul"})  # results never alias inputs
# op -> (the neutral constant, the input positions where it is neutral)
_NEUTRAL = {"Mul": (1, (0, 1)), "Add": (0, (0, 1)), "AddV2": (0, (0, 1)), "Sub": (0, (1,))}


def simplify_arithmetic(nodes: list[Node], keep: frozenset, feed_shapes: dict) -> list[Node]:
    """Returns `nodes` with the rewrites above applied."""
    by_name = {n.name: n for n in nodes}
    facts = _Facts(nodes, by_name, feed_shapes)
    out = []
    for n in nodes:
        found = _forwarded(n, by_name, facts) if rules.is_pure(n, by_name) else None
        if found is not None:
            source, control = found
            n = make_node(
                n.name,
                "Identity",
                inputs=[source],
                control=dict.fromkeys(n.control + control),
                device=n.device,
                attrs={"T": n.output_types[0]},
            )
        out.append(n)
    out = _bypass_identities(out, keep)
    return rules.live(out, rules.sinks(nodes) | set(keep))


def _const(by_name, src: str):
    n = by_name.get(src)
    return n if n is not None and n.op == "Const" else None


def _forwarded(n: Node, by_name, facts) -> tuple | None:
    """(the input `n` returns unchanged, control inputs to keep) or None."""
    if n.op == "AddN" and len(n.inputs) == 1:
        return n.inputs[0], ()
    if n.op == "Transpose":
        return _double_transpose(n, by_name)
    rule = _NEUTRAL.get(n.op)
    if rule is None or n.output_types[0].base_dtype in (dtypes.string, dtypes.bool_):
        return None
    neutral, const_sides = rule
    for side in const_sides:
        c = _const(by_name, n.inputs[side][0])
        x = n.inputs[1 - side]
        if c is None or not np.all(c.attrs["value"] == neutral):
            continue
        if _keeps_shape(np.shape(c.attrs["value"]), x, facts) and not facts.may_alias(x[0]):
            return x, c.control
    return None


def _keeps_shape(const_shape: tuple, x: tuple, facts) -> bool:
    """Broadcasting `x` with a constant of `const_shape` gives x's shape back."""
    if not const_shape:
        return True
    dims = facts.shape(*x).as_tuple()
    if dims is None or len(const_shape) > len(dims):
        return False
    return all(c == 1 or c == d for c, d in zip(const_shape[::-1], dims[::-1]))


def _double_transpose(n: Node, by_name) -> tuple | None:
    inner = by_name.get(n.inputs[0][0])
    if inner is None or inner.op != "Transpose":
        return None
    p, q = _const(by_name, inner.inputs[1][0]), _const(by_name, n.inputs[1][0])
    if p is None or q is None:
        return None
    p, q = np.asarray(p.attrs["value"]), np.asarray(q.attrs["value"])
    if p.ndim != 1 or p.shape != q.shape or np.any(p[q] != np.arange(p.size)):
        return None
    control = inner.control + by_name[inner.inputs[1][0]].control + by_name[n.inputs[1][0]].control
    return inner.inputs[0], control


class _Facts:
    """Static shapes and possible aliasing of variables, worked out on the first question only
    (most graphs never ask)."""

    def __init__(self, nodes, by_name, feed_shapes):
        self._args = (nodes, by_name, feed_shapes)
        self._props = None
        self._aliasing = None

    def shape(self, src: str, port: int):
        if self._props is None:
            nodes, by_name, feed_shapes = self._args
            values = {n.name: (n.attrs["value"],) for n in nodes if n.op == "Const"}
            self._props = StaticShapes(by_name, values, feed_shapes)
            for n in rules.topological_order(nodes):
                self._props.record(n)
        return self._props.shape(src, port)

    def may_alias(self, name: str) -> bool:
        """Whether node `name`'s outputs may be (views of) a reference variable's buffer."""
        if self._aliasing is None:
            nodes, by_name, _ = self._args
            self._aliasing = set()
            for n in rules.topological_order(nodes):
                if n.op in rules.CONTROL_FLOW or (
                    n.op not in _FRESH
                    and any(
                        s in self._aliasing or by_name[s].output_types[p].is_ref_dtype
                        for s, p in n.inputs
                        if s in by_name
                    )
                ):
                    self._aliasing.add(n.name)
        return name in self._aliasing


def _bypass_identities(nodes: list[Node], keep: frozenset) -> list[Node]:
    by_name = {n.name: n for n in nodes}
    readers = rules.consumers_of(nodes)
    forward = {
        n.name: n.inputs[0]
        for n in nodes
        if bypassable_identity(n, by_name, readers.get(n.name), keep)
    }
    if not forward:
        return nodes

    def source(edge: tuple) -> tuple:
        while edge[0] in forward:
            edge = forward[edge[0]]
        return edge

    out = []
    for n in nodes:
        inputs = tuple(source(e) for e in n.inputs)
        out.append(n.replace(inputs=inputs) if inputs != n.inputs else n)
    return out


def bypassable_identity(n: Node, by_name, readers, keep, with_control: bool = False) -> bool:
    """Whether `readers` may read the input of Identity `n` instead. `with_control` admits an
    Identity that has or is a control input (dependency.py moves those edges to its readers)."""
    if n.op != "Identity" or n.name in keep or not readers or (n.control and not with_control):
        return False
    producer = by_name.get(n.inputs[0][0])
    if producer is None or producer.op in rules.CONTROL_FLOW or producer.device != n.device:
        return False
    if not rules.is_pure(n, by_name):
        return False
    return all(
        r.op not in rules.CONTROL_FLOW
        and not r.op.startswith("_")
        and (with_control or n.name not in r.control)
        and r.device == n.device
        for r in readers
    )

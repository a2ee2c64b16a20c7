"""Static shapes of a signature graph, as the runtime can prove them (TensorFlow's
GraphProperties::InferStatically), for the passes that fold shapes and simplify arithmetic.

The runtime runs the same OpDef shape functions the client ran while building the graph, but only
trusts what a step cannot change: constant values, the `shape` attr of a fed placeholder (the
Session refuses a feed whose shape is incompatible with it), variables' declared shapes, and what
shape functions derive from those. Every other fed tensor, and every loop variable (a Merge sees
its back edge only at run time), has an unknown shape.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import shapes
from flowgraph.runtime.nodes import Node
from flowgraph.runtime.passes.rules import topological_order

_UNKNOWN = shapes.TensorShape(None)
_PLACEHOLDERS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})
_MERGES = frozenset({"Merge", "RefMerge"})


def placeholder_shapes(graph: dict[str, Node], feeds) -> dict[str, shapes.TensorShape]:
    """{'x:0': shape attr} for each fed placeholder of `graph` (TF's assume_valid_feeds, which
    holds here because the Session checks every feed against that shape)."""
    out = {}
    for name in feeds:
        src, _, port = name.partition(":")
        n = graph.get(src)
        if n is not None and n.op in _PLACEHOLDERS and "shape" in n.attrs:
            out[f"{src}:{port or 0}"] = shapes.as_shape(n.attrs["shape"])
    return out


class _Context:
    """What a shape function reads (framework/apply_op.InferenceContext's interface), answered
    from the shapes and constant values known so far."""

    def __init__(self, node: Node, props: StaticShapes):
        self.name = node.name
        self.attrs = node.attrs
        self.inputs = node.inputs
        self.num_outputs = len(node.output_types)
        self.input_shapes = [props.shape(src, port) for src, port in node.inputs]
        self._props = props

    def attr(self, name):
        return self.attrs[name]

    def input_constant(self, i):
        return self._props.value(*self.inputs[i])

    def input_as_shape(self, i) -> shapes.TensorShape:
        return self._props.as_shape(*self.inputs[i])


class StaticShapes:
    """Shapes of the outputs of nodes recorded in topological order; `values` maps a node to
    the tuple of its constant output values, and passes may add to it as they fold."""

    def __init__(self, by_name: dict, values: dict, feed_shapes: dict):
        self._by_name = by_name
        self._values = values
        self._feed_shapes = feed_shapes
        self._shapes: dict[str, list] = {}

    def value(self, src: str, port: int):
        outs = self._values.get(src)
        return None if outs is None else outs[port]

    def shape(self, src: str, port: int) -> shapes.TensorShape:
        v = self.value(src, port)
        if v is not None:
            return shapes.TensorShape(np.shape(v))
        outs = self._shapes.get(src)
        return _UNKNOWN if outs is None or port >= len(outs) else outs[port]

    def as_shape(self, src: str, port: int) -> shapes.TensorShape:
        """A 1-D int tensor read as a partial shape (TF's constant_value_as_shape)."""
        n = self._by_name.get(src)
        if n is not None and n.op == "Shape" and self.value(src, port) is None:
            return self.shape(*n.inputs[0])
        if n is not None and n.op == "Pack" and self.value(src, port) is None:
            dims = [self.value(s, p) for s, p in n.inputs]
            return shapes.TensorShape([None if d is None or int(d) < 0 else int(d) for d in dims])
        if n is not None and n.op == "ConcatV2" and self.value(src, port) is None:
            out = shapes.TensorShape([])
            for s, p in n.inputs[:-1]:
                out = out.concatenate(self.as_shape(s, p))
            return out
        v = self.value(src, port)
        if v is not None:
            v = np.asarray(v)
            if v.ndim == 0:
                if int(v) == -1:
                    return _UNKNOWN
                raise ValueError(f"shape tensor {src}:{port} is a scalar")
            return shapes.TensorShape([None if int(d) < 0 else int(d) for d in v])
        t = self.shape(src, port).as_tuple()
        return shapes.unknown_shape(t[0] if t is not None and len(t) == 1 else None)

    def record(self, n: Node) -> None:
        """Infers and keeps the shapes of `n`'s outputs (its inputs must be recorded)."""
        if n.name in self._values or n.name in self._shapes:
            return
        self._shapes[n.name] = self._infer(n)

    def _infer(self, n: Node) -> list:
        count = len(n.output_types)
        if n.op == "_Recv" and n.attrs.get("client_terminated"):
            return [self._feed_shapes.get(n.attrs.get("tensor_name"), _UNKNOWN)]
        fn = n.op_def.shape_fn
        if fn is None or n.op in _MERGES or n.op.startswith("_"):
            return [_UNKNOWN] * count
        try:
            result = fn(_Context(n, self))
        except Exception:  # noqa: BLE001 - an inconsistent graph fails at run time, with context
            return [_UNKNOWN] * count
        if isinstance(result, shapes.TensorShape) or result is None:
            result = [result]
        result = list(result)[:count]
        result += [None] * (count - len(result))
        return [_UNKNOWN if s is None else shapes.as_shape(s) for s in result]


def infer(nodes: list[Node], feed_shapes: dict) -> StaticShapes:
    """The static shapes of every node of `nodes` (constants' values included)."""
    by_name = {n.name: n for n in nodes}
    props = StaticShapes(
        by_name, {n.name: (n.attrs["value"],) for n in nodes if n.op == "Const"}, feed_shapes
    )
    for n in topological_order(nodes):
        props.record(n)
    return props

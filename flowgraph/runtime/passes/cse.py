"""Common subexpression elimination (whitepaper §5.1): nodes with the same op, attrs, data
inputs, control inputs and requested device compute the same value, so all but one are dropped
and their consumers read the survivor. Never merged: stateful ops (random, variables, queues,
Send/Recv), control-flow ops (their identity is their frame), ops reading ref inputs (their value
depends on when they run), and nodes the caller must keep (targets)."""

from __future__ import annotations

import numpy as np

from flowgraph.runtime.nodes import Node
from flowgraph.runtime.passes.rules import is_pure


def _attr_key(value):
    """A hashable, exact fingerprint of a decoded attr value."""
    if isinstance(value, np.ndarray):
        return ("nd", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(_attr_key(v) for v in value))
    if isinstance(value, dict):
        return ("map", tuple(sorted((k, _attr_key(v)) for k, v in value.items())))
    try:
        hash(value)
    except TypeError:
        return ("repr", repr(value))
    return (type(value).__name__, value)


def eliminate_common_subexpressions(nodes: list[Node], keep: frozenset) -> list[Node]:
    """Returns `nodes` (topologically ordered) with duplicates removed and inputs rewired."""
    by_name = {n.name: n for n in nodes}
    survivor: dict[str, str] = {}  # removed node name -> the equal node kept
    seen: dict[tuple, str] = {}
    out = []
    for n in nodes:
        inputs = tuple((survivor.get(s, s), p) for s, p in n.inputs)
        control = tuple(dict.fromkeys(survivor.get(c, c) for c in n.control))
        if inputs != n.inputs or control != n.control:
            n = n.replace(inputs=inputs, control=control)
        if is_pure(n, by_name):
            key = (
                n.op,
                n.device,
                inputs,
                tuple(sorted(control)),
                tuple(sorted((k, _attr_key(v)) for k, v in n.attrs.items())),
            )
            other = seen.get(key)
            if other is not None and n.name not in keep:
                survivor[n.name] = other
                continue
            seen.setdefault(key, n.name)
        out.append(n)
    if not survivor:
        return out
    # graph order need not be topological (imported graphs, loop back edges): rewire late ones
    return [
        n.replace(
            inputs=tuple((survivor.get(s, s), p) for s, p in n.inputs),
            control=tuple(dict.fromkeys(survivor.get(c, c) for c in n.control)),
        )
        for n in out
    ]

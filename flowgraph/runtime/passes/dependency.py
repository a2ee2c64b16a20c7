"""Dependency optimization (TensorFlow Grappler's DependencyOptimizer): computations whose results
only gate other nodes are not run, and the no-ops and identities that only pass control edges
on go, their edges passed through.

`tf.gradients` gates each op's input gradients together (`gate_gradients=GATE_OP`: a `tuple` of
Identities behind a NoOp), so a training step also builds gradients nobody reads, such as the
first layer's gradient with respect to the fed images (a whole Conv2DBackpropInput) or the
labels' gradient of a cross-entropy: their only consumer is the gate's control edge.

    a pure node read only through control edges  -> NoOp (its data inputs become control inputs)
    NoOp(^a, ^b), not a target                    -> its readers wait for ^a and ^b themselves
    Identity(x, ^c)                               -> its readers read x and wait for ^c

A node made a NoOp is pure (rules.is_pure), not a target, and not an Assert or CheckNumerics
(running them is their point, as in Grappler). A NoOp is bypassed when that does not multiply
edges (inputs times readers at most inputs plus readers) and its inputs and readers share its
device (a control edge across devices costs a Send/Recv pair). An Identity follows the
arithmetic pass's rules (arithmetic.py) except that it may have control inputs. Graphs with
control flow are left alone: a Switch's output cannot be a control input, and a loop's frames
hang on the Identities and NoOps this would remove.
"""

from __future__ import annotations

from collections import Counter

from flowgraph.runtime.nodes import Node, make_node
from flowgraph.runtime.passes import rules
from flowgraph.runtime.passes.arithmetic import bypassable_identity

_KEEP_OPS = frozenset({"Assert", "CheckNumerics", "NoOp"})


def optimize_dependencies(nodes: list[Node], keep: frozenset) -> list[Node]:
    """Returns `nodes` with the rewrites above applied."""
    if any(n.op in rules.CONTROL_FLOW for n in nodes):
        return nodes
    out = _gates_to_noops(nodes, keep)
    out = _bypass_noops(out, keep)
    out = _bypass_identities(out, keep)
    return rules.live(out, rules.sinks(nodes) | set(keep))


def _gates_to_noops(nodes: list[Node], keep: frozenset) -> list[Node]:
    """Pure nodes nothing reads by a data edge become NoOps, readers first, so that a chain
    only a gate reads goes whole."""
    by_name = {n.name: n for n in nodes}
    data_readers = Counter(s for n in nodes for s, _ in n.inputs)
    changed = {}
    for n in reversed(rules.topological_order(nodes)):
        if (
            data_readers[n.name]
            or n.name in keep
            or n.op in _KEEP_OPS
            or not rules.is_pure(n, by_name)
        ):
            continue
        sources = [s for s, _ in n.inputs]
        changed[n.name] = make_node(
            n.name, "NoOp", control=dict.fromkeys(sources + list(n.control)), device=n.device
        )
        data_readers.subtract(sources)
    return [changed.get(n.name, n) for n in nodes]


def _bypass_noops(nodes: list[Node], keep: frozenset) -> list[Node]:
    """Removes the NoOps that only relay control edges (see the module docstring)."""
    by_name = {n.name: n for n in nodes}
    readers = rules.consumers_of(nodes)
    relayed: dict[str, tuple] = {}  # a removed NoOp -> the control inputs it stood for
    out = []
    for n in rules.topological_order(nodes):
        control = _expand(n.control, relayed)
        if n.op == "NoOp" and n.name not in keep and _relays(n, control, readers, by_name):
            relayed[n.name] = control
            continue
        out.append(n.replace(control=control) if control != n.control else n)
    order = {n.name: i for i, n in enumerate(nodes)}
    return sorted(out, key=lambda n: order[n.name]) if relayed else nodes


def _expand(control: tuple, relayed: dict) -> tuple:
    names = []
    for c in control:
        names.extend(relayed.get(c, (c,)))
    return tuple(dict.fromkeys(names))


def _relays(n: Node, control: tuple, readers: dict, by_name: dict) -> bool:
    out = readers.get(n.name, [])
    if not out or len(control) * len(out) > len(control) + len(out):
        return False
    return all(r.device == n.device for r in out) and all(
        by_name[c].device == n.device for c in control if c in by_name
    )


def _bypass_identities(nodes: list[Node], keep: frozenset) -> list[Node]:
    """Readers of a bypassable Identity read its input and wait for its control inputs."""
    by_name = {n.name: n for n in nodes}
    readers = rules.consumers_of(nodes)
    forward = {
        n.name: n
        for n in nodes
        if n.control and bypassable_identity(n, by_name, readers.get(n.name), keep, True)
    }
    if not forward:
        return nodes

    def source(edge: tuple, control: list) -> tuple:
        while edge[0] in forward:
            identity = forward[edge[0]]
            control.extend(identity.control)
            edge = identity.inputs[0]
        return edge

    out = []
    for n in nodes:
        if n.name in forward:
            out.append(n)  # unread now: rules.live drops it
            continue
        control: list = []
        inputs = tuple(source(e, control) for e in n.inputs)
        for c in n.control:
            control.append(source((c, 0), control)[0])
        while any(c in forward for c in control):
            waiting, control = control, []
            for c in waiting:
                control.append(source((c, 0), control)[0])
        control = tuple(dict.fromkeys(c for c in control if c != n.name))
        if inputs != n.inputs or control != n.control:
            n = n.replace(inputs=inputs, control=control)
        out.append(n)
    return out

"""The two halves of a training graph, as the memory optimizer sees them (whitepaper §4.1).

A forward activation that the backward pass reads stays in memory from its producer until its
last gradient consumer; recomputation and swapping both move that read to a copy made "just
before" the consumer. Which nodes are the backward pass is a naming fact, as in TensorFlow's
Grappler: `tf.gradients` builds them under the `gradients/` name scope
(RewriterConfig.memory_optimizer_target_node_name_scope changes it). "Just before" is a control
edge from the consumer's other backward inputs (the incoming gradient): the copy cannot start
before the gradient reaching that consumer exists.

Graphs with control flow: a copy runs once per step, in the root frame, so only a node that
does too is copied, and only for readers that do: a node is *pinned* when it is inside a loop's
frame, is a control-flow op, or reads one directly (a Switch's branch, a Merge's or an Exit's
consumer); a node that is pinned or has a pinned reader is neither recomputed nor swapped. In a
tf.cond branch a copy may be dead: it then reads what the original read and its reader is dead
too, as it would have been.

Every copy is triggered from the *first* backward consumer (in topological order) that reads it
directly or through other copies. Ordering the graph by topological index, with a copy sitting
just before its first consumer, every edge then runs forward, so these control edges never
close a cycle: a trigger is an input of that first consumer, hence earlier, and every other
consumer of the copy is later.
"""

from __future__ import annotations

from flowgraph.runtime.control_loops import FrameInfo
from flowgraph.runtime.nodes import Node
from flowgraph.runtime.passes import rules

DEFAULT_SCOPE = "gradients/"  # TensorFlow's default memory_optimizer_target_node_name_scope
_SHAPE_ONLY = frozenset({"Shape", "ShapeN", "Size", "Rank"})


class Backward:
    """A signature graph's topological order, its data readers and its backward nodes."""

    def __init__(self, nodes: list[Node], scope: str):
        self.scope = scope or DEFAULT_SCOPE
        self.order = rules.topological_order(nodes)
        self.index = {n.name: i for i, n in enumerate(self.order)}
        self.by_name = {n.name: n for n in nodes}
        self.readers: dict[str, list[Node]] = {}
        for n in self.order:
            for src in dict.fromkeys(s for s, _ in n.inputs):
                self.readers.setdefault(src, []).append(n)
        self.pinned = _pinned(nodes) if has_control_flow(nodes) else frozenset()

    def movable(self, name: str) -> bool:
        """Whether node `name` may be copied (recomputed, swapped): it and its data readers
        run once per step in the root frame (see the module docstring)."""
        return name not in self.pinned and not any(
            r.name in self.pinned for r in self.readers.get(name, ())
        )

    def is_target(self, name: str) -> bool:
        """Whether `name` is a backward node (Grappler's test: in the scope at any depth)."""
        return name.startswith(self.scope) or ("/" + self.scope) in name

    def uses(self, reader: Node) -> bool:
        """Whether `reader` is a backward node that needs a tensor's value, not only its shape:
        a gradient's Shape of a forward tensor (to undo broadcasting) runs as soon as that
        tensor exists, so it neither keeps it alive nor should wait for a copy."""
        return self.is_target(reader.name) and reader.op not in _SHAPE_ONLY

    def used_later(self, name: str) -> bool:
        """Whether the backward pass needs node `name`'s value."""
        return any(self.uses(r) for r in self.readers.get(name, ()))

    def trigger(self, target: Node, exclude: set) -> tuple:
        """Control inputs that hold a copy back until `target` is about to run: the producers
        of its backward data inputs (not in `exclude`, the copies themselves), else its backward
        control inputs; empty when it has neither (the copy then runs as soon as it can)."""
        data = [s for s, _ in target.inputs if self.is_target(s) and s not in exclude]
        if not data:
            data = [c for c in target.control if self.is_target(c) and c not in exclude]
        return tuple(dict.fromkeys(data))


def fresh_name(base: str, taken: set) -> str:
    """`base`, or `base_1`, `base_2`...: the first not in `taken` (which then holds it)."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def has_control_flow(nodes: list[Node]) -> bool:
    return any(n.op in rules.CONTROL_FLOW for n in nodes)


def _pinned(nodes: list[Node]) -> frozenset:
    """Nodes a copy cannot stand in for: in a loop's frame (a copy would need the iteration its
    reader runs in, which a control edge from outside cannot give), control-flow ops, and
    their direct readers."""
    frames = FrameInfo(nodes)
    flow = {n.name for n in nodes if n.op in rules.CONTROL_FLOW}
    return frozenset(
        n.name
        for n in nodes
        if frames.frame.get(n.name, "")
        or n.name in flow
        or any(s in flow for s, _ in n.inputs)
        or any(c in flow for c in n.control)
    )


def place_before(nodes: list[Node], extra: dict[str, list[Node]]) -> list[Node]:
    """`nodes` with each list `extra[name]` inserted just before node `name`. The executor's
    ready queue prefers nodes earlier in the graph, so a copy placed next to its consumer runs
    when the consumer is about to, not whenever nothing else is ready."""
    out = []
    for n in nodes:
        out.extend(extra.get(n.name, ()))
        out.append(n)
    return out

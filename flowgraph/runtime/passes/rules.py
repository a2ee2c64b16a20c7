"""What every graph pass must leave alone, and the graph walks the passes share.

A pass may only rewrite a node whose outputs are a pure function of its inputs: never a stateful
op (random, variables, queues, Send/Recv), a control-flow op (its identity is its frame and
iteration), an op reading a reference (its value depends on when it runs) or a runtime-internal
`_` op. The walks are over the pruned signature graph, whose node order need not be topological
(imported graphs, loop back edges), so order and liveness are computed here, not assumed.
"""

from __future__ import annotations

import heapq

from flowgraph.runtime.nodes import Node

CONTROL_FLOW = frozenset(
    {"Enter", "RefEnter", "Exit", "RefExit", "Merge", "RefMerge", "Switch", "RefSwitch",
     "NextIteration", "RefNextIteration", "LoopCond", "ControlTrigger"}
)  # fmt: skip
_BACK_EDGE = frozenset({"NextIteration", "RefNextIteration"})


def is_pure(n: Node, by_name: dict) -> bool:
    """A ref input is checked on the producer's output type: an op taking a plain tensor still
    reads a variable's buffer directly when it is fed the variable's ref output."""
    if n.op_def.is_stateful or n.op in CONTROL_FLOW or n.op.startswith("_"):
        return False
    if any(t.is_ref_dtype for t in n.input_types + n.output_types):
        return False
    return not any(
        src in by_name and by_name[src].output_types[port].is_ref_dtype for src, port in n.inputs
    )


def topological_order(nodes: list[Node]) -> list[Node]:
    """`nodes` ordered so every data and control input comes first, except a loop's back edge
    (NextIteration -> Merge); ties keep graph order, so an ordered graph keeps its order."""
    index = {n.name: i for i, n in enumerate(nodes)}
    pending = [0] * len(nodes)
    consumers: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for src in dict.fromkeys([s for s, _ in n.inputs] + list(n.control)):
            j = index.get(src)
            if j is not None and nodes[j].op not in _BACK_EDGE:
                pending[i] += 1
                consumers[j].append(i)
    ready = [i for i, p in enumerate(pending) if p == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(nodes[i])
        for c in consumers[i]:
            pending[c] -= 1
            if pending[c] == 0:
                heapq.heappush(ready, c)
    if len(order) < len(nodes):  # a cycle the executor will report; leave the order alone
        return list(nodes)
    return order


def consumers_of(nodes: list[Node]) -> dict[str, list[Node]]:
    """Node name -> the nodes reading it by a data or control edge."""
    out: dict[str, list[Node]] = {}
    for n in nodes:
        for src in dict.fromkeys([s for s, _ in n.inputs] + list(n.control)):
            out.setdefault(src, []).append(n)
    return out


def sinks(nodes: list[Node]) -> set[str]:
    """Nodes nothing reads: the fetch `_Send`s and the targets of the pruned graph."""
    read = {s for n in nodes for s, _ in n.inputs} | {c for n in nodes for c in n.control}
    return {n.name for n in nodes if n.name not in read}


def live(nodes: list[Node], roots: set[str]) -> list[Node]:
    """The nodes `roots` still need by data or control edges (what a rewrite left unread goes),
    in their order."""
    by_name = {n.name: n for n in nodes}
    seen = set()
    stack = [r for r in roots if r in by_name]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        n = by_name[name]
        stack.extend(s for s, _ in n.inputs if s not in seen)
        stack.extend(c for c in n.control if c not in seen)
    return [n for n in nodes if n.name in seen]


def only_reader(nodes: list[Node], keep: frozenset):
    """only_reader(n): the one node reading `n`'s output by its one data edge, if `n` may
    disappear (not kept, no control reader); else None."""
    readers: dict[str, list[tuple[Node, int]]] = {}
    control_read: set[str] = set()
    for n in nodes:
        for src, port in n.inputs:
            readers.setdefault(src, []).append((n, port))
        control_read.update(n.control)

    def only_reader(n: Node) -> Node | None:
        got = readers.get(n.name, [])
        if len(got) != 1 or n.name in keep or n.name in control_read:
            return None
        return got[0][0]

    return only_reader

"""Loops as blocks of a fixed schedule (whitepaper §4.4): the nodes of each loop frame in the
order one iteration runs them, so that a step can run a loop as a Python `while` over a
precomputed sequence instead of creating iteration states and counting pending inputs.

The dispatch loop (executor.py) learns the shape of a loop as it runs: a NextIteration value
creates the next iteration, an Exit value leaves the frame. For a well-formed loop (what
`while_loop` builds) that shape is static: every edge stays inside one frame, except an Enter's
input (from the parent frame) and an Exit's output (to it); a loop Merge joins one
non-constant Enter (iteration 0) and one NextIteration (every later iteration); constant
Enters are loop invariants. Then one iteration of a frame is a DAG once the NextIteration ->
Merge edges are cut, and its nodes can run in a fixed order; an inner loop is one item of
that order (its Enters' inputs in, its Exits' values out), as a nested `while`.

A block runs its items as the dispatch loop would if every kernel finished as it is called:
smallest node id first among the ready ones. Anything else (an edge that crosses frames another
way, a Merge fed by an Enter that is not a loop Merge, a NextIteration read by another node, a
cycle within an iteration) leaves the plan on the dispatch loop.
"""

from __future__ import annotations

import heapq

from flowgraph.runtime.control_loops import FrameInfo
from flowgraph.runtime.plan import ENTER, EXIT, MERGE, NEXT, ExecutorPlan

MAX_DEPTH = 8  # deeper loop nests run on the dispatch loop (Python allows 20 nested blocks)


class Block:
    """The nodes of one frame as one iteration runs them; the root frame's block is the step.

    `order` holds node ids and child Blocks (an inner loop runs as one item of its parent's
    iteration). A loop's `enters` run once when it starts, in the parent; `merges` maps each
    loop Merge to its (Enter, NextIteration); `exits` are the values it hands to the parent."""

    def __init__(self, frame: str, parent: Block | None):
        self.frame = frame
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.nodes: list[int] = []  # the frame's nodes but its Enters, Exits included
        self.enters: list[int] = []
        self.exits: list[int] = []
        self.nexts: list[int] = []
        self.merges: dict[int, tuple[int, int]] = {}
        self.children: list[Block] = []
        self.order: list = []

    @property
    def key(self) -> int:
        """Where the loop sorts among its parent's ready items: at its first Enter."""
        return min(self.enters)

    def walk(self):
        """This block and every block nested in it."""
        yield self
        for child in self.children:
            yield from child.walk()


def build(plan: ExecutorPlan) -> Block | None:
    """The root block of `plan` with its loops, or None when some loop is not well formed."""
    nodes = [item.node for item in plan.items]
    info = FrameInfo(nodes)
    index = {node.name: i for i, node in enumerate(nodes)}
    frames = [info.frame.get(node.name) for node in nodes]
    if None in frames:
        return None
    blocks = {"": Block("", None)}

    def block(frame: str) -> Block | None:
        b = blocks.get(frame)
        if b is None and frame in info.parent:
            parent = block(info.parent[frame])
            if parent is None:
                return None
            b = blocks[frame] = Block(frame, parent)
            parent.children.append(b)
        return b

    kinds = plan.kind
    for nid, node in enumerate(nodes):
        b = block(frames[nid])
        kind = kinds[nid]
        if b is None or (b.parent is None and kind in (ENTER, EXIT, NEXT)):
            return None
        if b.depth > MAX_DEPTH:
            return None
        if kind == ENTER:
            b.enters.append(nid)
        else:
            b.nodes.append(nid)
            if kind == EXIT:
                b.exits.append(nid)
            elif kind == NEXT:
                b.nexts.append(nid)
        for src in [s for s, _ in node.inputs] + list(node.control):
            if info.output_frame(nodes[index[src]]) != info.input_frame(node):
                return None  # an edge between frames that bypasses Enter and Exit
    for b in blocks.values():
        if not _find_merges(plan, b, index) or (b.parent is not None and not b.enters):
            return None
    root = blocks[""]
    for b in reversed(list(root.walk())):
        order = _order(plan, b, index)
        if order is None:
            return None
        b.order = order
    return root


def _find_merges(plan: ExecutorPlan, b: Block, index: dict[str, int]) -> bool:
    """Fills `b.merges`; False unless every Merge fed by an Enter or a NextIteration is a loop
    Merge (one non-constant Enter, one NextIteration, no control inputs) and non-constant
    Enters and NextIterations feed loop Merges only."""
    items, kinds = plan.items, plan.kind
    for nid in b.nodes:
        if kinds[nid] != MERGE:
            continue
        node = items[nid].node
        srcs = [index[s] for s, _ in node.inputs]
        src_kinds = [kinds[s] for s in srcs]
        if ENTER not in src_kinds and NEXT not in src_kinds:
            continue
        if sorted(src_kinds) != sorted([ENTER, NEXT]) or node.control:
            return False
        enter, nxt = (srcs[0], srcs[1]) if src_kinds[0] == ENTER else (srcs[1], srcs[0])
        if items[enter].node.attrs["is_constant"] or enter not in b.enters:
            return False
        b.merges[nid] = (enter, nxt)
    for nid in b.nexts + [e for e in b.enters if not items[e].node.attrs["is_constant"]]:
        if any(slot < 0 or dst not in b.merges for dst, slot, _ in plan.out_edges[nid]):
            return False
    return True


def _order(plan: ExecutorPlan, b: Block, index: dict[str, int]) -> list | None:
    """`b`'s items in the dispatch loop's order (smallest ready key first); None on a cycle."""
    item_of: dict[int, object] = {}  # node id -> the item of `b` that produces it
    for nid in b.nodes:
        item_of[nid] = nid
    for child in b.children:
        for x in child.exits:
            item_of[x] = child
    sources: dict[object, list[int]] = {}
    for nid in b.nodes:
        node = plan.items[nid].node
        if nid not in b.merges:  # a loop Merge reads the values its loop carries
            sources[nid] = [index[s] for s, _ in node.inputs] + [index[c] for c in node.control]
    for child in b.children:
        node_srcs = []
        for e in child.enters:
            node = plan.items[e].node
            node_srcs += [index[s] for s, _ in node.inputs] + [index[c] for c in node.control]
        sources[child] = node_srcs
    pending = {}
    consumers: dict[object, list] = {}  # node ids and Blocks as keys: never equal
    for item, srcs in sources.items():
        deps = [item_of[s] for s in srcs if s in item_of]  # others: this loop's Enters
        pending[item] = len(deps)
        for dep in deps:
            consumers.setdefault(dep, []).append(item)
    keyed = {(item if isinstance(item, int) else item.key): item for item in pending}
    keyed.update({nid: nid for nid in b.merges})
    ready = [key for key, item in keyed.items() if not pending.get(item, 0)]
    heapq.heapify(ready)
    order = []
    while ready:
        item = keyed[heapq.heappop(ready)]
        order.append(item)
        for dst in consumers.get(item, ()):
            pending[dst] -= 1
            if not pending[dst]:
                heapq.heappush(ready, dst if isinstance(dst, int) else dst.key)
    return order if len(order) == len(keyed) else None

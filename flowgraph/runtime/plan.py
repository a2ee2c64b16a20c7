"""The executor's plan (whitepaper §3.1): one device's graph compiled once per signature.

Kernels are bound to their nodes, every data edge gets an input slot in its consumer and
every node its pending count (data and control inputs not yet produced). The executor
(executor.py) runs a step of a plan; everything here is built once per (feeds, fetches,
targets) signature, so a step allocates only its iteration states and its rendezvous.
"""

from __future__ import annotations

import functools

from flowgraph.core import errors
from flowgraph.core.dead_value import DEAD
from flowgraph.kernels.base import KernelContext, bind, find_kernel
from flowgraph.runtime.nodes import Node

INLINE, EXPENSIVE, ASYNC = 0, 1, 2
NOT_BUILT = object()  # a plan's schedule before its first step (the executor builds it)
CONTROL_FLOW_OPS = frozenset(
    {
        "Switch",
        "RefSwitch",
        "Merge",
        "RefMerge",
        "Enter",
        "RefEnter",
        "Exit",
        "RefExit",
        "NextIteration",
        "RefNextIteration",
        "LoopCond",
        "ControlTrigger",
    }
)


class NodeItem:
    """The static facts the executor needs about one node."""

    __slots__ = (
        "base",
        "compute",
        "ctx",
        "id",
        "inputs",
        "kind",
        "node",
        "num_outputs",
        "out_edges",
        "step_arg",
    )

    def __init__(self, nid: int, node: Node):
        self.id = nid
        self.node = node
        self.compute = None  # kernel with its context bound
        self.inputs: list[int] = []  # slot of each data input
        self.base = 0  # slot of output 0
        self.num_outputs = len(node.output_types)
        self.out_edges: list[int] = []  # consumer node ids, one per data or control edge
        self.kind = INLINE
        self.step_arg = False  # kernel wants the Step as first argument
        self.ctx = None


def _deref(compute, positions, offset):
    """Wraps a kernel so reference inputs at `positions` are read (FailedPrecondition if unset);
    its inputs start at argument `offset` (after the step and an async kernel's done)."""

    def run(*args):
        args = list(args)
        for p in positions:
            if args[p + offset] is not DEAD:  # a dead _Send still runs, to pass the deadness on
                args[p + offset] = args[p + offset].read()
        return compute(*args)

    return run


NORMAL, MERGE, ENTER, EXIT, NEXT, SWITCH, TRIGGER, SEND, RECV, FORWARD = range(10)
_FORWARDING = frozenset({"Identity", "LoopCond", "StopGradient", "Snapshot"})  # output = input
FRAME_KINDS = {
    "Merge": MERGE,
    "RefMerge": MERGE,
    "Enter": ENTER,
    "RefEnter": ENTER,
    "Exit": EXIT,
    "RefExit": EXIT,
    "NextIteration": NEXT,
    "RefNextIteration": NEXT,
    "Switch": SWITCH,
    "RefSwitch": SWITCH,
    "ControlTrigger": TRIGGER,
    "_Send": SEND,
    "_Recv": RECV,
}


class ExecutorPlan:
    """One device's nodes, compiled: kernels bound, edges, pending counts and input slots.

    Values are kept in each consumer's input slots (`in_base[n]` .. `in_end[n]`) of the
    iteration they belong to, because an edge may cross frames and iterations (frames.py);
    `out_edges[n]` lists (consumer, its input slot or -1 for a control edge, output port)."""

    def __init__(self, nodes: list[Node], device):
        self.device = device
        self.items = [NodeItem(i, n) for i, n in enumerate(nodes)]
        n = len(nodes)
        index = {node.name: i for i, node in enumerate(nodes)}
        slot = 0
        for item in self.items:
            item.base = slot
            slot += item.num_outputs
        self.num_slots = slot  # producer slots: only function.py's inline runner uses them
        self.pending = [0] * n  # plain data + control counts (function.py's inline order)
        self.has_control_flow = False
        self.kind = [FRAME_KINDS.get(node.op, NORMAL) for node in nodes]
        self.in_base, self.in_end = [0] * n, [0] * n
        slot = 0
        for item in self.items:
            self.in_base[item.id] = slot
            slot += len(item.node.inputs)
            self.in_end[item.id] = slot
        self.num_inputs = slot
        self.num_data = [len(node.inputs) for node in nodes]
        self.clear = [(None,) * len(node.inputs) for node in nodes]
        self.out_edges = [[] for _ in range(n)]
        self.frame_pending = [0] * n
        self.enter_counts: dict[str, int] = {}  # frame name -> its Enters (iteration 0 waits)
        for item in self.items:
            node = item.node
            deref = []
            for pos, ((src, port), want) in enumerate(zip(node.inputs, node.input_types)):
                producer = self.items[index[src]]
                item.inputs.append(producer.base + port)
                producer.out_edges.append(item.id)
                self.out_edges[producer.id].append((item.id, self.in_base[item.id] + pos, port))
                if producer.node.output_types[port].is_ref_dtype and not want.is_ref_dtype:
                    deref.append(pos)
            for c in node.control:
                self.items[index[c]].out_edges.append(item.id)
                self.out_edges[index[c]].append((item.id, -1, 0))
            self.pending[item.id] = len(node.inputs) + len(node.control)
            if self.kind[item.id] == MERGE:
                # Merge: control inputs count twice; the low bit is cleared by the first live input
                self.frame_pending[item.id] = (len(node.control) << 1) | 1
            else:
                self.frame_pending[item.id] = self.pending[item.id]
            if node.op in CONTROL_FLOW_OPS:
                self.has_control_flow = True
            if self.kind[item.id] == ENTER:
                name = node.attrs["frame_name"]
                self.enter_counts[name] = self.enter_counts.get(name, 0) + 1
            self._bind(item, deref)
            if node.op in _FORWARDING and isinstance(item.compute, functools.partial):
                self.kind[item.id] = FORWARD  # plain forwarders skip the kernel call
        self.roots = [i.id for i in self.items if self.pending[i.id] == 0]
        self.frame_roots = [i for i in range(n) if self.frame_pending[i] == 0]
        # A node is `simple` when the loop may propagate its live outputs inline: an ordinary
        # kernel, a forwarder or a Merge, none of whose consumers is a Merge (which fires on
        # its first live input).
        self.simple = [
            self.kind[i] in (NORMAL, FORWARD, MERGE)
            and all(self.kind[d] != MERGE for d, _, _ in self.out_edges[i])
            for i in range(n)
        ]
        self.shift = max(n, 1).bit_length()  # ready entries: iteration key << shift | node id
        self.mask = (1 << self.shift) - 1
        self.schedule = NOT_BUILT  # the fixed schedule of untraced steps (schedule.py), or None
        # What the executor's loop reads, in one tuple (one attribute load per step).
        self.tables = (
            self.items,
            self.kind,
            self.simple,
            self.out_edges,
            self.in_base,
            self.in_end,
            self.clear,
            self.shift,
            self.mask,
        )

    def _bind(self, item: NodeItem, deref: list[int]):
        node = item.node
        try:
            kdef = find_kernel(node.op, self.device.device_type, node.attrs)
        except errors.NotFoundError as e:
            raise errors.NotFoundError(
                None, None, f"{e.message}\n\t [[node {node.name} on {self.device.name}]]"
            ) from None
        item.ctx = KernelContext(
            node.name, node.op, node.attrs, self.device, node.input_types, node.output_types
        )
        item.compute = bind(kdef, item.ctx)
        item.step_arg = kdef.step or kdef.async_
        item.kind = ASYNC if kdef.async_ else EXPENSIVE if kdef.expensive else INLINE
        if deref:
            offset = 2 if kdef.async_ else 1 if kdef.step else 0
            item.compute = _deref(item.compute, deref, offset)

"""Scheduling of Recv nodes (whitepaper §5.2): a receive starts as late as possible, so a large
tensor from another device does not sit in this device's memory long before its use.

"We attempt to avoid this situation by computing an as-soon-as-possible / as-late-as-possible
(ASAP/ALAP) schedule of the graph ... the analysis of critical paths of graphs, in order to
estimate when to start the Receive nodes. We then insert control edges with the aim of delaying
the start of these nodes until just before their results are needed."

The cost model simulates the placed graph once (ASAP: start and finish of every node, each device
running one node at a time); ALAP times then run backwards from the makespan over the same
estimates. A cross-device `_Recv` whose consumers' latest start, less its transfer time, is later
than some other node of its device finishes gets a control edge from the last such node: it then
starts just before it is needed. A candidate that depends on the received value (a descendant of
its consumers, across devices too) would deadlock, so it is never chosen; nor is one that waits
for a feed or a blocking kernel (a queue's Dequeue) that the consumers do not wait for already,
since a partial run or another step may need the received value first. Graphs with control
flow are left alone: their frames make "later" a matter of iterations, which this schedule does
not model (TensorFlow's version had the same restriction).
"""

from __future__ import annotations

from flowgraph.core import errors
from flowgraph.core.device_spec import parse
from flowgraph.kernels.base import find_kernel
from flowgraph.runtime.cost_model import CostModel, Schedule, simulate
from flowgraph.runtime.nodes import Node

_CONTROL_FLOW = frozenset(
    {"Enter", "RefEnter", "Exit", "RefExit", "Merge", "RefMerge", "Switch", "RefSwitch",
     "NextIteration", "RefNextIteration", "LoopCond", "ControlTrigger"}
)  # fmt: skip


def latest_starts(nodes: list[Node], model: CostModel, sched: Schedule) -> dict[str, float]:
    """ALAP: the latest start of each node that keeps every consumer's latest start (and the
    makespan) on time, with the devices and estimates of the ASAP schedule."""
    by_name = {n.name: n for n in nodes}
    latest: dict[str, float] = {}
    makespan = sched.makespan
    for name in reversed(list(sched.finish)):  # simulated order is topological
        node = by_name[name]
        deadline = makespan
        for c in sched.consumers[name]:
            consumer = by_name[c]
            nbytes = max(
                [model.output_bytes(name, p) for s, p in consumer.inputs if s == name] or [0.0]
            )
            deadline = min(
                deadline, latest[c] - model.transfer_us(nbytes, sched.device[name], sched.device[c])
            )
        latest[name] = deadline - model.compute_us(node, sched.device[name])
    return latest


def schedule_recvs(
    nodes: list[Node], parts: dict[str, list[Node]], model: CostModel
) -> dict[str, list[Node]]:
    """Returns `parts` (partition.py's output for the placed `nodes`) with a control edge added
    to each cross-device `_Recv` that can start later than it would by itself."""
    if any(n.op in _CONTROL_FLOW for n in nodes):
        return parts
    sched = simulate(nodes, model)
    latest = latest_starts(nodes, model, sched)
    original = {n.name for n in nodes}
    sources = _sent_tensors(parts, original)
    gates = _gates(nodes, sched)
    out = {}
    for device, part in parts.items():
        candidates = sorted(
            (sched.finish[n.name], n.name) for n in part if n.name in original
        )  # this device's own nodes, by when they finish
        changed = {}
        for recv in part:
            if recv.op != "_Recv" or recv.control or recv.attrs.get("client_terminated"):
                continue
            src = sources.get(recv.attrs["tensor_name"])
            users = _users(recv.name, part, original)
            if src is None or not users:
                continue  # a control edge's dummy value (nothing to hold in memory)
            moved = model.transfer_us(model.output_bytes(*src), sched.device[src[0]], device)
            due = min(latest[u] for u in users) - moved
            excluded = _descendants(users, sched.consumers)
            allowed = frozenset.intersection(*(gates[u] for u in users))
            excluded.update(n for _, n in candidates if not gates[n] <= allowed)
            after = _last_before(candidates, due, excluded)
            if after is not None:
                changed[recv.name] = recv.replace(control=(after,))
        out[device] = [changed.get(n.name, n) for n in part]
    return out


def _sent_tensors(parts: dict, original: set) -> dict[str, tuple]:
    """Rendezvous tensor name -> the (node, port) of the graph whose value it carries; a
    compressing Cast the partitioner put before the _Send is looked through."""
    by_name = {n.name: n for part in parts.values() for n in part}
    sent = {}
    for part in parts.values():
        for n in part:
            if n.op != "_Send" or n.attrs.get("client_terminated"):
                continue
            src, port = n.inputs[0]
            if src not in original and by_name[src].op == "Cast":
                src, port = by_name[src].inputs[0]
            if src in original:
                sent[n.attrs["tensor_name"]] = (src, port)
    return sent


def _users(recv: str, part: list[Node], original: set) -> list[str]:
    """The graph's nodes that read what `recv` received, looking through the partitioner's
    decompressing Cast."""
    readers = {recv}
    users = []
    for n in part:  # partition output lists a node after its same-device producers
        if any(src in readers for src, _ in n.inputs):
            if n.name in original:
                users.append(n.name)
            else:
                readers.add(n.name)
    return users


def _gates(nodes: list[Node], sched: Schedule) -> dict[str, frozenset]:
    """Node name -> the feeds and blocking (asynchronous, e.g. Dequeue) nodes it waits for."""
    by_name = {n.name: n for n in nodes}
    gates: dict[str, frozenset] = {}
    for name in sched.finish:  # topological
        node = by_name[name]
        own = {name} if _blocks(node) else set()
        preds = [s for s, _ in node.inputs] + list(node.control)
        gates[name] = frozenset(own.union(*(gates.get(p, ()) for p in preds)))
    return gates


def _blocks(node: Node) -> bool:
    """A feed, or a kernel that may wait on something outside the graph (an async kernel
    other than a cross-device _Recv, whose wait the graph's edges already describe)."""
    if node.op == "_Recv":
        return bool(node.attrs.get("client_terminated"))
    try:
        return find_kernel(node.op, parse(node.device).device_type, node.attrs).async_
    except errors.NotFoundError:
        return False


def _descendants(roots: list[str], consumers: dict) -> set[str]:
    seen = set(roots)
    stack = list(roots)
    while stack:
        for c in consumers[stack.pop()]:
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


def _last_before(candidates: list, due: float, excluded: set) -> str | None:
    """The node (of `candidates`, sorted by finish) finishing last no later than `due`."""
    best = None
    for finish, name in candidates:
        if finish > due:
            break
        if name not in excluded:
            best = name
    return best

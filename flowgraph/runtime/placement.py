"""Node placement (whitepaper §3.2.1, §4.3): give every node one device.

Constraints come from the user's partial device specs (`tf.device`), colocation groups
(`_class: loc:@x`), and the rule that an op taking a reference or resource input runs where the
referenced variable (or other resource) lives. Colocated nodes are merged with union-find; the
devices that satisfy every member's spec and have a kernel for every member are the group's
feasible devices, a GPU before a CPU, as in TensorFlow.

By default each group gets its first feasible device (TensorFlow's placer). With a cost model
(cost_model.py) the paper's simulated execution chooses instead: "For nodes with multiple
feasible devices, the placement algorithm uses a greedy heuristic that examines the effects on
the completion time of the node of placing the node on each possible device ... The device where
the node's operation would finish the soonest is selected." Nodes are simulated in the order they
become ready; each device runs one node at a time; an input from another device arrives after its
Send/Recv transfer time. A group is placed with its first member to be simulated, and later
members follow it.
"""

from __future__ import annotations

import dataclasses
import sys

from flowgraph.core import dtypes, errors
from flowgraph.core.device_spec import DeviceSpec, parse
from flowgraph.kernels.base import has_kernel
from flowgraph.runtime.cost_model import CostModel, simulate
from flowgraph.runtime.nodes import Node

_TYPE_PRIORITY = {"GPU": 0, "CPU": 1}


@dataclasses.dataclass(frozen=True)
class PlacementOptions:
    devices: tuple  # the Device objects available, in their canonical order
    allow_soft_placement: bool = False
    log_device_placement: bool = False
    cost_model: CostModel | None = None  # None: first feasible device (TensorFlow's placer)


class _UnionFind:
    def __init__(self, names):
        self.parent = {n: n for n in names}

    def find(self, x):
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _groups(nodes: list[Node]) -> dict[str, list[Node]]:
    by_name = {n.name: n for n in nodes}
    uf = _UnionFind(by_name)
    for n in nodes:
        for entry in n.attrs.get("_class", ()):
            if entry.startswith("loc:@") and entry[5:] in by_name:
                uf.union(entry[5:], n.name)
        for (src, port), t in zip(n.inputs, n.input_types):
            if (t.is_ref_dtype or t.base_dtype == dtypes.resource) and src in by_name:
                if _client_terminated(n) or _client_terminated(by_name[src]):
                    continue  # a fed or fetched handle is a value: it travels to its user
                uf.union(src, n.name)  # state is used where it lives
    groups: dict[str, list[Node]] = {}
    for n in nodes:
        groups.setdefault(uf.find(n.name), []).append(n)
    return groups


def _client_terminated(n: Node) -> bool:
    return n.op in ("_Send", "_Recv") and bool(n.attrs.get("client_terminated"))


def movable(nodes: list[Node]) -> set[str]:
    """Names of the nodes that may change device between steps: those whose colocation group
    holds no stateful op (a variable, a queue, a random op keeps its device and its state)."""
    return {
        n.name
        for members in _groups(nodes).values()
        if not any(m.op_def.is_stateful for m in members)
        for n in members
    }


def place(nodes: list[Node], opts: PlacementOptions, lenient: bool = False) -> list[Node]:
    """Returns the nodes with `device` set to a full device name.

    With `lenient`, a group that cannot be placed keeps its requested device instead of raising:
    the whole graph is placed once so every Run sees the same devices (a variable must not move
    between runs), while a node that has no kernel only fails when a Run actually needs it."""
    groups = _groups(nodes)
    feasible: dict[str, list[str]] = {}
    for root, members in groups.items():
        try:
            feasible[root] = [d.name for d in _feasible(members, opts)]
        except errors.InvalidArgumentError:
            if not lenient:
                raise
    notes: dict[str, str] = {}
    if opts.cost_model is not None:
        assigned = _simulate(nodes, groups, feasible, opts.cost_model, notes)
    else:
        assigned = {n.name: feasible[r][0] for r, ms in groups.items() if r in feasible for n in ms}
    if opts.log_device_placement:  # TF1 prints the mapping to stderr when asked to
        for n in nodes:
            if n.name in assigned:
                sys.stderr.write(f"{n.name}: ({n.op}): {assigned[n.name]}{notes.get(n.name, '')}\n")
    return [
        n.replace(device=assigned[n.name])
        if n.name in assigned and n.device != assigned[n.name]
        else n
        for n in nodes
    ]


def _simulate(nodes, groups, feasible, model: CostModel, notes: dict) -> dict[str, str]:
    """The paper's greedy simulated execution; returns node name -> device. Nodes of groups
    with no feasible device are left out; `notes` gets each decision's estimates for the log.
    A group goes where its first simulated member finishes soonest; the others follow it."""
    group_of = {n.name: root for root, members in groups.items() for n in members}
    group_device: dict[str, str] = {}

    def candidates(node: Node):
        root = group_of[node.name]
        if root in group_device:
            return (group_device[root],)
        return feasible.get(root) or (node.device,)

    def placed(node: Node, device: str, ends: list):
        root = group_of[node.name]
        if root in feasible and root not in group_device:
            group_device[root] = device
            if len(ends) > 1:
                alternatives = ", ".join(f"{d.rsplit('/', 1)[-1]} {t:.1f}" for t, d in ends)
                notes[node.name] = (
                    f" (cost model: finishes at {min(ends)[0]:.1f} us; {alternatives})"
                )

    simulate(nodes, model, candidates, placed)
    out = {}
    for root, members in groups.items():
        if root in feasible:  # a node never simulated (a malformed cycle): its group's device
            device = group_device.get(root, feasible[root][0])
            out.update((n.name, device) for n in members)
    return out


def _feasible(members: list[Node], opts: PlacementOptions) -> list:
    """The devices a group may run on, preferred first; InvalidArgumentError if none."""
    spec = DeviceSpec()
    for n in members:
        s = parse(n.device)
        if not spec.is_compatible_with(s):
            if not opts.allow_soft_placement:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Cannot colocate nodes {', '.join(repr(m.name) for m in members)}: "
                    "conflicting "
                    f"device specifications '{spec}' and '{s}'",
                )
            continue
        spec = spec.merge_from(s)
    candidates = [d for d in opts.devices if spec.is_compatible_with(d.spec)]
    supported = [
        d for d in candidates if all(has_kernel(n.op, d.device_type, n.attrs) for n in members)
    ]
    if not supported and opts.allow_soft_placement:
        spec = DeviceSpec(job=spec.job, replica=spec.replica, task=spec.task)
        supported = [
            d
            for d in opts.devices
            if spec.is_compatible_with(d.spec)
            and all(has_kernel(n.op, d.device_type, n.attrs) for n in members)
        ]
    if not supported:
        first = members[0]
        if not candidates:
            why = (
                f"no devices matching that specification are registered in this process; "
                f"available devices: {', '.join(d.name for d in opts.devices)}"
            )
        else:
            missing = [
                n
                for n in members
                if not any(has_kernel(n.op, d.device_type, n.attrs) for d in candidates)
            ]
            why = (
                f"no supported kernel for {spec.device_type or 'any'} devices is available for "
                f"{', '.join(repr(n.name) + ' (' + n.op + ')' for n in missing)}"
            )
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Cannot assign a device for operation '{first.name}': Could not satisfy explicit "
            "device "
            f"specification '{spec}' because {why}",
        )
    supported.sort(key=lambda d: _TYPE_PRIORITY.get(d.device_type, 2))
    return supported

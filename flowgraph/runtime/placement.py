"""Node placement (whitepaper §3.2.1, §4.3): give every node one device.

Constraints come from the user's partial device specs (`tf.device`), colocation groups
(`_class: loc:@x`), and the rule that an op taking a reference or resource input runs where the
referenced variable (or other resource) lives. Colocated nodes are merged with union-find; each
group then gets the first
device that satisfies every member's spec and has a kernel for every member. Among the devices
that qualify, a GPU is preferred to a CPU, as in TensorFlow.
"""

from __future__ import annotations

import dataclasses
import sys

from flowgraph.core import dtypes, errors
from flowgraph.core.device_spec import DeviceSpec, parse
from flowgraph.kernels.base import has_kernel
from flowgraph.runtime.graph import Node

_TYPE_PRIORITY = {"GPU": 0, "CPU": 1}


@dataclasses.dataclass(frozen=True)
class PlacementOptions:
    devices: tuple  # the Device objects available, in their canonical order
    allow_soft_placement: bool = False
    log_device_placement: bool = False


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
                uf.union(src, n.name)  # state is used where it lives
    groups: dict[str, list[Node]] = {}
    for n in nodes:
        groups.setdefault(uf.find(n.name), []).append(n)
    return groups


def place(nodes: list[Node], opts: PlacementOptions, lenient: bool = False) -> list[Node]:
    """Returns the nodes with `device` set to a full device name.

    With `lenient`, a group that cannot be placed keeps its requested device instead of raising:
    the whole graph is placed once so every Run sees the same devices (a variable must not move
    between runs), while a node that has no kernel only fails when a Run actually needs it."""
    assigned: dict[str, str] = {}
    for members in _groups(nodes).values():
        try:
            device = _choose(members, opts)
        except errors.InvalidArgumentError:
            if not lenient:
                raise
            continue
        for n in members:
            assigned[n.name] = device
    if opts.log_device_placement:  # TF1 prints the mapping to stderr when asked to
        for n in nodes:
            if n.name in assigned:
                sys.stderr.write(f"{n.name}: ({n.op}): {assigned[n.name]}\n")
    return [
        n.replace(device=assigned[n.name])
        if n.name in assigned and n.device != assigned[n.name]
        else n
        for n in nodes
    ]


def _choose(members: list[Node], opts: PlacementOptions) -> str:
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
    return supported[0].name

"""Feeds and fetches that travel in the RunGraph of the task that uses them (whitepaper §3.3).

partial_execution.rewrite puts a feed's `_Recv` and a fetch's `_Send` (client-terminated) on
the client device. When a fed tensor is used only on another task's device, or a fetched one is
made there, that costs a step two more sequential round trips: the other task's RecvTensor of
the feed from the client's worker, and the client's worker's RecvTensor of the fetch. Moving
the terminal node to the device that uses or makes the tensor lets the master send the feed in
that task's RunGraphRequest.send and read the fetch from its RunGraphResponse.recv (TF's own
fields); a step that runs only there is then one RunGraph and nothing else.

A moved node's key names its new device at both ends, as a client-terminated key does, so the
worker holding it serves it from its own rendezvous. Only CPU devices take them (every device
has _Send/_Recv kernels on the host; a feed's memory is the host's).
"""

from __future__ import annotations

from flowgraph.runtime.nodes import Node


def _is_terminal(n: Node, op: str) -> bool:
    return n.op == op and bool(n.attrs.get("client_terminated"))


def colocate(nodes: list[Node], client: str, incarnations: dict, takes) -> list[Node]:
    """The nodes with each feed _Recv moved to the one device that uses its value (if a single
    device other than `client` does) and each fetch _Send to the device of its input;
    `takes(device)` says whether a device may hold them."""
    feeds = {n.name for n in nodes if _is_terminal(n, "_Recv")}
    users: dict[str, set] = {name: set() for name in feeds}
    for n in nodes:
        for src in [s for s, _ in n.inputs] + list(n.control):
            if src in feeds:
                users[src].add(n.device)
    moved = {}
    for name, devices in users.items():
        if len(devices) == 1:
            (device,) = devices
            if device != client and takes(device):
                moved[name] = device
    device_of = {n.name: moved.get(n.name, n.device) for n in nodes}
    out = []
    for n in nodes:
        device = moved.get(n.name)
        if device is None and _is_terminal(n, "_Send"):
            device = device_of[n.inputs[0][0]]
            if device == client or not takes(device):
                device = None
        out.append(n if device is None else _at(n, device, incarnations[device]))
    return out


def _at(n: Node, device: str, incarnation: int) -> Node:
    attrs = dict(n.attrs)
    attrs.update(send_device=device, recv_device=device, send_device_incarnation=incarnation)
    return n.replace(device=device, attrs=attrs)


def terminal_devices(nodes: list[Node], op: str) -> dict[str, str]:
    """Tensor name ('x:0') -> the device of its client-terminated `op` (_Recv: feeds)."""
    return {n.attrs["tensor_name"]: n.device for n in nodes if _is_terminal(n, op)}

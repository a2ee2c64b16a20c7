"""Partial execution (whitepaper §4.2): rewrite feeds and fetches into rendezvous-backed nodes,
then prune the graph to what the fetches and targets need.

Every fed tensor is replaced by a `_Recv` node whose value the client puts in the rendezvous, so
everything upstream of a fed tensor is cut off; every fetched tensor gets a `_Send` node that
leaves its value there. Only the transitive closure of the fetches and targets runs.
"""

from __future__ import annotations

from typing import NamedTuple

from flowgraph.core import errors
from flowgraph.core.rendezvous_keys import make_key
from flowgraph.runtime.nodes import Node, make_node, parse_input


class Signature(NamedTuple):
    """What a Run asks for; everything derived from it is cached (DESIGN decision 4). A
    NamedTuple: built and hashed on every Run, where a frozen dataclass costs a microsecond."""

    feeds: tuple[str, ...]
    fetches: tuple[str, ...]
    targets: tuple[str, ...]


def feed_key(client_device: str, incarnation: int, tensor: str) -> str:
    """The key under which the client sends a feed or receives a fetch (the client's device is
    both ends, as for TF's client-terminated Send/Recv)."""
    return make_key(client_device, incarnation, client_device, tensor)


def _tensor_name(name: str) -> tuple[str, int]:
    src, port = parse_input(name)
    return src, port


def rewrite(
    graph: dict[str, Node], sig: Signature, client_device: str, incarnation: int
) -> list[Node]:
    """Returns the pruned node list (in graph order) with feed `_Recv` and fetch `_Send` nodes."""
    fed = {}
    for name in sig.feeds:
        src, port = _tensor_name(name)
        node = graph.get(src)
        if node is None or port >= len(node.output_types):
            raise errors.NotFoundError(None, None, f"Feed tensor '{name}' is not in the graph")
        fed[(src, port)] = make_node(
            f"_recv_{src}_{port}",
            "_Recv",
            device=client_device,
            attrs={
                "tensor_type": node.output_types[port].base_dtype,
                "tensor_name": f"{src}:{port}",
                "send_device": client_device,
                "send_device_incarnation": incarnation,
                "recv_device": client_device,
                "client_terminated": True,
            },
        )
    sends = []
    for name in sig.fetches:
        src, port = _tensor_name(name)
        node = graph.get(src)
        if node is None or port >= len(node.output_types):
            raise errors.NotFoundError(None, None, f"Fetch tensor '{name}' is not in the graph")
        recv = fed.get((src, port))
        inp = (recv.name, 0) if recv is not None else (src, port)
        sends.append(
            make_node(
                f"_send_{src}_{port}",
                "_Send",
                inputs=[inp],
                device=client_device,
                attrs={
                    "T": node.output_types[port].base_dtype,
                    "tensor_name": f"{src}:{port}",
                    "send_device": client_device,
                    "send_device_incarnation": incarnation,
                    "recv_device": client_device,
                    "client_terminated": True,
                },
            )
        )
    for name in sig.targets:
        if name not in graph:
            raise errors.NotFoundError(None, None, f"Target node '{name}' is not in the graph")
    needed = _reachable(graph, fed, [s.inputs[0] for s in sends], sig.targets)
    out = [r for r in fed.values() if r.name in needed]
    for node in graph.values():
        if node.name not in needed:
            continue
        if any(inp in fed for inp in node.inputs):
            node = node.replace(
                inputs=tuple((fed[i].name, 0) if i in fed else i for i in node.inputs)
            )
        if any(_fed_placeholder(graph, fed, c) for c in node.control):
            node = node.replace(control=tuple(_control_source(graph, fed, c) for c in node.control))
        out.append(node)
    return out + sends


def _fed_placeholder(graph, fed, name: str) -> bool:
    """A fed Placeholder never runs, so its control edges leave from its feed's _Recv (as in TF)."""
    return (name, 0) in fed and graph[name].op in ("Placeholder", "PlaceholderV2")


def _control_source(graph, fed, name: str) -> str:
    return fed[(name, 0)].name if _fed_placeholder(graph, fed, name) else name


def _reachable(graph, fed, fetch_inputs, targets) -> set[str]:
    """Names of the nodes the fetches and targets depend on, not looking past fed tensors."""
    recv_by_name = {r.name: r for r in fed.values()}
    needed: set[str] = set()
    stack = [src for src, _ in fetch_inputs] + list(targets)
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed.add(name)
        if name in recv_by_name:
            continue
        node = graph[name]
        for inp in node.inputs:
            stack.append(fed[inp].name if inp in fed else inp[0])
        stack.extend(_control_source(graph, fed, c) for c in node.control)
    return needed

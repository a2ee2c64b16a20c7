"""Partial execution (whitepaper §4.2): rewrite feeds and fetches into rendezvous-backed nodes,
then prune the graph to what the fetches and targets need.

Every fed tensor is replaced by a `_Recv` node whose value the client puts in the rendezvous, so
everything upstream of a fed tensor is cut off; every fetched tensor gets a `_Send` node that
leaves its value there. A callable's tensor connection (TF's CallableOptions.tensor_connection)
feeds a tensor from another tensor of the same step: the consumers of `to` read `from`
instead, without a round trip to the client. Only the transitive closure of the fetches and
targets runs.
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
    connections: tuple[tuple[str, str], ...] = ()  # (from tensor, to tensor) of a callable


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
    subst = {key: (recv.name, 0) for key, recv in fed.items()}  # what a consumer reads instead
    subst.update(_connections(graph, sig.connections, fed))
    sends = []
    for name in sig.fetches:
        src, port = _tensor_name(name)
        node = graph.get(src)
        if node is None or port >= len(node.output_types):
            raise errors.NotFoundError(None, None, f"Fetch tensor '{name}' is not in the graph")
        inp = subst.get((src, port), (src, port))
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
    needed = _reachable(graph, fed, subst, [s.inputs[0] for s in sends], sig.targets)
    out = [r for r in fed.values() if r.name in needed]
    for node in graph.values():
        if node.name not in needed:
            continue
        if any(inp in subst for inp in node.inputs):
            node = node.replace(inputs=tuple(subst.get(i, i) for i in node.inputs))
        if any(_replaced_placeholder(graph, subst, c) for c in node.control):
            node = node.replace(
                control=tuple(_control_source(graph, subst, c) for c in node.control)
            )
        out.append(node)
    return out + sends


def _connections(graph, connections, fed) -> dict[tuple, tuple]:
    """{to tensor: from tensor} of a callable's tensor connections, with TF's rules: both
    exist and have one dtype, a tensor is fed or connected once, and a connection does not
    make a cycle."""
    out: dict[tuple, tuple] = {}
    for from_name, to_name in connections:
        ends = []
        for what, name in (("from", from_name), ("to", to_name)):
            src, port = _tensor_name(name)
            node = graph.get(src)
            if node is None or port >= len(node.output_types):
                raise errors.NotFoundError(
                    None, None, f"Tensor connection {what} '{name}' is not in the graph"
                )
            ends.append(((src, port), node.output_types[port].base_dtype))
        (source, from_type), (target, to_type) = ends
        if from_type != to_type:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Tensor connection from '{from_name}' ({from_type.name}) to '{to_name}' "
                f"({to_type.name}): the types differ",
            )
        if target in fed or target in out:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Requested tensor connection to '{to_name}', which is already fed or connected",
            )
        if _depends_on(graph, fed, source[0], target):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Tensor connection from '{from_name}' to '{to_name}' would make a cycle: "
                f"'{from_name}' depends on '{to_name}'",
            )
        out[target] = source
    return out


def _depends_on(graph, fed, start: str, tensor: tuple) -> bool:
    """Whether node `start` reads `tensor`, directly or through its inputs (fed tensors cut
    the walk, and so do loop back edges, the NextIteration inputs of a Merge)."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        node = graph[name]
        for inp in node.inputs:
            if inp == tensor:
                return True
            if inp in fed or (node.op in _MERGES and graph[inp[0]].op in _NEXTS):
                continue
            stack.append(inp[0])
        stack.extend(node.control)
    return False


_MERGES = frozenset({"Merge", "RefMerge"})
_NEXTS = frozenset({"NextIteration", "RefNextIteration"})


def _replaced_placeholder(graph, subst, name: str) -> bool:
    """A fed or connected Placeholder never runs, so its control edges leave from what
    replaces it (the feed's _Recv, or the connection's source), as in TF."""
    return (name, 0) in subst and graph[name].op in ("Placeholder", "PlaceholderV2")


def _control_source(graph, subst, name: str) -> str:
    return subst[(name, 0)][0] if _replaced_placeholder(graph, subst, name) else name


def _reachable(graph, fed, subst, fetch_inputs, targets) -> set[str]:
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
            stack.append(subst[inp][0] if inp in subst else inp[0])
        stack.extend(_control_source(graph, subst, c) for c in node.control)
    return needed

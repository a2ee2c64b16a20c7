"""The runtime's view of a graph: NodeDefs decoded once into plain Nodes.

The runtime receives GraphDefs only (Session.Extend, RegisterGraph). Each NodeDef is decoded
once, when it arrives, into a Node: attrs as Python values, inputs split into data edges
(src, port) and control edges, and the output types its OpDef gives. Graph passes (prune,
placement, partition) build new Node lists and never mutate their input.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from flowgraph.core import attr_value, errors
from flowgraph.core.op_def import OpDef, get_op_def
from flowgraph.core.protos import GraphDef, NodeDef


@dataclasses.dataclass(frozen=True)
class Node:
    name: str
    op: str
    inputs: tuple  # data inputs: ((src_name, port), ...)
    control: tuple  # names of control inputs
    device: str  # requested device spec (may be partial) or, after placement, the full name
    attrs: dict  # decoded attr values
    op_def: OpDef
    input_types: tuple
    output_types: tuple

    def replace(self, **changes) -> Node:
        return dataclasses.replace(self, **changes)

    def to_node_def(self) -> NodeDef:
        nd = NodeDef(name=self.name, op=self.op, device=self.device)
        nd.input.extend(src if port == 0 else f"{src}:{port}" for src, port in self.inputs)
        nd.input.extend("^" + c for c in self.control)
        for key, value in self.attrs.items():
            kind = self.op_def.attrs[key].type if key in self.op_def.attrs else None
            nd.attr[key].CopyFrom(attr_value.to_attr_value(value, kind))
        return nd


def parse_input(name: str) -> tuple[str, int]:
    """'x' -> ('x', 0); 'x:2' -> ('x', 2)."""
    src, sep, port = name.rpartition(":")
    if sep and port.isdigit():
        return src, int(port)
    return name, 0


def make_node(name, op, inputs=(), control=(), device="", attrs=None) -> Node:
    """Builds a Node for an op the runtime adds itself (feed/fetch, Send/Recv)."""
    op_def = get_op_def(op)
    attrs = dict(attrs or {})
    for key, a in op_def.attrs.items():
        if key not in attrs and a.has_default:
            attrs[key] = a.default
    return Node(
        name,
        op,
        tuple(inputs),
        tuple(control),
        device,
        attrs,
        op_def,
        tuple(op_def.input_types(attrs)),
        tuple(op_def.output_types(attrs)),
    )


def from_node_def(nd: NodeDef) -> Node:
    try:
        op_def = get_op_def(nd.op)
    except errors.NotFoundError as e:
        raise errors.NotFoundError(None, None, f"{e.message} (node '{nd.name}')") from None
    attrs = {k: _frozen(attr_value.from_attr_value(v)) for k, v in nd.attr.items()}
    for key, a in op_def.attrs.items():
        if key not in attrs:
            if not a.has_default:
                raise errors.InvalidArgumentError(
                    None, None, f"NodeDef '{nd.name}' (op {nd.op}) is missing attr '{key}'"
                )
            attrs[key] = a.default
    data, control = [], []
    for inp in nd.input:
        if inp.startswith("^"):
            control.append(inp[1:])
        else:
            data.append(parse_input(inp))
    try:
        in_types = tuple(op_def.input_types(attrs))
        out_types = tuple(op_def.output_types(attrs))
    except (KeyError, TypeError) as e:
        raise errors.InvalidArgumentError(
            None, None, f"NodeDef '{nd.name}' has bad attrs: {e}"
        ) from None
    if len(in_types) != len(data):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"NodeDef '{nd.name}' (op {nd.op}) expects {len(in_types)} inputs, has {len(data)}",
        )
    return Node(
        nd.name, nd.op, tuple(data), tuple(control), nd.device, attrs, op_def, in_types, out_types
    )


def _frozen(value):
    """Tensor attrs (a Const's value) are read by every step: make them read-only, so neither a
    kernel nor a caller holding a fetched array can change them (fetches copy what is read-only)."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    return value


def to_graph_def(nodes) -> GraphDef:
    gd = GraphDef()
    gd.node.extend(n.to_node_def() for n in nodes)
    return gd


def validate(nodes) -> None:
    """Every input names an existing node and port with a matching base type (run after passes)."""
    by_name = {n.name: n for n in nodes}
    for n in nodes:
        for i, (src, port) in enumerate(n.inputs):
            s = by_name.get(src)
            if s is None:
                raise errors.InvalidArgumentError(
                    None, None, f"Node '{n.name}': input '{src}' does not exist"
                )
            if port >= len(s.output_types):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Node '{n.name}': input '{src}:{port}' but '{src}' has {len(s.output_types)} "
                    "outputs",
                )
            if s.output_types[port].base_dtype != n.input_types[i].base_dtype:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Input {i} of node '{n.name}' was passed {s.output_types[port].name} from "
                    f"{src}:{port} incompatible with expected {n.input_types[i].name}.",
                )
        for c in n.control:
            if c not in by_name:
                raise errors.InvalidArgumentError(
                    None, None, f"Node '{n.name}': control input '{c}' does not exist"
                )

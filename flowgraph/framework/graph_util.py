"""GraphDef surgery for deployment (TF1's graph_util_impl.py): freezing a graph by turning its
variables into constants, pruning it to what some outputs need, and removing training-only
nodes. Each function takes a GraphDef and returns a new one; none mutates its input."""

from __future__ import annotations

import logging

from flowgraph.core.protos import GraphDef, NodeDef
from flowgraph.core.tensor_util import make_tensor_proto

__all__ = ["convert_variables_to_constants", "extract_sub_graph", "remove_training_nodes"]

log = logging.getLogger(__name__)

_VARIABLE_OPS = ("Variable", "VariableV2", "VarHandleOp")


def _node_name(name: str) -> str:
    """The node an input names: "^x" and "x:1" -> "x"."""
    name = name.removeprefix("^")
    return name.split(":")[0]


def _check_graph_def(graph_def):
    if not isinstance(graph_def, GraphDef):
        raise TypeError(f"graph_def must be a graph_pb2.GraphDef proto, got {type(graph_def)}")


def extract_sub_graph(graph_def, dest_nodes) -> GraphDef:
    """The nodes `dest_nodes` depend on (data and control inputs), in their original order.

    Example: pruned = tf.graph_util.extract_sub_graph(gd, ["probs"])"""
    _check_graph_def(graph_def)
    if isinstance(dest_nodes, str):
        raise TypeError("dest_nodes must be a list.")
    by_name = {n.name: n for n in graph_def.node}
    for d in dest_nodes:
        if d not in by_name:
            raise AssertionError(f"{d} is not in graph")
    keep, stack = set(), list(dest_nodes)
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        stack.extend(_node_name(i) for i in by_name[name].input)
    out = GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    out.library.CopyFrom(graph_def.library)
    out.node.extend(n for n in graph_def.node if n.name in keep)
    return out


def _resource_reads(graph_def) -> dict:
    """{VarHandleOp name: a ReadVariableOp tensor reading it} (to fetch resource values)."""
    reads = {}
    for n in graph_def.node:
        if n.op == "ReadVariableOp" and n.input:
            reads.setdefault(_node_name(n.input[0]), n.name + ":0")
    return reads


def convert_variables_to_constants(
    sess,
    input_graph_def,
    output_node_names,
    variable_names_whitelist=None,
    variable_names_blacklist=None,
) -> GraphDef:
    """Freezes a graph: the subgraph of `output_node_names` with every variable replaced by a
    Const holding its current value in `sess` (resource reads become Identity).

    Example:
        frozen = tf.graph_util.convert_variables_to_constants(sess, sess.graph_def, ["probs"])
    """
    inference = extract_sub_graph(input_graph_def, output_node_names)
    all_reads = _resource_reads(input_graph_def)
    names, fetches = [], []
    for node in inference.node:
        if node.op not in _VARIABLE_OPS:
            continue
        if variable_names_whitelist is not None and node.name not in variable_names_whitelist:
            continue
        if variable_names_blacklist is not None and node.name in variable_names_blacklist:
            continue
        if node.op == "VarHandleOp":
            if node.name not in all_reads:
                raise ValueError(f"no ReadVariableOp reads resource variable {node.name}")
            fetches.append(all_reads[node.name])
        else:
            fetches.append(node.name + ":0")
        names.append(node.name)
    values = dict(zip(names, sess.run(fetches))) if fetches else {}
    out = GraphDef()
    out.versions.CopyFrom(inference.versions)
    out.library.CopyFrom(inference.library)
    for node in inference.node:
        if node.name in values:
            out.node.append(_const_node(node, values[node.name]))
        elif node.op == "ReadVariableOp" and _node_name(node.input[0]) in values:
            out.node.append(_identity_for_read(node))
        elif node.op == "ResourceGather" and _node_name(node.input[0]) in values:
            raise NotImplementedError(
                f"convert_variables_to_constants of ResourceGather {node.name}: freeze an "
                "embedding lookup of a ref variable instead"
            )
        else:
            out.node.append(node)
    log.info("Converted %d variables to const ops.", len(values))
    return out


def _const_node(node: NodeDef, value) -> NodeDef:
    out = NodeDef(name=node.name, op="Const", device=node.device)
    out.attr["dtype"].CopyFrom(node.attr["dtype"])
    out.attr["value"].tensor.CopyFrom(make_tensor_proto(value, dtype=node.attr["dtype"].type))
    if "_class" in node.attr:
        out.attr["_class"].CopyFrom(node.attr["_class"])
    return out


def _identity_for_read(node: NodeDef) -> NodeDef:
    out = NodeDef(name=node.name, op="Identity", device=node.device)
    out.input.extend(node.input)
    out.attr["T"].CopyFrom(node.attr["dtype"])
    if "_class" in node.attr:
        out.attr["_class"].CopyFrom(node.attr["_class"])
    return out


def remove_training_nodes(input_graph, protected_nodes=None) -> GraphDef:
    """Removes CheckNumerics nodes and splices out Identity nodes (except protected ones and
    those with control edges), which only training needs.

    Example: slim = tf.graph_util.remove_training_nodes(frozen, protected_nodes=["probs"])"""
    _check_graph_def(input_graph)
    protected = set(protected_nodes or ())
    removed = {
        n.name for n in input_graph.node if n.op == "CheckNumerics" and n.name not in protected
    }
    kept = []
    for node in input_graph.node:
        if node.name in removed:
            continue
        new = NodeDef()
        new.CopyFrom(node)
        del new.input[:]
        new.input.extend(i for i in node.input if _node_name(i) not in removed)
        kept.append(new)
    control_sources = {i[1:] for n in kept for i in n.input if i.startswith("^")}
    with_control = {n.name for n in kept if any(i.startswith("^") for i in n.input)}
    splice = {
        n.name: n.input[0]
        for n in kept
        if n.op == "Identity"
        and n.name not in protected
        and n.name not in with_control
        and n.name not in control_sources
        and not n.input[0].startswith("^")
    }
    out = GraphDef()
    out.versions.CopyFrom(input_graph.versions)
    out.library.CopyFrom(input_graph.library)
    for node in kept:
        if node.name in splice:
            continue
        new = NodeDef()
        new.CopyFrom(node)
        del new.input[:]
        for inp in node.input:
            while not inp.startswith("^") and _output_zero(inp) in splice:
                inp = splice[_output_zero(inp)]
            new.input.append(inp)
        out.node.append(new)
    return out


def _output_zero(name: str) -> str:
    """The node name of an input naming output 0 ("x" or "x:0"); other outputs stay as is."""
    return name.removesuffix(":0")

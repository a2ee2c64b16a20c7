"""A reader's records parsed where they lie (whitepaper §4.5; the I2 bench of issue 11):

    ParseExample(ReaderReadUpToV2(reader, queue, n).values, names, keys, defaults)
        -> _ReaderReadUpToParseExample(reader, queue, n, names, keys, defaults)

A queue runner's reader thread runs this pair over and over, holding the GIL that the training
step waits for; unfused, it makes a key string and a bytes object per record and two object
arrays that ParseExample joins back into one buffer. The fused kernel
(kernels/cpu/read_parse.py) reads the records as chunks of the reader's buffer and decodes the
dense features from there, with the unfused ops' results, reader state and errors.

Only when nothing else can see the difference: the read's keys have no reader, its values have
the ParseExample as their one reader, it is not a target and waits for no control reader; the
two share a CPU device; the ParseExample asks for dense features only, of float or int64 and
fixed shape (what the wire fast path decodes; with sparse or string features the records
would be made into bytes objects anyway). The fused node takes the ParseExample's name, so its
readers and fetches are unchanged, and waits for every control input of both nodes.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.device_spec import parse
from flowgraph.runtime.nodes import Node, make_node
from flowgraph.runtime.passes import rules

FUSED_OP = "_ReaderReadUpToParseExample"
_TYPES = frozenset({dtypes.float32, dtypes.int64})


def fuse_read_parse(nodes: list[Node], keep: frozenset) -> list[Node]:
    """`nodes` with each ReaderReadUpToV2 -> ParseExample pair fused (see the module doc)."""
    pairs = _pairs(nodes, keep)
    if not pairs:
        return nodes
    gone = {read.name for read in pairs.values()}
    return [_fused(pairs[n.name], n) if n.name in pairs else n for n in nodes if n.name not in gone]


def _pairs(nodes: list[Node], keep: frozenset) -> dict[str, Node]:
    """ParseExample's name -> the ReaderReadUpToV2 whose records it alone reads."""
    only_reader = rules.only_reader(nodes, keep)
    pairs = {}
    for read in nodes:
        parse_node = only_reader(read) if read.op == "ReaderReadUpToV2" else None
        if parse_node is None or parse_node.op != "ParseExample" or not _dense_only(parse_node):
            continue
        if parse_node.inputs[0] != (read.name, 1) or not _same_cpu(read, parse_node):
            continue
        pairs[parse_node.name] = read
    return pairs


def _dense_only(node: Node) -> bool:
    attrs = node.attrs
    return (
        attrs["Nsparse"] == 0
        and attrs["Ndense"] > 0
        and all(t in _TYPES for t in attrs["Tdense"])
        and all(s.is_fully_defined() for s in attrs["dense_shapes"])
    )


def _same_cpu(read: Node, parse_node: Node) -> bool:
    return read.device == parse_node.device and parse(read.device).device_type in (None, "CPU")


def _fused(read: Node, parse_node: Node) -> Node:
    control = [*read.control, *parse_node.control]
    return make_node(
        parse_node.name,
        FUSED_OP,
        [*read.inputs, *parse_node.inputs[1:]],
        tuple(dict.fromkeys(control)),
        parse_node.device,
        dict(parse_node.attrs),
    )

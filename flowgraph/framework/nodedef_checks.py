"""The NodeDef checks of GraphDef import (importer.py): TensorFlow refuses a malformed NodeDef
from any producer, and so do we, with its error classes and messages: a GraphDef whose versions
exclude this consumer, an attr value of the wrong kind (an int where a type is expected), a Const
whose `dtype` disagrees with its value, a control input before a data input.
"""

from __future__ import annotations

from flowgraph.core import dtypes, errors
from flowgraph.framework.graph import GRAPH_DEF_VERSION


def check_versions(graph_def) -> None:
    """The GraphDef's versions must admit this consumer (TF's VersionDef check)."""
    v = graph_def.versions
    if v.min_consumer > GRAPH_DEF_VERSION or GRAPH_DEF_VERSION in v.bad_consumers:
        raise ValueError(
            f"GraphDef min consumer version {v.min_consumer} (bad consumers "
            f"{list(v.bad_consumers)}) "
            f"does not admit this consumer, GraphDef version {GRAPH_DEF_VERSION}."
        )


_ATTR_KINDS = {
    "s": "string",
    "i": "int",
    "f": "float",
    "b": "bool",
    "type": "type",
    "shape": "shape",
    "tensor": "tensor",
    "func": "func",
}


def _attr_kind(av) -> str | None:
    """The kind of value an AttrValue holds, in OpDef terms ('int', 'list(type)', ...); 'list'
    for an empty list (which fits every list kind), None when there is nothing to check."""
    which = av.WhichOneof("value")
    if which != "list":
        return _ATTR_KINDS.get(which)
    kinds = [k for f, k in _ATTR_KINDS.items() if f != "func" and len(getattr(av.list, f))]
    if len(av.list.func):
        kinds.append("func")
    if len(kinds) > 1:
        return "list(" + "|".join(kinds) + ")"
    return f"list({kinds[0]})" if kinds else "list"


def check_attr_kind(nd, key: str, av, want: str) -> None:
    """TF's AttrValueHasType: an attr's value must be of the kind its OpDef declares."""
    got = _attr_kind(av)
    if got is None or got == want or (got == "list" and want.startswith("list(")):
        return
    raise errors.InvalidArgumentError(
        None,
        None,
        f"AttrValue had value with type '{got}' when '{want}' expected\n\t for attr '{key}'\n\t"
        f"; NodeDef: {{{{node {nd.name}}}}} (op {nd.op})",
    )


def check_const_dtype(nd) -> None:
    """A Const's value must have the type its `dtype` attr declares (TF's Const kernel)."""
    value, dtype = nd.attr["value"].tensor.dtype, nd.attr["dtype"].type
    if value != dtype:
        names = [dtypes.as_dtype(d).name if d else "invalid" for d in (value, dtype)]
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Type mismatch between value ({names[0]}) and dtype ({names[1]}) of Const node "
            f"'{nd.name}'",
        )


def check_input_order(nd) -> None:
    """Control inputs (^x) come after every data input (TF's NodeDef rule)."""
    seen_control = False
    for text in nd.input:
        if text.startswith("^"):
            seen_control = True
        elif seen_control:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Node '{nd.name}': Control dependencies must come after regular dependencies",
            )

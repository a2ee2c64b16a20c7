"""Map functions that only parse examples, applied without running their body (issue 11, I2d).

`map(lambda r: tf.parse_example(r, features))` after a batch, or `map(parse_single_example)`
before one, is the commonest map of a TF1 input pipeline. Running its body costs the call
(the function's kernels one by one, ParseExample's keys decoded from its Const inputs, its
layout looked up) and, for a batch of records, joining the records' bytes into one buffer
to scan them. When a body is exactly Consts feeding one ParseExample or ParseSingleExample
of the function's only argument, returning dense features that example_wire.py reads off the
wire, `recognize` returns a `ParseCall` that scans a run's packed records (dataset_packed.py)
directly. Whatever it cannot read (a missing key, another encoding, a malformed record) makes
it return None, and the caller runs the body, which gives TensorFlow's values and errors.
"""

from __future__ import annotations

import numpy as np

from flowgraph.kernels.cpu.dataset_packed import Packed
from flowgraph.kernels.cpu.dataset_wire import Layout
from flowgraph.kernels.cpu.parsing import dense_layout, feature_keys


class ParseCall:
    """Parses runs of records for a recognized body: `batched` for ParseExample (the run is
    one batch element), else ParseSingleExample (the run is that many elements)."""

    __slots__ = ("batched", "layout", "order")

    def __init__(self, batched: bool, spec, dims: tuple, order: list):
        self.batched = batched
        self.layout = Layout(spec, dims)  # outputs [n, *dims] per key
        # the parse output each function result is; None: each its own, in order
        self.order = None if order == list(range(len(dims))) else order

    def __call__(self, records) -> list | None:
        """The function's results for `records` (a Packed, or a string column), each with the
        records along its first axis; None where the wire path cannot read them."""
        if not isinstance(records, Packed):
            values = records.tolist() if records.dtype == object and records.ndim == 1 else ()
            if not values or not all(isinstance(v, bytes) for v in values):
                return None
            records = Packed.of_bytes(values)
        out = self.layout.parse(records.data, records.starts, records.ends)
        if out is None or self.order is None:
            return out
        return [out[i] for i in self.order]


def recognize(body, captured) -> ParseCall | None:
    """A ParseCall doing what `body` (a FunctionBody) does, or None if it does more."""
    inline = getattr(body, "_inline", None)
    if captured or inline is None:
        return None
    program, _, arg_slots, ret_slots = inline
    if len(arg_slots) != 1:
        return None
    consts, parse = {}, None
    for item in program:
        if item.node.op == "Const" and not item.step_arg:
            consts[item.base] = item.compute()
        elif item.node.op in ("ParseExample", "ParseSingleExample") and parse is None:
            parse = item
        else:
            return None
    if parse is None or parse.inputs[0] != arg_slots[0]:
        return None
    if not all(s in consts for s in parse.inputs[1:]):
        return None
    layout = _layout(parse, [consts[s] for s in parse.inputs[1:]])
    if not layout:
        return None
    order = [s - parse.base for s in ret_slots]
    if not all(0 <= i < parse.num_outputs for i in order):
        return None
    spec, dims = layout
    return ParseCall(parse.node.op == "ParseExample", spec, dims, order)


def _layout(item, consts: list):
    """(example_wire.Spec, dense shapes) of a parse node asking only for dense features of
    fixed shape without defaults (a default is used only for a missing key, which the wire
    path leaves to the body anyway; an empty one is never used); None otherwise."""
    a = item.node.attrs
    if item.node.op == "ParseSingleExample":
        defaults = consts
        layout = dense_layout(a["sparse_keys"], a["dense_keys"], a["Tdense"], a["dense_shapes"])
    else:
        ns, nd = a["Nsparse"], a["Ndense"]
        names, sparse = consts[0], consts[1 : 1 + ns]
        keys, defaults = consts[1 + ns : 1 + ns + nd], consts[1 + ns + nd :]
        if np.size(names):
            return None
        try:
            keys = feature_keys(keys)
        except (UnicodeDecodeError, ValueError):
            return None
        layout = dense_layout(sparse, keys, a["Tdense"], a["dense_shapes"])
    if not layout or any(np.size(d) for d in defaults):
        return None
    return layout

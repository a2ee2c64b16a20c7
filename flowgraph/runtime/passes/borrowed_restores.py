"""Restores that may hand out the checkpoint's own bytes (whitepaper §3.3 Restore nodes).

A RestoreV2 whose outputs only go into variables (a Saver's restore: Assign, or Identity then
AssignVariableOp, through a Reshape with `reshape=True`) may return each tensor as a read-only
view of the data file mapped into memory (core/tensor_bundle.py `borrow`): the assign copies
the value into the variable's buffer (kernels/variable_state.py copies any array that is a view
of memory it does not own), so the bytes cross memory once, not three times (read into a new
array, then copy into the variable), and no 256 MiB of new pages are faulted in and freed per
restore (bench C2: ~70 ms of the ~170 ms of CPU). Any other reader (a fetch, a queue, a
function call) could keep the view past the step, tied to the file, so then the kernel reads
into arrays of its own.

This pass marks such RestoreV2 nodes with the attr kernels/cpu/io.py's BORROW_ATTR; it runs
last, on the graph the other passes left, and only ever adds that attr.
"""

from __future__ import annotations

from flowgraph.kernels.cpu.io import BORROW_ATTR
from flowgraph.runtime.nodes import Node

# Readers that copy their data input into a variable: op -> that input's index.
_COPYING = {"Assign": 1, "AssignVariableOp": 1}
# Readers whose output is their input (a view of it): the view's readers decide.
_FORWARDING = frozenset({"Identity", "Reshape"})


def mark_borrowed_restores(nodes: list[Node], keep: frozenset) -> list[Node]:
    """`nodes` with BORROW_ATTR set on each RestoreV2 whose every output only reaches
    variables' assigns (see the module doc)."""
    if not any(n.op == "RestoreV2" for n in nodes):
        return nodes
    readers: dict[str, list[tuple[Node, int]]] = {}
    for n in nodes:
        for i, (src, _) in enumerate(n.inputs):
            readers.setdefault(src, []).append((n, i))

    def copied(name: str, depth: int = 0) -> bool:
        """Whether every reader of every output of node `name` copies what it reads."""
        if name in keep or depth > 8:
            return False
        for reader, index in readers.get(name, ()):
            if _COPYING.get(reader.op) == index:
                continue
            if reader.op in _FORWARDING and index == 0 and copied(reader.name, depth + 1):
                continue
            return False
        return True

    out = []
    for n in nodes:
        if n.op == "RestoreV2" and not n.attrs.get(BORROW_ATTR) and copied(n.name):
            n = n.replace(attrs={**n.attrs, BORROW_ATTR: True})
        out.append(n)
    return out

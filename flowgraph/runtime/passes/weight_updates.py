"""Fused weight-gradient updates (whitepaper §4.1 memory): a MatMul whose only reader is the
optimizer update of a variable becomes part of that update, which accumulates the product into
the variable's (or momentum accumulator's) buffer with BLAS gemm (kernels/cpu/weight_updates.py),
so the weight gradient is never materialized.

In a dense layer's training step the gradient of the weights, dW = x^T @ dy, is as large as
the weights and lives from its MatMul until ApplyGradientDescent has read it, beside the two
activations it is computed from: in W4 (784-1024-1024-10) the 4 MiB gradient of the middle
layer was most of the step's 7 MiB peak, and no reordering or recomputation separates a
product from its operands. TensorFlow's CPU runtime has no such fusion (XLA does it inside a
compiled cluster); it is done here as a Grappler-style rewrite, under
`rewrite_options.memory_optimization` (the levels that accumulate sums: DEFAULT_MEM_OPT,
SCHEDULING_HEURISTICS, HEURISTICS; memory.py), because what it buys is memory: it saves one
write and read of the gradient, but the product is the same gemm.

The rewrite: the Apply node (ApplyGradientDescent, ApplyMomentum and their Resource forms)
keeps its name, inputs and control inputs, becomes `_FusedMatMul<its op>` with its gradient
input replaced by the MatMul's two operands, and takes the MatMul's control inputs and
transposes (attr `gradient` names the MatMul, so `output_partition_graphs` shows the fusion).
The MatMul goes. A node that waited on the MatMul by a control edge (the gradient tuple's
gates) waits on the MatMul's inputs instead: waiting on the fused node could close a cycle
through the update's own control inputs, and what the gate ordered (the gradient's inputs
exist) still holds.

Only when it cannot change what runs: the MatMul's value has that one reader (not fetched, not
summarized or clipped, not read twice), both nodes share a CPU device (the kernel's) and the
root frame (no loop; a loop's iteration tags are the executor's business), and the type is
float or double (BLAS gemm). The result equals the unfused update to rounding.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.device_spec import parse
from flowgraph.opdefs.training import input_names
from flowgraph.opdefs.weight_updates import FUSABLE, fused_op
from flowgraph.runtime.control_loops import FrameInfo
from flowgraph.runtime.nodes import Node, make_node

_APPLY_OPS = frozenset(FUSABLE) | {"Resource" + op for op in FUSABLE}
_TYPES = frozenset({dtypes.float32, dtypes.float64})


def fuse_weight_updates(nodes: list[Node], keep: frozenset) -> list[Node]:
    """`nodes` with each MatMul that only feeds an update fused into it (see the module doc)."""
    fused = _pairs(nodes, keep)
    if not fused:
        return nodes
    gates = _gates(nodes, fused)
    updates = {u.name for u in fused.values()}
    out = []
    for n in nodes:
        if n.name in updates:
            continue
        if n.name in fused:  # the fused node takes the MatMul's place in the ready order
            n = _fuse(n, fused[n.name])
        if any(c in gates for c in n.control):
            control = []
            for c in n.control:
                control.extend(gates.get(c, (c,)))
            data = {s for s, _ in n.inputs} | {n.name}
            n = n.replace(control=tuple(c for c in dict.fromkeys(control) if c not in data))
        out.append(n)
    return out


def _gates(nodes: list[Node], fused: dict) -> dict[str, tuple]:
    """MatMul name -> what its control readers wait on instead: its data and control inputs,
    where one of those is a fused MatMul too, that one's (recursively)."""
    by_name = {n.name: n for n in nodes}
    gates: dict[str, tuple] = {}

    def resolve(name: str) -> tuple:
        if name not in gates:
            m = by_name[name]
            waits = []
            for src in dict.fromkeys([s for s, _ in m.inputs] + list(m.control)):
                waits.extend(resolve(src) if src in fused else (src,))
            gates[name] = tuple(dict.fromkeys(waits))
        return gates[name]

    for name in fused:
        resolve(name)
    return gates


def _pairs(nodes: list[Node], keep: frozenset) -> dict[str, Node]:
    """MatMul name -> the update node it is fused into."""
    by_name = {n.name: n for n in nodes}
    data_reads: dict[str, int] = {}
    for n in nodes:
        for src, _ in n.inputs:
            data_reads[src] = data_reads.get(src, 0) + 1
    frames = None
    pairs = {}
    for n in nodes:
        if n.op not in _APPLY_OPS or n.attrs["T"] not in _TYPES:
            continue
        src, port = n.inputs[_gradient_index(n.op)]
        m = by_name.get(src)
        if m is None or m.op != "MatMul" or port != 0 or m.name in keep:
            continue
        if data_reads[m.name] != 1 or m.attrs["T"] != n.attrs["T"] or not _cpu_pair(m, n):
            continue
        frames = frames or FrameInfo(nodes)
        if frames.frame.get(m.name, "") or frames.frame.get(n.name, ""):
            continue
        pairs[m.name] = n
    return pairs


def _gradient_index(op: str) -> int:
    names = input_names(op)
    return names.index("grad" if "grad" in names else "delta")


def _cpu_pair(m: Node, update: Node) -> bool:
    return m.device == update.device and parse(m.device).device_type in (None, "CPU")


def _fuse(m: Node, update: Node) -> Node:
    k = _gradient_index(update.op)
    inputs = update.inputs[:k] + m.inputs + update.inputs[k + 1 :]
    control = tuple(c for c in dict.fromkeys(m.control + update.control) if c != m.name)
    attrs = dict(update.attrs)
    attrs.update(
        transpose_a=m.attrs["transpose_a"], transpose_b=m.attrs["transpose_b"], gradient=m.name
    )
    return make_node(update.name, fused_op(update.op), inputs, control, update.device, attrs)

"""Recomputation (whitepaper §4.1, TensorFlow's Grappler memory optimizer): a forward activation
that the backward pass reads is computed again from its inputs just before its first gradient
consumer, so the forward buffer dies as soon as the forward pass is done with it.

Which nodes are recomputed:

* marked ones (MANUAL, and every mode that recomputes): nodes with the `_recompute_hint` attr
  (what `tf.contrib.layers.recompute_grad` sets on the ops its function builds) that the
  backward pass reads, directly or through other marked nodes. Their copies read each other, so
  a marked block is recomputed from its unmarked inputs as a whole, as the user asked.
* cheap ones (RECOMPUTATION_HEURISTICS, HEURISTICS): element-wise ops in CHEAP (Grappler's
  list) whose value the backward pass reads (a Shape of it does not count: Backward.uses) and
  whose every input stays in memory anyway
  (a constant or variable, or read by the backward pass itself and not recomputed). Then the
  copy frees a buffer and keeps none alive that was not already: e.g. `tanh(c)` of an LSTM
  cell, whose `c` the gradient of the next step's `c * f` reads. A `relu(x @ w + b)` of an
  MLP is left alone: recomputing it would keep `x @ w + b` alive in its place. (Grappler
  recomputes every connected group of cheap ops instead, which in an unrolled RNN chains
  all time steps into one group recomputed at once, its own comment says.)

In graphs with control flow, nodes in loops, control-flow ops and their direct readers are
left alone (backward.Backward.movable). The copies are named
`Recomputed/<name>`, as Grappler names them, and carry no `_recompute_hint`.
"""

from __future__ import annotations

from flowgraph.runtime.nodes import Node
from flowgraph.runtime.passes import rules
from flowgraph.runtime.passes.backward import Backward, fresh_name, place_before

RECOMPUTE_HINT = "_recompute_hint"
# Grappler's GetCheapToRecomputeOps, less Reshape and Transpose (their outputs are views of their
# inputs here, so recomputing them frees nothing), plus the other cheap activations.
CHEAP = frozenset(
    {"Add", "AddV2", "AddN", "BiasAdd", "Cast", "Elu", "Fill", "FloorDiv", "FloorMod",
     "FusedBatchNorm", "LeakyRelu", "Mul", "Neg", "RealDiv", "Reciprocal", "Relu", "Relu6",
     "Rsqrt", "Selu", "Sigmoid", "Softplus", "Sqrt", "Square", "SquaredDifference", "Sub",
     "Tanh", "Tile"}
)  # fmt: skip
_PERSISTENT = frozenset({"Const", "HostConst"})


def recompute(nodes: list[Node], keep: frozenset, scope: str, heuristics: bool) -> list[Node]:
    """Returns `nodes` with the chosen forward nodes recomputed for their backward readers."""
    bw = Backward(nodes, scope)
    chosen = _marked(bw, keep)
    if heuristics:
        chosen |= _cheap(bw, keep, chosen)
    if not chosen:
        return nodes
    return _rewrite(nodes, bw, chosen)


def _candidate(n: Node, bw: Backward, keep: frozenset) -> bool:
    return (
        n.name not in keep
        and not bw.is_target(n.name)
        and rules.is_pure(n, bw.by_name)
        and bw.movable(n.name)
    )


def _marked(bw: Backward, keep: frozenset) -> set:
    """Marked nodes the backward pass reads directly or through other chosen marked nodes."""
    chosen: set = set()
    for n in reversed(bw.order):
        if RECOMPUTE_HINT not in n.attrs or not _candidate(n, bw, keep):
            continue
        if any(bw.uses(r) or r.name in chosen for r in bw.readers.get(n.name, ())):
            chosen.add(n.name)
    return chosen


def _cheap(bw: Backward, keep: frozenset, marked: set) -> set:
    """Cheap nodes read by the backward pass whose inputs stay in memory anyway."""
    chosen: set = set()

    def stays(src: str) -> bool:
        n = bw.by_name[src]
        if src in marked or n.op in _PERSISTENT or not rules.is_pure(n, bw.by_name):
            return True  # a marked node's copy, a constant, or a read of a variable's buffer
        return src not in chosen and bw.used_later(src)

    for n in bw.order:
        if n.op not in CHEAP or n.name in marked or not _candidate(n, bw, keep):
            continue
        if bw.used_later(n.name) and all(stays(s) for s, _ in n.inputs):
            chosen.add(n.name)
    return chosen


def _rewrite(nodes: list[Node], bw: Backward, chosen: set) -> list[Node]:
    taken = set(bw.by_name)
    copy_name = {n: fresh_name(f"Recomputed/{n}", taken) for n in sorted(chosen)}
    first: dict[str, int] = {}  # chosen node -> topological index of its first backward reader
    for n in reversed(bw.order):
        if n.name in chosen:
            readers = bw.readers.get(n.name, ())
            first[n.name] = min(
                [bw.index[r.name] for r in readers if bw.uses(r)]
                + [first[r.name] for r in readers if r.name in chosen]
            )
    copies = set(copy_name.values())
    before: dict[str, list[Node]] = {}
    for n in bw.order:
        if n.name in chosen:
            target = bw.order[first[n.name]]
            attrs = {k: v for k, v in n.attrs.items() if k != RECOMPUTE_HINT}
            copy = n.replace(
                name=copy_name[n.name],
                inputs=tuple((copy_name.get(s, s), p) for s, p in n.inputs),
                control=tuple(dict.fromkeys(n.control + bw.trigger(target, copies))),
                attrs=attrs,
            )
            before.setdefault(target.name, []).append(copy)
    out = []
    for n in nodes:
        if bw.uses(n) and any(s in chosen for s, _ in n.inputs):
            n = n.replace(inputs=tuple((copy_name.get(s, s), p) for s, p in n.inputs))
        out.append(n)
    return place_before(out, before)

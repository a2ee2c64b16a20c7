"""How tf.gradients sums the gradients that reach one tensor along several paths (whitepaper
§4.1: "composing the partial gradients along the backwards path"): one AddN of the dense terms
(or a pairwise chain, which frees each term sooner), and IndexedSlices kept sparse when every
term is sparse. gradients/impl.py calls `aggregate` once per op, when all its consumers have
delivered.
"""

from __future__ import annotations

from flowgraph.framework import convert
from flowgraph.framework.indexed_slices import IndexedSlices
from flowgraph.framework.operation import Operation, Tensor
from flowgraph.gradients import util


class AggregationMethod:
    """How gradients arriving at one tensor along several paths are summed (tf.AggregationMethod).

    ADD_N (the default) adds them all at once with AddN, which needs every term in memory;
    EXPERIMENTAL_TREE adds them pairwise so each term can be freed earlier;
    EXPERIMENTAL_ACCUMULATE_N behaves as EXPERIMENTAL_TREE here (we have no AccumulateNV2).
    """

    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


def aggregate(grads: dict, op: Operation, method) -> list:
    """Sums, per output of `op`, the gradients it received along several paths."""
    out_grads = grads.get(op)
    if out_grads is None:
        out_grads = [[] for _ in op.outputs]
        grads[op] = out_grads
    for i, terms in enumerate(out_grads):
        if not isinstance(terms, list):
            continue  # already aggregated (an op processed twice never happens, but be safe)
        terms = [g for g in terms if g is not None]
        if not terms:
            out_grads[i] = None
        elif len(terms) == 1:
            out_grads[i] = terms[0]
        elif all(isinstance(g, IndexedSlices) for g in terms):
            out_grads[i] = _concat_slices(terms)
        else:
            dense = [
                convert.convert_to_tensor(g) if isinstance(g, IndexedSlices) else g for g in terms
            ]
            out_grads[i] = sum_dense(dense, method)
    return out_grads


def sum_dense(terms: list[Tensor], method) -> Tensor:
    """The sum of dense gradient terms: one AddN beside the first term, or for the
    EXPERIMENTAL_* methods a pairwise chain."""
    graph = terms[0].graph
    if method in (AggregationMethod.EXPERIMENTAL_TREE, AggregationMethod.EXPERIMENTAL_ACCUMULATE_N):
        running = terms[0]
        for g in terms[1:]:
            running = util.add_n([running, g])
        return running
    with graph.colocate_with(terms[0].op, ignore_existing=True):
        return util.add_n(terms)


def _concat_slices(terms: list[IndexedSlices]) -> IndexedSlices:
    """sparse + sparse stays sparse: the union of rows (duplicates sum when densified)."""
    values = util.build("ConcatV2", [s.values for s in terms], 0, name="concat")
    indices = util.build("ConcatV2", [s.indices for s in terms], 0, name="concat")
    return IndexedSlices(values, indices, terms[0].dense_shape)

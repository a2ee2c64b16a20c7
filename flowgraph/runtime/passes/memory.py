"""The memory optimizer (whitepaper §4.1; TensorFlow's Grappler MemoryOptimizer): rewrites that
lower a step's peak memory without changing what it computes.

RewriterConfig.memory_optimization picks the rewrites, as in TensorFlow:

=========================  =================================================================
DEFAULT_MEM_OPT (default)  accumulate large sums and weight gradients; recompute marked nodes;
                           swap marked tensors
NO_MEM_OPT                 nothing
MANUAL                     recompute marked nodes; swap marked tensors
SCHEDULING_HEURISTICS      accumulate large sums and weight gradients
RECOMPUTATION_HEURISTICS   recompute marked and cheap nodes
SWAPPING_HEURISTICS        swap marked and long-lived large tensors
HEURISTICS                 all of the above
=========================  =================================================================

* Accumulating sums (Grappler's scheduling pass): `tf.gradients` adds the contributions to a
  gradient with one AddN, which keeps every contribution alive until the last one exists; in an
  RNN unrolled over 32 steps that is 32 weight-sized buffers. An AddN of 3 or more inputs is
  rewritten as a chain of AddV2 in its input order (which is the order the backward pass
  produces them), each link placed right after its input's producer, so each contribution is
  freed as soon as it is added. The sum is the same bit for bit (the AddN kernel adds in that
  order too). Grappler accumulates into a temporary variable in whatever order contributions
  arrive; a fixed order keeps results deterministic. Only when the inputs' static shapes are
  fully known and equal (AddV2 would broadcast where AddN must fail) and the chain saves at
  least MIN_SAVED_BYTES (each link costs an op dispatch).
* Accumulating weight gradients: passes/weight_updates.py. A weight gradient's MatMul whose
  only reader is the variable's update is fused into it, and BLAS accumulates the product into
  the variable's buffer, so the gradient is never materialized.
* Recomputation: passes/recompute.py. Marked nodes are recomputed by DEFAULT_MEM_OPT too, where
  TensorFlow needs MANUAL or a heuristic level: TF1's `recompute_grad` does not rely on the
  option (it builds its own gradient), so marking here must not either.
* Swapping: passes/swapping.py, on devices with a memory of their own.

Like Grappler's, the optimizer is off with `disable_meta_optimizer` and for graphs below
`min_graph_nodes` (pipeline.py decides). In graphs with control flow nothing inside a loop is
rewritten (weight_updates.py, backward.Backward.movable), nor is a control-flow op or a direct
reader of one recomputed or swapped.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.protos import ConfigProto, RewriterConfig
from flowgraph.runtime.nodes import Node, make_node
from flowgraph.runtime.passes import rules, static_shapes
from flowgraph.runtime.passes.backward import DEFAULT_SCOPE, fresh_name
from flowgraph.runtime.passes.recompute import recompute
from flowgraph.runtime.passes.swapping import swap
from flowgraph.runtime.passes.weight_updates import fuse_weight_updates

MIN_SAVED_BYTES = 64 << 10
_R = RewriterConfig
_SCHEDULING = frozenset({_R.DEFAULT_MEM_OPT, _R.SCHEDULING_HEURISTICS, _R.HEURISTICS})
_MARKED = frozenset({_R.DEFAULT_MEM_OPT, _R.MANUAL, _R.RECOMPUTATION_HEURISTICS, _R.HEURISTICS})
_CHEAP = frozenset({_R.RECOMPUTATION_HEURISTICS, _R.HEURISTICS})
_SWAP_MARKED = frozenset({_R.DEFAULT_MEM_OPT, _R.MANUAL, _R.SWAPPING_HEURISTICS, _R.HEURISTICS})
_SWAP_LONG_LIVED = frozenset({_R.SWAPPING_HEURISTICS, _R.HEURISTICS})


def optimize_memory(
    nodes: list[Node],
    config: ConfigProto,
    keep: frozenset,
    feed_shapes: dict,
    separate_memory=lambda device: False,
) -> list[Node]:
    """Runs the rewrites `config` selects. `separate_memory(device)` says whether a device has a
    memory of its own that tensors can be swapped out of (pipeline.py decides which)."""
    rw = config.graph_options.rewrite_options
    level = rw.memory_optimization
    if level == _R.NO_MEM_OPT:
        return nodes
    scope = rw.memory_optimizer_target_node_name_scope or DEFAULT_SCOPE
    if level in _SCHEDULING:
        nodes = accumulate_sums(nodes, keep, feed_shapes)
        nodes = fuse_weight_updates(nodes, keep)
    if level in _MARKED:
        nodes = recompute(nodes, keep, scope, heuristics=level in _CHEAP)
    if level in _SWAP_MARKED:
        nodes = swap(nodes, scope, separate_memory, level in _SWAP_LONG_LIVED, feed_shapes)
    return nodes


def _summable(dtype) -> bool:
    base = dtypes.as_dtype(dtype).base_dtype
    return (base.is_floating or base.is_integer or base.is_complex) and not base.is_quantized


def accumulate_sums(nodes: list[Node], keep: frozenset, feed_shapes: dict) -> list[Node]:
    """Each large AddN of 3 or more inputs becomes a chain of AddV2 (see the module doc)."""
    sums = _large_sums(nodes, feed_shapes)
    if not sums:
        return nodes
    position = {n.name: i for i, n in enumerate(nodes)}
    taken = set(position)
    after: dict[str, list[Node]] = {}  # node name -> links placed right after it
    for n in sums:
        acc, last = n.inputs[0], position.get(n.inputs[0][0], -1)
        for k, x in enumerate(n.inputs[1:], 1):
            final = k == len(n.inputs) - 1
            name = n.name if final else fresh_name(f"{n.name}/Accumulate_{k}", taken)
            control = n.control if k == 1 else ()
            link = make_node(name, "AddV2", (acc, x), control, n.device, {"T": n.attrs["T"]})
            last = max(last, position.get(x[0], -1))
            after.setdefault(nodes[last].name if last >= 0 else n.name, []).append(link)
            acc = (name, 0)
    replaced = {n.name for n in sums}
    out = []
    for n in nodes:
        if n.name not in replaced:
            out.append(n)
        out.extend(after.get(n.name, ()))
    return out


def _large_sums(nodes: list[Node], feed_shapes: dict) -> list[Node]:
    """The AddN nodes worth a chain: 3 or more same-shaped inputs of a numeric type, and at
    least MIN_SAVED_BYTES that would otherwise wait for the last input."""
    by_name = {n.name: n for n in nodes}
    sums = [
        n
        for n in nodes
        if n.op == "AddN"
        and len(n.inputs) >= 3
        and _summable(n.attrs["T"])
        and rules.is_pure(n, by_name)
    ]
    if not sums:
        return []
    props = static_shapes.infer(nodes, feed_shapes)
    out = []
    for n in sums:
        shape = _common_shape([props.shape(s, p) for s, p in n.inputs])
        itemsize = dtypes.as_dtype(n.attrs["T"]).base_dtype.size
        if shape is not None and (len(n.inputs) - 2) * shape.num_elements() * itemsize >= (
            MIN_SAVED_BYTES
        ):
            out.append(n)
    return out


def _common_shape(shapes):
    first = shapes[0]
    if not first.is_fully_defined() or any(s.as_tuple() != first.as_tuple() for s in shapes):
        return None
    return first

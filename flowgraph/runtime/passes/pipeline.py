"""The one place that orders the graph passes and reads the TF1 options that switch them.

TensorFlow runs two optimizers, and so do we. The classic GraphOptimizer: OptimizerOptions
opt_level L1 (the default, 0) turns on common subexpression elimination and constant folding
whatever the flags say; L0 (-1) leaves them to `do_common_subexpression_elimination` and
`do_constant_folding`. Grappler's meta optimizer (RewriterConfig): `constant_folding` and
`arithmetic_optimization` are on unless OFF, all of it is off with `disable_meta_optimizer`, and
it leaves alone graphs of fewer than `min_graph_nodes` nodes (0 means TF's 4, negative never).
Constant folding belongs to both, so turning it off takes both switches, as in TensorFlow.
`dependency_optimization` (dependency.py: gradients only a gate reads, relaying NoOps and
Identities) is on unless OFF, like the other rewrites.
The memory optimizer (`memory_optimization`, memory.py) is Grappler's too, and runs after the
rewrites that remove nodes, as in TensorFlow's meta optimizer; then the remapper (`remapping`,
remapper.py: a convolution's bias and ReLU fused into it; pool_masks.py: a max-pool keeping
its gradient's cells; read_parse.py: a reader's records parsed in its buffer), on unless OFF.
"""

from __future__ import annotations

from flowgraph.core.device_spec import parse
from flowgraph.core.protos import ConfigProto, RewriterConfig
from flowgraph.runtime.nodes import Node
from flowgraph.runtime.passes.arithmetic import simplify_arithmetic
from flowgraph.runtime.passes.borrowed_restores import mark_borrowed_restores
from flowgraph.runtime.passes.constant_folding import MAX_CONSTANT_BYTES, fold_constants
from flowgraph.runtime.passes.cse import eliminate_common_subexpressions
from flowgraph.runtime.passes.dependency import optimize_dependencies
from flowgraph.runtime.passes.fusion import fuse, global_jit
from flowgraph.runtime.passes.memory import optimize_memory
from flowgraph.runtime.passes.pool_masks import keep_pool_masks
from flowgraph.runtime.passes.read_parse import fuse_read_parse
from flowgraph.runtime.passes.remapper import fuse_conv_epilogues

_L0 = -1
_MIN_GRAPH_NODES = 4  # TensorFlow's kDefaultMinGraphNodes


def cse_enabled(config: ConfigProto) -> bool:
    opts = config.graph_options.optimizer_options
    return opts.opt_level != _L0 or opts.do_common_subexpression_elimination


def _meta_optimizer_runs(config: ConfigProto, nodes: list[Node]) -> bool:
    rw = config.graph_options.rewrite_options
    if rw.disable_meta_optimizer:
        return False
    least = rw.min_graph_nodes or _MIN_GRAPH_NODES
    return least < 0 or sum(n.op != "_Send" for n in nodes) >= least


def constant_folding_enabled(config: ConfigProto, nodes: list[Node]) -> bool:
    opts = config.graph_options.optimizer_options
    if opts.opt_level != _L0 or opts.do_constant_folding:
        return True
    rw = config.graph_options.rewrite_options
    return rw.constant_folding != RewriterConfig.OFF and _meta_optimizer_runs(config, nodes)


def arithmetic_enabled(config: ConfigProto, nodes: list[Node]) -> bool:
    rw = config.graph_options.rewrite_options
    return rw.arithmetic_optimization != RewriterConfig.OFF and _meta_optimizer_runs(config, nodes)


def remapping_enabled(config: ConfigProto, nodes: list[Node]) -> bool:
    rw = config.graph_options.rewrite_options
    return rw.remapping != RewriterConfig.OFF and _meta_optimizer_runs(config, nodes)


def dependency_enabled(config: ConfigProto, nodes: list[Node]) -> bool:
    rw = config.graph_options.rewrite_options
    return rw.dependency_optimization != RewriterConfig.OFF and _meta_optimizer_runs(config, nodes)


def separate_memory(config: ConfigProto):
    """Whether a device has a memory of its own (memory.py swaps out of it): every device not of
    type CPU, and those `experimental.separate_memory_devices` declares."""
    declared = [parse(spec) for spec in config.experimental.separate_memory_devices]

    def has(device: str) -> bool:
        spec = parse(device)
        return spec.device_type not in (None, "CPU") or any(
            d.is_compatible_with(spec) for d in declared
        )

    return has


def optimize(
    nodes: list[Node], config: ConfigProto, keep: frozenset, feed_shapes: dict | None = None
) -> list[Node]:
    """Runs the enabled passes in order over a pruned signature graph (feeds are _Recv nodes,
    fetches _Send nodes, so fed and fetched tensors are kept by construction). `feed_shapes`
    gives the static shapes of fed placeholders (static_shapes.placeholder_shapes)."""
    feed_shapes = feed_shapes or {}
    if constant_folding_enabled(config, nodes):
        limit = config.graph_options.optimizer_options.max_folded_constant_in_bytes
        nodes = fold_constants(nodes, keep, feed_shapes, limit or MAX_CONSTANT_BYTES)
    if arithmetic_enabled(config, nodes):
        nodes = simplify_arithmetic(nodes, keep, feed_shapes)
    if cse_enabled(config):
        nodes = eliminate_common_subexpressions(nodes, keep)
    if dependency_enabled(config, nodes):
        nodes = optimize_dependencies(nodes, keep)
    if _meta_optimizer_runs(config, nodes):
        nodes = optimize_memory(nodes, config, keep, feed_shapes, separate_memory(config))
    if remapping_enabled(config, nodes):
        nodes = fuse_read_parse(keep_pool_masks(fuse_conv_epilogues(nodes, keep)), keep)
    # last: compiled fusion (§10) sees the graph the other passes left
    nodes = fuse(nodes, global_jit(config), keep)
    # not an optimization but a fact for RestoreV2's kernel: its outputs are only copied
    return mark_borrowed_restores(nodes, keep)

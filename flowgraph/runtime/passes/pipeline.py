"""The one place that orders the graph passes and reads the TF1 options that switch them.

TensorFlow's GraphOptimizer rule: OptimizerOptions.opt_level L1 (the default, 0) turns on common
subexpression elimination whatever the flag says; L0 (-1) leaves it to
`do_common_subexpression_elimination`. RewriterConfig.disable_meta_optimizer does not switch it
(it is the classic optimizer's pass, not Grappler's).
"""

from __future__ import annotations

from flowgraph.core.protos import ConfigProto
from flowgraph.runtime.graph import Node
from flowgraph.runtime.passes.cse import eliminate_common_subexpressions
from flowgraph.runtime.passes.fusion import fuse, global_jit

_L0 = -1


def cse_enabled(config: ConfigProto) -> bool:
    opts = config.graph_options.optimizer_options
    return opts.opt_level != _L0 or opts.do_common_subexpression_elimination


def optimize(nodes: list[Node], config: ConfigProto, keep: frozenset) -> list[Node]:
    """Runs the enabled passes in order over a pruned signature graph (feeds are _Recv nodes,
    fetches _Send nodes, so fed and fetched tensors are kept by construction)."""
    if cse_enabled(config):
        nodes = eliminate_common_subexpressions(nodes, keep)
    # last: compiled fusion (§10) sees the graph the other passes left
    nodes = fuse(nodes, global_jit(config), keep)
    return nodes

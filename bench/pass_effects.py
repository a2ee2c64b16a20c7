"""Node counts of the examples' training steps with each graph pass alone and all together
(issue 13: each pass's effect on the examples' training graphs).

    python bench/pass_effects.py

One training step (loss and train op, one fixed batch) of each graph in
flowgraph/examples/training_graphs.py runs once per configuration; the count is the nodes of its
partition graphs (RunOptions.output_partition_graphs: what actually ran, feeds' _Recv and
fetches' _Send included). `none` is opt_level L0 with Grappler's constant folding and arithmetic
optimization OFF; each pass column turns on that one pass; `all` is the default ConfigProto.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import flowgraph as tf
from flowgraph.core.protos import RewriterConfig
from flowgraph.examples import training_graphs

OFF = RewriterConfig.OFF


def _config(fold=False, arithmetic=False, cse=False, default=False) -> tf.ConfigProto:
    config = tf.ConfigProto()
    if default:
        return config
    opts = config.graph_options.optimizer_options
    opts.opt_level = tf.OptimizerOptions.L0
    opts.do_common_subexpression_elimination = cse
    rw = config.graph_options.rewrite_options
    rw.constant_folding = RewriterConfig.DEFAULT if fold else OFF
    rw.arithmetic_optimization = RewriterConfig.DEFAULT if arithmetic else OFF
    return config


CONFIGS = {
    "none": _config(),
    "folding": _config(fold=True),
    "arithmetic": _config(arithmetic=True),
    "cse": _config(cse=True),
    "all": _config(default=True),
}


def count(name: str, config: tf.ConfigProto) -> tuple[int, float]:
    """(nodes that ran in one training step, seconds of that first run incl. planning)."""
    g = tf.Graph()
    with g.as_default():
        graph = training_graphs.BUILDERS[name]()
        init = tf.global_variables_initializer()
    with tf.Session(graph=g, config=config) as s:
        s.run(init)
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True)
        t0 = time.perf_counter()
        s.run([graph.loss, graph.train], graph.feeds, options=opts, run_metadata=md)
        seconds = time.perf_counter() - t0
    return sum(len(p.node) for p in md.partition_graphs), seconds


def main() -> None:
    header = f"{'graph':<12}" + "".join(f"{c:>12}" for c in CONFIGS) + f"{'removed':>10}"
    print(header)
    print("-" * len(header))
    for name in sorted(training_graphs.BUILDERS):
        counts = {c: count(name, config)[0] for c, config in CONFIGS.items()}
        cells = "".join(f"{counts[c]:>12}" for c in CONFIGS)
        removed = 1 - counts["all"] / counts["none"]
        print(f"{name:<12}{cells}{removed:>10.1%}")


if __name__ == "__main__":
    main()

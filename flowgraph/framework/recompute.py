"""`recompute_grad`: the user marks a block whose activations the backward pass should recompute
instead of keeping (whitepaper §4.1).

TF1's `tf.contrib.layers.recompute_grad` builds its own gradient that re-runs the block; here
the block's ops carry the `_recompute_hint` attr, Grappler's mark, and the runtime's memory
optimizer (runtime/passes/recompute.py) makes the copies: the block's forward ops that the
backward pass reads, directly or through other marked ops, are recomputed from the block's
inputs just before their first gradient consumer. The results are those of the unmarked block,
bit for bit; the cost is running the block's forward ops twice.

Example:

    @tf.contrib.layers.recompute_grad
    def block(h):
        return tf.nn.relu(tf.layers.dense(h, 1024))
"""

from __future__ import annotations

import functools

from flowgraph.framework import default_graph

RECOMPUTE_HINT = "_recompute_hint"  # the runtime reads only its presence (Grappler's tests set 0)


def recompute_grad(fn, use_data_dep=None, tupleize_grads=False):
    """Returns `fn` with every op it builds marked for recomputation in the backward pass.

    `use_data_dep` and `tupleize_grads` are TF1's knobs for how its own gradient orders the
    recomputation; here the memory optimizer always orders it by control edges from the
    backward pass, so they change nothing (a non-bool `tupleize_grads` is refused).
    """
    if not isinstance(tupleize_grads, bool):
        raise TypeError(f"recompute_grad: tupleize_grads must be a bool, got {tupleize_grads!r}")
    del use_data_dep

    @functools.wraps(fn)
    def marked(*args, **kwargs):
        with default_graph.get()._attr_scope({RECOMPUTE_HINT: 0}):
            return fn(*args, **kwargs)

    return marked

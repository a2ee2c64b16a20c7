"""Graph-pass workloads (issue 13 §5.1; whitepaper §5.1), written once over a `tf` module like
the rest of `workloads.py`, which appends them to its table.

W2c  W2's chain of 1000 scalar adds with constants instead of feeds: TensorFlow's Grappler folds
     it into one Const, and so does flowgraph's constant folding (runtime/passes/
     constant_folding.py), so a run is the fetch of one constant. Target: at most 1.5x TF. The
     one-time folding cost falls in the warm-up run (the plan is cached per signature).

`python bench/pass_effects.py` prints the other half of the passes' report: node counts of the
examples' training steps with each pass alone and all together.
"""

from __future__ import annotations

from workloads import W1_INNER, W2_CHAIN, Target, Workload, session, timed_runs


def build_w2c(tf):
    """x = a; then W2_CHAIN times x = x + b, with scalar constants a and b; W1_INNER runs."""
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="a")
        b = tf.constant(0.5, name="b")
        x = a
        for _ in range(W2_CHAIN):
            x = tf.add(x, b)
    return timed_runs(session(tf, g), x, inner=W1_INNER)


PASS_WORKLOADS = [
    Workload("W2c", "1000 const scalar adds", "us/run", W1_INNER, Target(ratio=1.5), build_w2c, 25),
]

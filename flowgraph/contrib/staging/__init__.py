"""tf.contrib.staging: the StagingArea (owned by flowgraph/ops/accumulators.py)."""

from flowgraph.ops.accumulators import StagingArea

__all__ = ["StagingArea"]

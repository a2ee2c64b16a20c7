"""Wrappers of the data-flow ops that gradients also use: dynamic_stitch, unsorted_segment_sum,
invert_permutation (TF1's data_flow_ops / math_ops names)."""

from __future__ import annotations

from flowgraph.framework.apply_op import apply_op

__all__ = ["dynamic_stitch", "invert_permutation", "unsorted_segment_sum"]


def dynamic_stitch(indices, data, name=None):
    """merged[indices[m][i]] = data[m][i]; later entries win on duplicate indices."""
    return apply_op("DynamicStitch", [list(indices), list(data)], name=name).outputs[0]


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """out[s] = sum of data[i] over the i with segment_ids[i] == s (ids may be in any order)."""
    return apply_op("UnsortedSegmentSum", [data, segment_ids, num_segments], name=name).outputs[0]


def invert_permutation(x, name=None):
    """y[x[i]] = i."""
    return apply_op("InvertPermutation", [x], name=name).outputs[0]

"""tf.image's non-maximum suppression (object detection): keep the highest-scoring boxes,
dropping each box that overlaps an already kept one by more than a threshold.

Example:
    keep = tf.image.non_max_suppression(boxes, scores, max_output_size=10, iou_threshold=0.5)
    best_boxes = tf.gather(boxes, keep)
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import convert
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.scopes import name_scope

__all__ = [
    "non_max_suppression",
    "non_max_suppression_overlaps",
    "non_max_suppression_padded",
    "non_max_suppression_with_scores",
]

_NO_THRESHOLD = float("-inf")


def _thresholds(iou_threshold, score_threshold):
    return (
        convert.convert_to_tensor(iou_threshold, dtypes.float32, name="iou_threshold"),
        convert.convert_to_tensor(score_threshold, dtypes.float32, name="score_threshold"),
    )


def non_max_suppression(
    boxes, scores, max_output_size, iou_threshold=0.5, score_threshold=_NO_THRESHOLD, name=None
):
    """The indices (int32, at most max_output_size, best first) of the boxes [N, 4]
    ([y1, x1, y2, x2]) kept by greedy suppression of overlaps above iou_threshold; boxes
    scoring at most score_threshold are never kept."""
    with name_scope(name, "non_max_suppression"):
        iou, score = _thresholds(iou_threshold, score_threshold)
        inputs = [boxes, scores, max_output_size, iou, score]
        return apply_op("NonMaxSuppressionV3", inputs).outputs[0]


def non_max_suppression_padded(
    boxes,
    scores,
    max_output_size,
    iou_threshold=0.5,
    score_threshold=_NO_THRESHOLD,
    pad_to_max_output_size=False,
    name=None,
):
    """(indices, number valid): non_max_suppression whose indices are zero-padded to
    max_output_size when pad_to_max_output_size (a static shape for batching)."""
    with name_scope(name, "non_max_suppression_padded"):
        iou, score = _thresholds(iou_threshold, score_threshold)
        op = apply_op(
            "NonMaxSuppressionV4",
            [boxes, scores, max_output_size, iou, score],
            pad_to_max_output_size=pad_to_max_output_size,
        )
        return op.outputs[0], op.outputs[1]


def non_max_suppression_with_scores(
    boxes,
    scores,
    max_output_size,
    iou_threshold=0.5,
    score_threshold=_NO_THRESHOLD,
    soft_nms_sigma=0.0,
    name=None,
):
    """(indices, their scores) of non_max_suppression. Soft-NMS (soft_nms_sigma > 0) is not
    built and raises UnimplementedError when the op runs."""
    with name_scope(name, "non_max_suppression_with_scores"):
        iou, score = _thresholds(iou_threshold, score_threshold)
        sigma = convert.convert_to_tensor(soft_nms_sigma, dtypes.float32, name="soft_nms_sigma")
        op = apply_op(
            "NonMaxSuppressionV5",
            [boxes, scores, max_output_size, iou, score, sigma],
            pad_to_max_output_size=False,
        )
        return op.outputs[0], op.outputs[1]


def non_max_suppression_overlaps(
    overlaps,
    scores,
    max_output_size,
    overlap_threshold=0.5,
    score_threshold=_NO_THRESHOLD,
    name=None,
):
    """non_max_suppression over a given [N, N] overlap matrix instead of box IoUs."""
    with name_scope(name, "non_max_suppression_overlaps"):
        threshold, score = _thresholds(overlap_threshold, score_threshold)
        inputs = [overlaps, scores, max_output_size, threshold, score]
        return apply_op("NonMaxSuppressionWithOverlaps", inputs).outputs[0]

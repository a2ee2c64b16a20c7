"""CPU kernels of non-maximum suppression (see flowgraph/opdefs/image_boxes.py).

TensorFlow's greedy rule: candidates above the score threshold in order of decreasing score
(ties: the lower index first); each is selected unless it overlaps an already selected box by
more than the threshold. One vectorized overlap test per selected box (at most
max_output_size of them) against all remaining candidates.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel


def _iou(boxes):
    """overlaps(i, js): the intersection over union of box i with boxes js ([y1, x1, y2, x2],
    corners in any order; an empty box overlaps nothing)."""
    b = boxes.astype(np.float32)
    y_min, y_max = np.minimum(b[:, 0], b[:, 2]), np.maximum(b[:, 0], b[:, 2])
    x_min, x_max = np.minimum(b[:, 1], b[:, 3]), np.maximum(b[:, 1], b[:, 3])
    area = (y_max - y_min) * (x_max - x_min)

    def overlaps(i, js):
        height = np.maximum(np.minimum(y_max[i], y_max[js]) - np.maximum(y_min[i], y_min[js]), 0)
        width = np.maximum(np.minimum(x_max[i], x_max[js]) - np.maximum(x_min[i], x_min[js]), 0)
        inter = height * width
        union = area[i] + area[js] - inter
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = inter / union
        return np.where((area[i] <= 0) | (area[js] <= 0), 0.0, iou)

    return overlaps


def _select(overlaps, scores, max_output_size, threshold, score_threshold):
    """Indices selected greedily (int32), in selection order."""
    max_output_size = int(max_output_size)
    if max_output_size < 0:
        raise errors.InvalidArgumentError(None, None, "max_output_size must be non-negative")
    scores = np.asarray(scores, np.float32)
    candidates = np.flatnonzero(scores > np.float32(score_threshold))
    candidates = candidates[np.argsort(-scores[candidates], kind="stable")]
    selected = []
    while candidates.size and len(selected) < max_output_size:
        best, rest = candidates[0], candidates[1:]
        selected.append(best)
        candidates = rest[overlaps(best, rest) <= np.float32(threshold)]
    return np.asarray(selected, np.int32)


def _check_boxes(boxes, scores):
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise errors.InvalidArgumentError(
            None, None, f"boxes must be of shape [num_boxes, 4], got {list(boxes.shape)}"
        )
    if scores.shape != (boxes.shape[0],):
        raise errors.InvalidArgumentError(
            None, None, f"scores has incompatible shape {list(scores.shape)}"
        )


def _threshold(value, what):
    value = float(np.asarray(value))
    if not 0 <= value <= 1:
        raise errors.InvalidArgumentError(None, None, f"{what} must be in [0, 1]")
    return value


@register_kernel("NonMaxSuppression")
@register_kernel("NonMaxSuppressionV2")
@register_kernel("NonMaxSuppressionV3")
def non_max_suppression(ctx, boxes, scores, max_output_size, iou_threshold=None, score=-np.inf):
    if iou_threshold is None:  # NonMaxSuppression (v1) has it as an attr
        iou_threshold = ctx.attrs["iou_threshold"]
    _check_boxes(boxes, scores)
    threshold = _threshold(iou_threshold, "iou_threshold")
    return _select(_iou(boxes), scores, max_output_size, threshold, score)


def _padded(selected, size, pad):
    valid = np.int32(selected.size)
    if pad:
        selected = np.concatenate([selected, np.zeros(int(size) - selected.size, selected.dtype)])
    return selected, valid


@register_kernel("NonMaxSuppressionV4")
def non_max_suppression_v4(ctx, boxes, scores, max_output_size, iou_threshold, score_threshold):
    selected = non_max_suppression(
        ctx, boxes, scores, max_output_size, iou_threshold, score_threshold
    )
    return _padded(selected, max_output_size, ctx.attrs["pad_to_max_output_size"])


@register_kernel("NonMaxSuppressionV5")
def non_max_suppression_v5(
    ctx, boxes, scores, max_output_size, iou_threshold, score_threshold, soft_nms_sigma
):
    if float(soft_nms_sigma) != 0:
        raise errors.UnimplementedError(
            None, None, "NonMaxSuppressionV5 with soft_nms_sigma != 0 (Soft-NMS) is not built"
        )
    selected = non_max_suppression(
        ctx, boxes, scores, max_output_size, iou_threshold, score_threshold
    )
    picked, valid = _padded(selected, max_output_size, ctx.attrs["pad_to_max_output_size"])
    chosen_scores = np.zeros(picked.shape, scores.dtype)
    chosen_scores[: selected.size] = scores[selected]
    return picked, chosen_scores, valid


@register_kernel("NonMaxSuppressionWithOverlaps")
def non_max_suppression_with_overlaps(
    ctx, overlaps, scores, max_output_size, overlap_threshold, score_threshold
):
    n = scores.shape[0]
    if overlaps.shape != (n, n):
        raise errors.InvalidArgumentError(
            None, None, f"overlaps must be of shape [{n}, {n}], got {list(overlaps.shape)}"
        )
    matrix = overlaps.astype(np.float32)
    return _select(
        lambda i, js: matrix[js, i],  # overlaps[candidate, selected], as TF reads it
        scores,
        max_output_size,
        float(overlap_threshold),
        score_threshold,
    )

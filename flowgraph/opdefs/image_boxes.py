"""OpDefs of non-maximum suppression (TensorFlow's image_ops.cc): greedy selection of boxes by
score, dropping those that overlap a selected one too much (object detection)."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape


def _nms_shape(outputs=1, boxes=True):
    """boxes [N, 4] (or overlaps [N, N]), scores [N], scalar limits; the indices [?] (or
    [max_output_size] when padded), then `outputs - 1` more: scores like the indices, and the
    scalar count of valid entries last."""

    def shape_fn(ctx):
        first = ctx.input_shapes[0].with_rank(2)
        if boxes and first[1].value not in (None, 4):
            raise ValueError(f"boxes must have 4 coordinates per box, got shape {first}")
        ctx.input_shapes[1].with_rank(1)
        for shape in ctx.input_shapes[2:]:
            shape.with_rank(0)
        size = ctx.input_constant(2)
        pad = ctx.attrs.get("pad_to_max_output_size", False)
        selected = TensorShape([int(size) if pad and size is not None else None])
        if outputs == 1:
            return selected
        return [selected] * (outputs - 1) + [TensorShape([])]

    return shape_fn


_TYPES = ["T: {half, float} = DT_FLOAT", "T_threshold: {half, float} = DT_FLOAT"]
register_op(
    OpDef(
        "NonMaxSuppression",
        inputs=["boxes: float", "scores: float", "max_output_size: int32"],
        outputs=["selected_indices: int32"],
        attrs=["iou_threshold: float = 0.5"],
        shape_fn=_nms_shape(),
    )
)
register_op(
    OpDef(
        "NonMaxSuppressionV2",
        inputs=["boxes: T", "scores: T", "max_output_size: int32", "iou_threshold: T_threshold"],
        outputs=["selected_indices: int32"],
        attrs=_TYPES,
        shape_fn=_nms_shape(),
    )
)
_V3_INPUTS = [
    "boxes: T",
    "scores: T",
    "max_output_size: int32",
    "iou_threshold: T_threshold",
    "score_threshold: T_threshold",
]
register_op(
    OpDef(
        "NonMaxSuppressionV3",
        inputs=_V3_INPUTS,
        outputs=["selected_indices: int32"],
        attrs=_TYPES,
        shape_fn=_nms_shape(),
    )
)
register_op(
    OpDef(
        "NonMaxSuppressionV4",
        inputs=_V3_INPUTS,
        outputs=["selected_indices: int32", "valid_outputs: int32"],
        attrs=[*_TYPES, "pad_to_max_output_size: bool = false"],
        shape_fn=_nms_shape(outputs=2),
    )
)
register_op(
    OpDef(
        "NonMaxSuppressionV5",
        inputs=[
            "boxes: T",
            "scores: T",
            "max_output_size: int32",
            "iou_threshold: T",
            "score_threshold: T",
            "soft_nms_sigma: T",
        ],
        outputs=["selected_indices: int32", "selected_scores: T", "valid_outputs: int32"],
        attrs=["T: {half, float} = DT_FLOAT", "pad_to_max_output_size: bool = false"],
        shape_fn=_nms_shape(outputs=3),
    )
)
register_op(
    OpDef(
        "NonMaxSuppressionWithOverlaps",
        inputs=[
            "overlaps: float",
            "scores: float",
            "max_output_size: int32",
            "overlap_threshold: float",
            "score_threshold: float",
        ],
        outputs=["selected_indices: int32"],
        shape_fn=_nms_shape(boxes=False),
    )
)

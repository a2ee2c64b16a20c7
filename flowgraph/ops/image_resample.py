"""tf.image's box operations: crops resized from normalized boxes (tf.image.crop_and_resize,
the ROI sampling of detection models), box outlines drawn into images
(tf.image.draw_bounding_boxes, for summaries) and random crops that keep part of an object
(tf.image.sample_distorted_bounding_box, Inception-style augmentation).

Example:
    crops = tf.image.crop_and_resize(images, boxes, box_ind, crop_size=[14, 14])
    tf.summary.image("boxes", tf.image.draw_bounding_boxes(images, boxes[None]))
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import convert, default_graph
from flowgraph.framework.apply_op import apply_op

__all__ = ["crop_and_resize", "draw_bounding_boxes", "sample_distorted_bounding_box"]


def crop_and_resize(
    image,
    boxes,
    box_ind=None,
    crop_size=None,
    method="bilinear",
    extrapolation_value=0,
    name=None,
    box_indices=None,
):
    """[num_boxes, crop_height, crop_width, depth] float32 crops of `image` [batch, h, w, d]:
    box i ([y1, x1, y2, x2] in [0, 1] image coordinates, y1 > y2 flips) is sampled from image
    box_ind[i] on a crop_size grid, bilinearly or at the nearest pixel; samples outside the
    image take `extrapolation_value`.

    Example: tf.image.crop_and_resize(images, [[0., 0., .5, .5]], [0], [7, 7])
    """
    if box_ind is not None and box_indices is not None:
        raise ValueError("Cannot specify both 'box_ind' and 'box_indices'.")
    box_ind = box_indices if box_ind is None else box_ind
    if box_ind is None or crop_size is None:
        raise TypeError("crop_and_resize() needs box_ind (box_indices) and crop_size")
    return apply_op(
        "CropAndResize",
        [
            image,
            convert.convert_to_tensor(boxes, dtypes.float32, name="boxes"),
            convert.convert_to_tensor(box_ind, dtypes.int32, name="box_ind"),
            convert.convert_to_tensor(crop_size, dtypes.int32, name="crop_size"),
        ],
        name=name,
        method=method,
        extrapolation_value=float(extrapolation_value),
    ).outputs[0]


def draw_bounding_boxes(images, boxes, name=None, colors=None):
    """`images` [batch, h, w, 1|3|4] (float32 or half) with the outlines of `boxes` [batch,
    num_boxes, 4] ([y_min, x_min, y_max, x_max] in [0, 1]) drawn in `colors` ([n, 4] RGBA,
    cycled), by default TF's ten-color table (white boxes on gray images).

    Example: tf.image.draw_bounding_boxes(images, [[[0.1, 0.1, 0.9, 0.9]]])
    """
    boxes = convert.convert_to_tensor(boxes, dtypes.float32, name="boxes")
    if colors is None:
        return apply_op("DrawBoundingBoxes", [images, boxes], name=name).outputs[0]
    colors = convert.convert_to_tensor(colors, dtypes.float32, name="colors")
    return apply_op("DrawBoundingBoxesV2", [images, boxes, colors], name=name).outputs[0]


def sample_distorted_bounding_box(
    image_size,
    bounding_boxes,
    seed=None,
    seed2=None,
    min_object_covered=0.1,
    aspect_ratio_range=None,
    area_range=None,
    max_attempts=None,
    use_image_if_no_bounding_boxes=None,
    name=None,
):
    """A random crop for data augmentation: (begin, size, bboxes), begin and size for tf.slice
    of an image of `image_size` [h, w, c], bboxes [1, 1, 4] for draw_bounding_boxes. The crop
    has an aspect ratio in `aspect_ratio_range`, an area fraction in `area_range` and covers at
    least `min_object_covered` of one of `bounding_boxes` ([batch, n, 4]); after
    `max_attempts` misses it is the whole image. The draws are TensorFlow's Philox stream: with
    the same seed and seed2 (taken as given, as TF1 does) they are TF's crops.

    Example: begin, size, _ = tf.image.sample_distorted_bounding_box(tf.shape(img), boxes, seed=1)
    """
    attrs = {"seed": int(seed or 0), "seed2": int(seed2 or 0)}
    for key, value in (
        ("aspect_ratio_range", aspect_ratio_range),
        ("area_range", area_range),
        ("max_attempts", max_attempts),
        ("use_image_if_no_bounding_boxes", use_image_if_no_bounding_boxes),
    ):
        if value is not None:
            attrs[key] = [float(v) for v in value] if key.endswith("range") else value
    graph = default_graph.get()
    with graph.name_scope(name or "sample_distorted_bounding_box"):
        inputs = [
            image_size,
            convert.convert_to_tensor(bounding_boxes, dtypes.float32, name="bounding_boxes"),
            convert.convert_to_tensor(
                min_object_covered, dtypes.float32, name="min_object_covered"
            ),
        ]
        return tuple(apply_op("SampleDistortedBoundingBoxV2", inputs, **attrs).outputs)

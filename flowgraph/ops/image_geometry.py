"""tf.image's geometric ops on an image [height, width, channels] or a batch of them: crops,
pads, crop-or-pad to a size, letterboxing, rotations by 90 degrees and transposes.

Sizes and offsets may be Python ints or tensors, and the image's height and width may be known
only at run time, as in TensorFlow 1.15: checks whose answer is known now raise ValueError now,
the others become Assert ops that fail the step.

Example:
    image = tf.image.resize_image_with_crop_or_pad(image, 224, 224)
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import convert
from flowgraph.framework.operation import Tensor
from flowgraph.framework.scopes import control_dependencies, name_scope
from flowgraph.ops import array as array_ops
from flowgraph.ops import logging
from flowgraph.ops import math as math_ops
from flowgraph.ops.array_index import slice_
from flowgraph.ops.control_flow import case, cond

__all__ = [
    "central_crop",
    "crop_to_bounding_box",
    "pad_to_bounding_box",
    "resize_image_with_crop_or_pad",
    "resize_image_with_pad",
    "resize_with_crop_or_pad",
    "rot90",
    "transpose",
    "transpose_image",
]


def _as_batch(image):
    """(a 4-D image, whether the input was a batch); ValueError for other static ranks."""
    image = convert.convert_to_tensor(image, name="image")
    rank = image.shape.ndims
    if rank == 4:
        return image, True
    if rank not in (None, 3):
        raise ValueError("'image' must have either 3 or 4 dimensions.")
    batch = array_ops.expand_dims(image, 0)
    if rank is None:
        batch.set_shape([None] * 4)
    return batch, False


def _unbatch(image, was_batch):
    return image if was_batch else array_ops.squeeze(image, [0])


def _dims(image):
    """[batch, height, width, depth] of a 4-D image: ints where static, else scalar tensors."""
    static = image.shape.as_list()
    dynamic = array_ops.shape(image)
    return [s if s is not None else dynamic[i] for i, s in enumerate(static)]


def _check(condition, message):
    """[] when `condition` is a true Python bool, ValueError when false, else [Assert]."""
    if isinstance(condition, Tensor):
        return [logging.Assert(condition, [message])]
    if not condition:
        raise ValueError(message)
    return []


def _guarded(checks, value):
    if not checks:
        return value
    with control_dependencies(checks):
        return array_ops.identity(value)


def _static(values):
    return [None if isinstance(v, Tensor) else v for v in values]


def crop_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """The [target_height, target_width] window of `image` whose top-left corner is at
    (offset_height, offset_width)."""
    with name_scope(None, "crop_to_bounding_box", [image]):
        image, was_batch = _as_batch(image)
        batch, height, width, depth = _dims(image)
        checks = _check(offset_width >= 0, "offset_width must be >= 0.")
        checks += _check(offset_height >= 0, "offset_height must be >= 0.")
        checks += _check(target_width > 0, "target_width must be > 0.")
        checks += _check(target_height > 0, "target_height must be > 0.")
        checks += _check(width >= target_width + offset_width, "width must be >= target + offset.")
        checks += _check(
            height >= target_height + offset_height, "height must be >= target + offset."
        )
        image = _guarded(checks, image)
        cropped = slice_(
            image,
            array_ops.stack([0, offset_height, offset_width, 0]),
            array_ops.stack([-1, target_height, target_width, -1]),
        )
        cropped.set_shape(_static([batch, target_height, target_width, depth]))
        return _unbatch(cropped, was_batch)


def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """`image` zero-padded to [target_height, target_width], its top-left corner at
    (offset_height, offset_width)."""
    with name_scope(None, "pad_to_bounding_box", [image]):
        image, was_batch = _as_batch(image)
        batch, height, width, depth = _dims(image)
        after_width = target_width - offset_width - width
        after_height = target_height - offset_height - height
        checks = _check(offset_height >= 0, "offset_height must be >= 0")
        checks += _check(offset_width >= 0, "offset_width must be >= 0")
        checks += _check(after_width >= 0, "width must be <= target - offset")
        checks += _check(after_height >= 0, "height must be <= target - offset")
        image = _guarded(checks, image)
        paddings = array_ops.reshape(
            array_ops.stack([0, 0, offset_height, after_height, offset_width, after_width, 0, 0]),
            [4, 2],
        )
        padded = array_ops.pad(image, paddings)
        padded.set_shape(_static([batch, target_height, target_width, depth]))
        return _unbatch(padded, was_batch)


def central_crop(image, central_fraction):
    """The central `central_fraction` (in (0, 1]) of the image's height and width."""
    with name_scope(None, "central_crop", [image]):
        image = convert.convert_to_tensor(image, name="image")
        if central_fraction <= 0.0 or central_fraction > 1.0:
            raise ValueError("central_fraction must be within (0, 1]")
        if central_fraction == 1.0:
            return image
        rank = image.shape.ndims
        if rank not in (3, 4):
            raise ValueError(
                f"`image` should either be a Tensor with rank = 3 or rank = 4. Had rank = {rank}."
            )
        first = rank - 3  # the height axis
        starts, sizes = [], []
        for axis in (first, first + 1):
            length = image.shape[axis].value
            if length is None:
                dynamic = math_ops.cast(array_ops.shape(image)[axis], dtypes.float64)
                start = math_ops.cast((dynamic - dynamic * central_fraction) / 2, dtypes.int32)
                size = array_ops.shape(image)[axis] - start * 2
            else:
                start = int((length - length * central_fraction) / 2)
                size = length - start * 2
            starts.append(start)
            sizes.append(size)
        lead = [0] if rank == 4 else []
        keep = [-1] if rank == 4 else []
        cropped = slice_(
            image, array_ops.stack(lead + starts + [0]), array_ops.stack(keep + sizes + [-1])
        )
        shape = image.shape.as_list()
        shape[first : first + 2] = _static(sizes)
        cropped.set_shape(shape)
        return cropped


def _maximum(x, y):
    return math_ops.maximum(x, y) if isinstance(x, Tensor) or isinstance(y, Tensor) else max(x, y)


def _minimum(x, y):
    return math_ops.minimum(x, y) if isinstance(x, Tensor) or isinstance(y, Tensor) else min(x, y)


def resize_image_with_crop_or_pad(image, target_height, target_width):
    """Crops (centrally) or zero-pads (evenly) the image to [target_height, target_width]."""
    with name_scope(None, "resize_image_with_crop_or_pad", [image]):
        image, was_batch = _as_batch(image)
        checks = _check(target_width > 0, "target_width must be > 0.")
        checks += _check(target_height > 0, "target_height must be > 0.")
        image = _guarded(checks, image)
        _, height, width, _ = _dims(image)
        width_diff, height_diff = target_width - width, target_height - height
        cropped = crop_to_bounding_box(
            image,
            _maximum(-height_diff // 2, 0),
            _maximum(-width_diff // 2, 0),
            _minimum(target_height, height),
            _minimum(target_width, width),
        )
        resized = pad_to_bounding_box(
            cropped,
            _maximum(height_diff // 2, 0),
            _maximum(width_diff // 2, 0),
            target_height,
            target_width,
        )
        return _unbatch(resized, was_batch)


resize_with_crop_or_pad = resize_image_with_crop_or_pad


def resize_image_with_pad(image, target_height, target_width, method=0, align_corners=False):
    """Resizes keeping the aspect ratio until the image fits [target_height, target_width],
    then zero-pads it there, centered (letterboxing)."""
    from flowgraph.ops.image_ops import resize_images

    with name_scope(None, "resize_image_with_pad", [image]):
        image, was_batch = _as_batch(image)
        checks = _check(target_width > 0, "target_width must be > 0.")
        checks += _check(target_height > 0, "target_height must be > 0.")
        image = _guarded(checks, image)
        _, height, width, _ = _dims(image)

        def f64(x):
            return math_ops.cast(x, dtypes.float64)

        f_height, f_width = f64(height), f64(width)
        f_target_height, f_target_width = f64(target_height), f64(target_width)
        ratio = math_ops.maximum(f_width / f_target_width, f_height / f_target_height)
        new_height, new_width = f_height / ratio, f_width / ratio
        size = [
            math_ops.cast(math_ops.floor(new_height), dtypes.int32),
            math_ops.cast(math_ops.floor(new_width), dtypes.int32),
        ]
        pad_height = math_ops.maximum(
            0, math_ops.cast(math_ops.floor((f_target_height - new_height) / 2), dtypes.int32)
        )
        pad_width = math_ops.maximum(
            0, math_ops.cast(math_ops.floor((f_target_width - new_width) / 2), dtypes.int32)
        )
        resized = resize_images(image, array_ops.stack(size), method, align_corners)
        padded = pad_to_bounding_box(resized, pad_height, pad_width, target_height, target_width)
        return _unbatch(padded, was_batch)


def _rotations(image, axes):
    """The image rotated by 0, 90, 180 and 270 degrees counter-clockwise over `axes`
    (height, width)."""
    h, w = axes
    perm = list(range(image.shape.ndims if image.shape.ndims is not None else 3))
    perm[h], perm[w] = perm[w], perm[h]
    return [
        lambda: image,
        lambda: array_ops.transpose(array_ops.reverse(image, [w]), perm),
        lambda: array_ops.reverse(image, [h, w]),
        lambda: array_ops.reverse(array_ops.transpose(image, perm), [w]),
    ]


def rot90(image, k=1, name=None):
    """The image (or each image of a batch) rotated k * 90 degrees counter-clockwise."""
    with name_scope(name, "rot90", [image, k]) as scope:
        image = convert.convert_to_tensor(image, name="image")
        rank = image.shape.ndims
        if rank is not None and rank not in (3, 4):
            raise ValueError(f"'image' (shape {image.shape}) must have either 3 or 4 dimensions.")
        axes = (1, 2) if rank == 4 else (0, 1)
        rotations = _rotations(image, axes)
        if isinstance(k, int):
            result = rotations[k % 4]()
            return array_ops.identity(result, name=scope)
        k = convert.convert_to_tensor(k, dtype=dtypes.int32, name="k")
        k.shape.assert_has_rank(0)
        k = math_ops.floormod(k, 4)
        cases = [(math_ops.equal(k, i), rotations[i]) for i in (1, 2, 3)]
        result = case(cases, default=rotations[0], exclusive=True, name=scope)
        if rank == 4:
            result.set_shape([image.shape[0], None, None, image.shape[3]])
        else:
            result.set_shape([None, None, image.shape[-1] if rank else None])
        return result


def transpose_image(image, name=None):
    """Swaps the height and width of the image (or of each image of a batch)."""
    with name_scope(name, "transpose", [image]) as scope:
        image = convert.convert_to_tensor(image, name="image")
        rank = image.shape.ndims
        if rank == 3:
            return array_ops.transpose(image, [1, 0, 2], name=scope)
        if rank == 4:
            return array_ops.transpose(image, [0, 2, 1, 3], name=scope)
        if rank is not None:
            raise ValueError(f"'image' (shape {image.shape}) must have either 3 or 4 dimensions.")
        return cond(
            math_ops.equal(array_ops.rank(image), 3),
            lambda: array_ops.transpose(image, [1, 0, 2]),
            lambda: array_ops.transpose(image, [0, 2, 1, 3]),
            name=scope,
        )


transpose = transpose_image

"""CPU kernels of bicubic and area resizing, CropAndResize (+ its image and box gradients) and
DrawBoundingBoxes, following TensorFlow's kernels' float32 arithmetic.

Bicubic and area resizes are separable: each is an [out, in] weight matrix per axis, built
vectorized from TF's sampling rule, and one einsum applies both (the gradient applies their
transposes). Bicubic weights come from TF's 1025-entry table of the cubic convolution kernel
(a = -0.75, or Keys' a = -0.5 with half-pixel centers, where taps outside the image get weight
0 and the rest are renormalized).
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.image import _check_resize, _scale
from flowgraph.kernels.cpu.random import philox
from flowgraph.kernels.cpu.random_distributions import uint32_to_float

_TABLE_SIZE = 1024


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def _cubic_table(a: float) -> np.ndarray:
    """[TABLE_SIZE + 1, 2]: the kernel's weight at distance x (column 0) and x + 1 (column 1)."""
    x = (np.arange(_TABLE_SIZE + 1) / _TABLE_SIZE).astype(np.float32).astype(np.float64)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    x1 = (x + 1.0).astype(np.float32).astype(np.float64)
    far = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a
    return np.stack([near, far], axis=1).astype(np.float32)


_TABLES = {False: _cubic_table(-0.75), True: _cubic_table(-0.5)}


def _bicubic_matrix(in_size, out_size, align_corners, half_pixel) -> np.ndarray:
    scale = _scale(in_size, out_size, align_corners)
    x = np.arange(out_size, dtype=np.float32)
    src = (x + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel else x * scale
    loc = np.floor(src).astype(np.int64)
    offset = np.rint((src - loc.astype(np.float32)) * np.float32(_TABLE_SIZE)).astype(np.int64)
    table = _TABLES[half_pixel]
    weights = np.stack(
        [
            table[offset, 1],
            table[offset, 0],
            table[_TABLE_SIZE - offset, 0],
            table[_TABLE_SIZE - offset, 1],
        ],
        axis=1,
    )
    taps = loc[:, None] + np.arange(-1, 3)[None, :]
    index = np.clip(taps, 0, in_size - 1)
    if half_pixel:  # Keys: taps outside the image get 0, the rest renormalized
        weights = np.where(index == taps, weights, np.float32(0))
        total = weights.sum(axis=1, keepdims=True)
        ok = np.abs(total) >= 1000 * np.finfo(np.float32).tiny
        weights = np.where(ok, weights * (np.float32(1) / np.where(ok, total, 1)), weights)
    matrix = np.zeros((out_size, in_size), np.float32)
    np.add.at(matrix, (np.repeat(np.arange(out_size), 4), index.ravel()), weights.ravel())
    return matrix


def _separable(images: np.ndarray, wy: np.ndarray, wx: np.ndarray) -> np.ndarray:
    out = np.einsum(
        "yh,nhwc,xw->nyxc", wy, images.astype(np.float32, copy=False), wx, optimize=True
    )
    return out.astype(np.float32, copy=False)


@register_kernel("ResizeBicubic")
def resize_bicubic(ctx, images, size):
    images, out_h, out_w = _check_resize(ctx, images, size)
    a = ctx.attrs
    ac, hp = a["align_corners"], a["half_pixel_centers"]
    wy = _bicubic_matrix(images.shape[1], out_h, ac, hp)
    wx = _bicubic_matrix(images.shape[2], out_w, ac, hp)
    return _separable(images, wy, wx)


@register_kernel("ResizeBicubicGrad")
def resize_bicubic_grad(ctx, grads, original):
    a = ctx.attrs
    if a["align_corners"] and a["half_pixel_centers"]:
        raise _invalid("If half_pixel_centers is True, align_corners must be False.")
    _, h, w, _ = np.shape(original)
    wy = _bicubic_matrix(h, grads.shape[1], a["align_corners"], a["half_pixel_centers"])
    wx = _bicubic_matrix(w, grads.shape[2], a["align_corners"], a["half_pixel_centers"])
    out = np.einsum("yh,nyxc,xw->nhwc", wy, np.asarray(grads, np.float32), wx, optimize=True)
    return out.astype(np.asarray(original).dtype)


def _area_matrix(in_size: int, out_size: int, align_corners: bool) -> np.ndarray:
    """Row y: the overlap of output cell [y, y + 1) * scale with each input cell."""
    scale = _scale(in_size, out_size, align_corners)
    y = np.arange(out_size, dtype=np.float32)
    lo, hi = y * scale, (y + np.float32(1)) * scale
    start = np.floor(lo).astype(np.int64)
    end = np.ceil(hi).astype(np.int64)
    span = int((end - start).max(initial=0))
    cells = start[:, None] + np.arange(span)[None, :]
    i = cells.astype(np.float32)
    lo, hi = lo[:, None], hi[:, None]
    weight = np.where(
        i < lo, np.minimum(i + 1 - lo, hi - lo), np.where(i + 1 > hi, hi - i, np.float32(1))
    )
    weight = np.where(cells < end[:, None], weight, np.float32(0))
    matrix = np.zeros((out_size, in_size), np.float32)
    rows = np.repeat(np.arange(out_size), span)
    np.add.at(matrix, (rows, np.clip(cells, 0, in_size - 1).ravel()), weight.ravel())
    return matrix


@register_kernel("ResizeArea")
def resize_area(ctx, images, size):
    """Each output pixel averages the input area it covers (partial cells by overlap)."""
    images, out_h, out_w = _check_resize(ctx, images, size)
    h, w = images.shape[1:3]
    ac = ctx.attrs["align_corners"]
    norm = np.float32(1.0 / (_scale(h, out_h, ac) * _scale(w, out_w, ac)))
    return _separable(images, _area_matrix(h, out_h, ac), _area_matrix(w, out_w, ac)) * norm


# -- CropAndResize ----------------------------------------------------------------------------
def _check_boxes(boxes, box_ind, batch: int) -> None:
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise _invalid(f"boxes must be 2-D with 4 columns, got {list(boxes.shape)}")
    if box_ind.shape != (boxes.shape[0],):
        raise _invalid(
            f"box_index has incompatible shape {list(box_ind.shape)}; boxes are {list(boxes.shape)}"
        )
    if ((box_ind < 0) | (box_ind >= batch)).any():
        raise _invalid(f"box_index has values outside [0, {batch})")


def _sample_points(lo, hi, size: int, crops: int):
    """[N, crops] float32 sampling positions of boxes' [lo, hi] on an axis of `size` pixels,
    and which of them fall inside the image."""
    lo, hi = lo.astype(np.float32)[:, None], hi.astype(np.float32)[:, None]
    extent = np.float32(size - 1)
    if crops > 1:
        step = (hi - lo) * extent / np.float32(crops - 1)
        points = lo * extent + np.arange(crops, dtype=np.float32)[None, :] * step
    else:
        points = np.float32(0.5) * (lo + hi) * extent
    inside = (points >= 0) & (points <= extent)
    return points, inside


def _crop_geometry(boxes, image_shape, crop_h: int, crop_w: int):
    _, h, w, _ = image_shape
    ys, y_in = _sample_points(boxes[:, 0], boxes[:, 2], h, crop_h)
    xs, x_in = _sample_points(boxes[:, 1], boxes[:, 3], w, crop_w)
    return ys, xs, y_in[:, :, None] & x_in[:, None, :]  # valid: [N, crop_h, crop_w]


def _lerp_indices(points, size: int):
    safe = np.clip(points, 0, size - 1)
    low = np.floor(safe).astype(np.int64)
    high = np.ceil(safe).astype(np.int64)
    return low, high, (safe - low).astype(np.float32)


@register_kernel("CropAndResize")
def crop_and_resize(ctx, image, boxes, box_ind, crop_size):
    if image.ndim != 4:
        raise _invalid(f"input image must be 4-D, got {list(image.shape)}")
    crop_h, crop_w = (int(v) for v in np.asarray(crop_size).reshape(-1))
    if crop_h <= 0 or crop_w <= 0:
        raise _invalid("crop dimensions must be positive")
    _check_boxes(boxes, box_ind, image.shape[0])
    ys, xs, valid = _crop_geometry(boxes, image.shape, crop_h, crop_w)
    img = image.astype(np.float32, copy=False)
    b = box_ind[:, None, None]
    _, h, w, _ = image.shape
    if ctx.attrs["method"] == "nearest":
        yi = np.floor(np.clip(ys, 0, h - 1) + np.float32(0.5)).astype(np.int64)
        xi = np.floor(np.clip(xs, 0, w - 1) + np.float32(0.5)).astype(np.int64)
        crops = img[b, yi[:, :, None], xi[:, None, :]]
    else:
        top, bottom, dy = _lerp_indices(ys, h)
        left, right, dx = _lerp_indices(xs, w)
        t, bt = top[:, :, None], bottom[:, :, None]
        lf, rt = left[:, None, :], right[:, None, :]
        dx = dx[:, None, :, None]
        upper = img[b, t, lf] + (img[b, t, rt] - img[b, t, lf]) * dx
        lower = img[b, bt, lf] + (img[b, bt, rt] - img[b, bt, lf]) * dx
        crops = upper + (lower - upper) * dy[:, :, None, None]
    fill = np.float32(ctx.attrs["extrapolation_value"])
    return np.where(valid[..., None], crops, fill).astype(np.float32)


@register_kernel("CropAndResizeGradImage")
def crop_and_resize_grad_image(ctx, grads, boxes, box_ind, image_size):
    size = [int(v) for v in np.asarray(image_size).reshape(-1)]
    if len(size) != 4 or min(size) <= 0:
        raise _invalid(f"image_size must be 4 positive dims, got {size}")
    _check_boxes(boxes, box_ind, size[0])
    if grads.shape[:1] != boxes.shape[:1] or grads.ndim != 4 or grads.shape[3] != size[3]:
        raise _invalid(f"grads has an incompatible shape {list(grads.shape)}")
    _, crop_h, crop_w, _ = grads.shape
    _, h, w, _ = size
    ys, xs, valid = _crop_geometry(boxes, size, crop_h, crop_w)
    g = np.where(valid[..., None], np.asarray(grads, np.float32), np.float32(0))
    out = np.zeros(size, np.float32)
    b = np.broadcast_to(box_ind[:, None, None], valid.shape)
    if ctx.attrs["method"] == "nearest":
        yi = np.floor(np.clip(ys, 0, h - 1) + np.float32(0.5)).astype(np.int64)
        xi = np.floor(np.clip(xs, 0, w - 1) + np.float32(0.5)).astype(np.int64)
        yy, xx = np.broadcast_arrays(yi[:, :, None], xi[:, None, :])
        np.add.at(out, (b, yy, xx), g)
    else:
        top, bottom, dy = _lerp_indices(ys, h)
        left, right, dx = _lerp_indices(xs, w)
        dy, dx = dy[:, :, None, None], dx[:, None, :, None]
        for rows, wy in ((top, 1 - dy), (bottom, dy)):
            for cols, wx in ((left, 1 - dx), (right, dx)):
                yy, xx = np.broadcast_arrays(rows[:, :, None], cols[:, None, :])
                np.add.at(out, (b, yy, xx), wy * wx * g)
    return out.astype(ctx.attrs["T"].as_numpy_dtype)


@register_kernel("CropAndResizeGradBoxes")
def crop_and_resize_grad_boxes(ctx, grads, image, boxes, box_ind):
    """d crops / d box corners through the bilinear sampling positions (TF's formula)."""
    if image.ndim != 4:
        raise _invalid(f"input image must be 4-D, got {list(image.shape)}")
    _check_boxes(boxes, box_ind, image.shape[0])
    _, crop_h, crop_w, _ = grads.shape
    _, h, w, _ = image.shape
    ys, xs, valid = _crop_geometry(boxes, image.shape, crop_h, crop_w)
    img = image.astype(np.float32, copy=False)
    b = box_ind[:, None, None]
    top, bottom, dy = _lerp_indices(ys, h)
    left, right, dx = _lerp_indices(xs, w)
    t, bt, lf, rt = top[:, :, None], bottom[:, :, None], left[:, None, :], right[:, None, :]
    tl, tr, bl, br = img[b, t, lf], img[b, t, rt], img[b, bt, lf], img[b, bt, rt]
    dy4, dx4 = dy[:, :, None, None], dx[:, None, :, None]
    g = np.where(valid[..., None], np.asarray(grads, np.float32), np.float32(0))
    grad_y = (((1 - dx4) * (bl - tl) + dx4 * (br - tr)) * g).sum(axis=(2, 3))  # [N, crop_h]
    grad_x = (((1 - dy4) * (tr - tl) + dy4 * (br - bl)) * g).sum(axis=(1, 3))  # [N, crop_w]
    out = np.zeros((boxes.shape[0], 4), np.float32)
    for axis, grad_axis, size, crops in ((0, grad_y, h, crop_h), (1, grad_x, w, crop_w)):
        extent = np.float32(size - 1)
        if crops > 1:
            ratio = extent / np.float32(crops - 1)
            k = np.arange(crops, dtype=np.float32) * ratio
            out[:, axis] = (grad_axis * (extent - k)).sum(axis=1)
            out[:, axis + 2] = (grad_axis * k).sum(axis=1)
        else:
            out[:, axis] = out[:, axis + 2] = (grad_axis * np.float32(0.5) * extent).sum(axis=1)
    return out


# -- DrawBoundingBoxes ------------------------------------------------------------------------
_DEFAULT_COLORS = np.array(
    [
        [1, 1, 0, 1],
        [0, 0, 1, 1],
        [1, 0, 0, 1],
        [0, 1, 0, 1],
        [0.5, 0, 0.5, 1],
        [0.5, 0.5, 0, 1],
        [0.5, 0, 0, 1],
        [0, 0, 0.5, 1],
        [0, 1, 1, 1],
        [1, 0, 1, 1],
    ],
    np.float32,
)


def _draw(images, boxes, colors):
    """Each box's outline in its color (box i takes color i mod len(colors)); a later box
    draws over an earlier one; inverted boxes and boxes wholly outside are skipped."""
    if images.ndim != 4:
        raise _invalid(f"The rank of the images should be 4, got {images.ndim}")
    n, h, w, depth = images.shape
    if depth not in (1, 3, 4):
        raise _invalid("Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA)")
    if boxes.ndim != 3 or boxes.shape[0] != n or boxes.shape[2] != 4:
        raise _invalid(f"boxes must be [batch, num_boxes, 4], got {list(boxes.shape)}")
    if colors.ndim != 2 or colors.shape[1] < depth:
        raise _invalid(f"colors must be a 2-D matrix of {depth} or more columns")
    table = colors.copy()
    if depth == 1:
        table[:, 0] = 1  # gray images get white boxes
    num = boxes.shape[1]
    # float32 products truncated toward zero, as TF's static_cast<int64>
    rows = np.trunc(boxes[..., [0, 2]].astype(np.float32) * np.float32(h - 1)).astype(np.int64)
    cols = np.trunc(boxes[..., [1, 3]].astype(np.float32) * np.float32(w - 1)).astype(np.int64)
    r0, r1, c0, c1 = (
        v[..., None, None] for v in (rows[..., 0], rows[..., 1], cols[..., 0], cols[..., 1])
    )
    drawn = (r0 <= r1) & (c0 <= c1) & (r0 < h) & (r1 >= 0) & (c0 < w) & (c1 >= 0)
    i = np.arange(h)[:, None]
    j = np.arange(w)[None, :]
    in_cols = (j >= c0) & (j <= c1)
    in_rows = (i >= r0) & (i <= r1)
    outline = ((i == r0) | (i == r1)) & in_cols | ((j == c0) | (j == c1)) & in_rows
    outline &= drawn  # [N, boxes, H, W]
    last = num - 1 - np.argmax(outline[:, ::-1], axis=1)  # the last box drawn at each pixel
    hit = outline.any(axis=1)
    color = table[last % len(table), :depth].astype(images.dtype)
    return np.where(hit[..., None], color, images)


@register_kernel("DrawBoundingBoxes")
def draw_bounding_boxes(ctx, images, boxes):
    return _draw(images, boxes, _DEFAULT_COLORS)


@register_kernel("DrawBoundingBoxesV2")
def draw_bounding_boxes_v2(ctx, images, boxes, colors):
    colors = np.asarray(colors, np.float32)
    return _draw(images, boxes, colors if colors.size else _DEFAULT_COLORS)


# -- SampleDistortedBoundingBox ---------------------------------------------------------------
class _Uint32s:
    """TF's SimplePhilox over a reserved stream: 32-bit words in order, RandFloat and the
    rejection-sampled Uniform(n) (ExactUniformInt)."""

    def __init__(self, stream, expected: int):
        self.stream, self.words, self.used = stream, stream.uint32s(expected), 0

    def next(self) -> int:
        if self.used == len(self.words):  # rejections ran past the reservation: keep going
            self.words = self.stream.uint32s(2 * len(self.words) + 4)
        self.used += 1
        return int(self.words[self.used - 1])

    def rand_float(self) -> np.float32:
        return uint32_to_float(np.array([self.next()], np.uint32))[0]

    def uniform(self, n: int) -> int:
        rem = ((2**32 - 1) % n + 1) % n
        while True:
            bits = self.next()
            if bits >= rem:
                return bits % n


def _lrint(x) -> int:
    return int(np.rint(np.float32(x)))


def _random_crop(rng: _Uint32s, width, height, min_area_frac, max_area_frac, aspect):
    """TF's GenerateRandomCrop: (x, y, w, h) of a crop with this aspect ratio and an area in
    the range, or None."""
    if max_area_frac <= 0 or aspect <= 0 or width <= 0 or height <= 0:
        return None
    if min_area_frac > max_area_frac:
        return None
    f32 = np.float32
    min_area = f32(min_area_frac) * f32(width) * f32(height)
    max_area = f32(max_area_frac) * f32(width) * f32(height)
    h = _lrint(np.sqrt(f32(min_area / aspect)))
    max_h = _lrint(np.sqrt(f32(max_area / aspect)))
    if _lrint(f32(max_h) * aspect) > width:
        max_h = int((width + 0.5 - float(np.float32(1e-7))) / float(aspect))  # TF: double math
        if _lrint(f32(max_h) * aspect) > width:
            max_h -= 1
    max_h = min(max_h, height)
    h = min(h, max_h)
    if h < max_h:
        h += rng.uniform(max_h - h + 1)
    w = _lrint(f32(h) * aspect)
    area = f32(w * h)
    if area < min_area:
        h += 1
        w = _lrint(f32(h) * aspect)
        area = f32(w * h)
    if area > max_area:
        h -= 1
        w = _lrint(f32(h) * aspect)
        area = f32(w * h)
    if area < min_area or area > max_area or w > width or h > height or w <= 0 or h <= 0:
        return None
    y = rng.uniform(height - h) if h < height else 0
    x = rng.uniform(width - w) if w < width else 0
    return x, y, w, h


def _covers(crop, boxes, min_covered: float) -> bool:
    """TF's SatisfiesOverlapConstraints: the crop has pixels and covers enough of some box."""
    x, y, w, h = crop
    if w * h < 1:
        return False
    for bx0, by0, bx1, by1 in boxes:
        area = (bx1 - bx0) * (by1 - by0)
        if area < 1:
            continue
        ix0, iy0, ix1, iy1 = max(x, bx0), max(y, by0), min(x + w, bx1), min(y + h, by1)
        inter = 0 if ix0 > ix1 or iy0 > iy1 else (ix1 - ix0) * (iy1 - iy0)
        if np.float32(inter) / np.float32(area) >= min_covered:
            return True
    return False


def _sample_distorted_box(ctx, image_size, bounding_boxes, min_covered):
    if image_size.shape != (3,):
        raise _invalid(
            f"image_size must be 1-dimensional with 3 elements, got {list(image_size.shape)}"
        )
    if bounding_boxes.ndim != 3 or bounding_boxes.shape[-1] != 4:
        raise _invalid(
            f"input boxes must be 3-dimensional [batch, num_boxes, coords] with 4 coords, got "
            f"{list(bounding_boxes.shape)}"
        )
    if np.ndim(min_covered) != 0 or float(min_covered) < 0:
        raise _invalid(f"min_object_covered must be a scalar >= 0, got {min_covered}")
    height, width = int(image_size[0]), int(image_size[1])
    flat = bounding_boxes.reshape(-1, 4).astype(np.float32)
    if ((flat < 0) | (flat > 1)).any():
        raise _invalid("All bounding box coordinates must be in [0.0, 1.0]")
    boxes = [
        (int(b[1] * np.float32(width)), int(b[0] * np.float32(height)),
         int(b[3] * np.float32(width)), int(b[2] * np.float32(height)))
        for b in flat
    ]  # fmt: skip
    a = ctx.attrs
    if not boxes:
        if not a["use_image_if_no_bounding_boxes"]:
            raise _invalid(
                "No bounding boxes provided as input. One must enable "
                "use_image_if_no_bounding_boxes if you wish to not provide any bounding boxes."
            )
        boxes = [(0, 0, width, height)]
    attempts = a["max_attempts"]
    rng = _Uint32s(philox(ctx).reserve32(4 * attempts), 4 * attempts)
    lo_ratio, hi_ratio = (np.float32(v) for v in a["aspect_ratio_range"])
    crop = None
    for _ in range(attempts):  # a sequential search, as TF's: each draw depends on the last
        aspect = rng.rand_float() * (hi_ratio - lo_ratio) + lo_ratio
        candidate = _random_crop(rng, width, height, *a["area_range"], aspect)
        if candidate is not None and _covers(candidate, boxes, np.float32(min_covered)):
            crop = candidate
            break
    x, y, w, h = crop if crop is not None else (0, 0, width, height)
    dtype = image_size.dtype
    begin = np.array([y, x, 0], dtype)
    size = np.array([h, w, -1], np.int64).astype(dtype)  # uint8: -1 wraps to 255, as in TF
    f32 = np.float32
    box = np.array(
        [
            [
                [
                    f32(y) / f32(height),
                    f32(x) / f32(width),
                    f32(y + h) / f32(height),
                    f32(x + w) / f32(width),
                ]
            ]
        ],
        np.float32,
    )
    return begin, size, box


@register_kernel("SampleDistortedBoundingBoxV2")
def sample_distorted_bounding_box_v2(ctx, image_size, bounding_boxes, min_object_covered):
    return _sample_distorted_box(ctx, image_size, bounding_boxes, min_object_covered)


@register_kernel("SampleDistortedBoundingBox")
def sample_distorted_bounding_box(ctx, image_size, bounding_boxes):
    return _sample_distorted_box(ctx, image_size, bounding_boxes, ctx.attrs["min_object_covered"])

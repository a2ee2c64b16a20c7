"""ResizeBicubic, ResizeArea, CropAndResize (+ gradients) and DrawBoundingBoxes: values recorded
from TensorFlow 2.21 (tests/ops/data/tf_image_ref.npz, made with tf.compat.v1 raw ops on the
inputs rebuilt below), loop-per-pixel NumPy references of TF's rules on every dtype the kernels
claim, TF's shapes and errors, and gradients against numeric Jacobians."""

import json
import os

import ml_dtypes
import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.framework.apply_op import apply_op
from flowgraph.testing.gradient_checker import check_gradients
from flowgraph.testing.op_test import check_op, run

REF = np.load(os.path.join(os.path.dirname(__file__), "data", "tf_image_ref.npz"))
X = np.random.RandomState(0).rand(2, 5, 7, 3).astype(np.float32) * 100
BOXES = np.array(
    [[0.1, 0.2, 0.8, 0.9], [-0.2, 0.5, 0.6, 1.3], [0.5, 0.5, 0.5, 0.5], [0.9, 0.8, 0.1, 0.2]],
    np.float32,
)
BOX_IND = np.array([0, 1, 1, 0], np.int32)
RESIZE_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64]
RESIZE_TYPES += [np.float16, np.float32, np.float64, ml_dtypes.bfloat16]
CROP_TYPES = [np.uint8, np.uint16, np.int8, np.int16, np.int32, np.int64]
CROP_TYPES += [np.float16, np.float32, np.float64]


def _raw(op_type, *inputs, **attrs):
    return run(lambda *t: apply_op(op_type, list(t), **attrs).outputs[0], list(inputs))


def _close_to_tf(got, key):
    want = REF[repr(key)]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("align_corners,half_pixel", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("size", [(8, 4), (3, 11), (1, 1), (5, 7)])
def test_resize_bicubic_matches_tensorflow(align_corners, half_pixel, size):
    got = tf.image.resize_bicubic(
        X, size, align_corners=align_corners, half_pixel_centers=half_pixel
    )
    with tf.Session() as sess:
        _close_to_tf(sess.run(got), ("bicubic", align_corners, half_pixel, size))


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(8, 4), (3, 11), (2, 3), (5, 7)])
def test_resize_area_matches_tensorflow(align_corners, size):
    with tf.Session() as sess:
        got = sess.run(tf.image.resize_area(X, size, align_corners=align_corners))
    _close_to_tf(got, ("area", align_corners, False, size))


def _scale(n_in, n_out, align):
    if align and n_out > 1:
        return np.float32((n_in - 1) / (n_out - 1))
    return np.float32(n_in / n_out)


def _cubic(t, a):
    t = abs(t)
    if t <= 1:
        return ((a + 2) * t - (a + 3)) * t * t + 1
    if t < 2:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return 0.0


def ref_bicubic(x, size, align=False, half=False):
    """TF's bicubic rule, one output pixel at a time (exact kernel instead of TF's table)."""
    n, h, w, c = x.shape
    a = -0.5 if half else -0.75
    out = np.zeros((n, *size, c))
    axes = []
    for n_in, n_out in ((h, size[0]), (w, size[1])):
        taps = []
        for o in range(n_out):
            s = _scale(n_in, n_out, align)
            src = (o + 0.5) * s - 0.5 if half else o * s
            base = int(np.floor(src))
            idx = [base + k for k in (-1, 0, 1, 2)]
            wts = [_cubic(src - i, a) for i in idx]
            if half:
                wts = [wt if 0 <= i < n_in else 0.0 for wt, i in zip(wts, idx)]
                wts = [wt / sum(wts) for wt in wts]
            taps.append([(min(max(i, 0), n_in - 1), wt) for i, wt in zip(idx, wts)])
        axes.append(taps)
    for y, ytaps in enumerate(axes[0]):
        for xo, xtaps in enumerate(axes[1]):
            for iy, wy in ytaps:
                for ix, wx in xtaps:
                    out[:, y, xo] += wy * wx * x[:, iy, ix].astype(np.float64)
    return out.astype(np.float32)


def ref_area(x, size, align=False):
    n, h, w, c = x.shape
    sy, sx = _scale(h, size[0], align), _scale(w, size[1], align)
    out = np.zeros((n, *size, c))
    for y in range(size[0]):
        for xo in range(size[1]):
            y0, y1, x0, x1 = y * sy, (y + 1) * sy, xo * sx, (xo + 1) * sx
            for i in range(int(np.floor(y0)), int(np.ceil(y1))):
                wy = min(i + 1, y1) - max(i, y0)
                for j in range(int(np.floor(x0)), int(np.ceil(x1))):
                    wx = min(j + 1, x1) - max(j, x0)
                    out[:, y, xo] += wy * wx * x[:, min(i, h - 1), min(j, w - 1)]
    return (out / (sy * sx)).astype(np.float32)


@pytest.mark.parametrize("dtype", RESIZE_TYPES)
def test_resize_every_dtype(dtype):
    x = np.random.RandomState(1).randint(0, 100, (1, 4, 5, 2)).astype(dtype)
    for align, half in ((False, False), (True, False), (False, True)):
        check_op(
            lambda v: tf.image.resize_bicubic(v, [6, 3], align, half),
            [x],
            lambda v: ref_bicubic(v, (6, 3), align, half),
            rtol=0,
            atol=0.15,  # TF samples the kernel from a 1024-entry table: 1e-3 of values < 100
        )
    check_op(
        lambda v: tf.image.resize_area(v, [3, 2]), [x], lambda v: ref_area(v, (3, 2)), atol=1e-3
    )
    check_op(
        lambda v: tf.image.resize_area(v, [7, 9], align_corners=True),
        [x],
        lambda v: ref_area(v, (7, 9), True),
        atol=1e-3,
    )


def test_resize_images_methods_and_shapes():
    img = tf.constant(X[0])
    method = tf.image.ResizeMethod
    with tf.Session() as sess:
        for m, key in (
            (method.BICUBIC, ("bicubic", False, False, (8, 4))),
            (method.AREA, ("area", False, False, (8, 4))),
        ):
            got = sess.run(tf.image.resize_images(img, [8, 4], method=m))
            np.testing.assert_allclose(got, REF[repr(key)][0], rtol=1e-5, atol=1e-4)
    assert tf.image.resize is tf.image.resize_images
    p = tf.placeholder(tf.uint8, [None, 10, 10, 3])
    assert tf.image.resize_bicubic(p, [5, 6]).shape.as_list() == [None, 5, 6, 3]
    assert tf.image.resize_area(p, tf.placeholder(tf.int32, [2])).dtype == tf.float32
    with pytest.raises(ValueError, match="not implemented"):
        tf.image.resize_images(img, [8, 4], method=7)
    with pytest.raises(errors.InvalidArgumentError, match="half_pixel_centers"):
        run(lambda v: tf.image.resize_bicubic(v, [2, 2], True, True), [X])


# -- crop_and_resize --------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("crop", [(3, 4), (1, 1)])
def test_crop_and_resize_matches_tensorflow(method, crop):
    out = tf.image.crop_and_resize(X, BOXES, BOX_IND, crop, method=method, extrapolation_value=-1)
    with tf.Session() as sess:
        _close_to_tf(sess.run(out), ("crop", method, crop))


def test_crop_and_resize_gradient_kernels_match_tensorflow():
    g = np.random.RandomState(1).randn(4, 3, 4, 3).astype(np.float32)
    size = np.array([2, 5, 7, 3], np.int32)
    got = _raw("CropAndResizeGradImage", g, BOXES, BOX_IND, size, T=tf.float32)
    _close_to_tf(got, "crop_grad_image")
    got = _raw("CropAndResizeGradImage", g, BOXES, BOX_IND, size, T=tf.float32, method="nearest")
    _close_to_tf(got, "crop_grad_image_nearest")
    _close_to_tf(_raw("CropAndResizeGradBoxes", g, X, BOXES, BOX_IND), "crop_grad_boxes")


def ref_crop(image, boxes, box_ind, crop, method="bilinear", fill=0.0):
    _, h, w, c = image.shape
    out = np.full((len(boxes), *crop, c), fill, np.float32)
    img = image.astype(np.float64)
    for n, ((y1, x1, y2, x2), b) in enumerate(zip(boxes, box_ind)):
        for i in range(crop[0]):
            yy = (
                y1 * (h - 1) + i * (y2 - y1) * (h - 1) / (crop[0] - 1)
                if crop[0] > 1
                else 0.5 * (y1 + y2) * (h - 1)
            )
            for j in range(crop[1]):
                xx = (
                    x1 * (w - 1) + j * (x2 - x1) * (w - 1) / (crop[1] - 1)
                    if crop[1] > 1
                    else 0.5 * (x1 + x2) * (w - 1)
                )
                if not (0 <= yy <= h - 1 and 0 <= xx <= w - 1):
                    continue
                if method == "nearest":
                    out[n, i, j] = img[b, int(np.floor(yy + 0.5)), int(np.floor(xx + 0.5))]
                    continue
                t, lft = int(np.floor(yy)), int(np.floor(xx))
                bt, rt = int(np.ceil(yy)), int(np.ceil(xx))
                dy, dx = yy - t, xx - lft
                top = img[b, t, lft] + (img[b, t, rt] - img[b, t, lft]) * dx
                bottom = img[b, bt, lft] + (img[b, bt, rt] - img[b, bt, lft]) * dx
                out[n, i, j] = top + (bottom - top) * dy
    return out


@pytest.mark.parametrize("dtype", CROP_TYPES)
def test_crop_and_resize_every_dtype(dtype):
    img = np.random.RandomState(2).randint(0, 100, (2, 5, 6, 2)).astype(dtype)
    for method in ("bilinear", "nearest"):
        check_op(
            lambda v: tf.image.crop_and_resize(v, BOXES, BOX_IND, [4, 3], method=method),
            [img],
            lambda v: ref_crop(v, BOXES, BOX_IND, (4, 3), method),
            rtol=1e-5,
            atol=1e-3,
        )


def test_crop_and_resize_shapes_and_errors():
    image = tf.placeholder(tf.float32, [None, 10, 10, 3])
    boxes = tf.placeholder(tf.float32, [None, 4])
    crops = tf.image.crop_and_resize(image, boxes, tf.placeholder(tf.int32, [5]), [7, 8])
    assert crops.shape.as_list() == [5, 7, 8, 3]
    with pytest.raises(ValueError):
        tf.image.crop_and_resize(image, tf.zeros([2, 3]), [0, 0], [2, 2])
    with pytest.raises(ValueError):
        tf.image.crop_and_resize(image, tf.zeros([2, 4]), [0, 0, 0], [2, 2])
    with pytest.raises(errors.InvalidArgumentError, match="outside"):
        run(lambda v: tf.image.crop_and_resize(v, BOXES, [0, 1, 2, 0], [2, 2]), [X])
    with pytest.raises(errors.InvalidArgumentError, match="positive"):
        run(lambda v: tf.image.crop_and_resize(v, BOXES, BOX_IND, [0, 2]), [X])
    assert tf.image.crop_and_resize(X, BOXES, box_indices=BOX_IND, crop_size=[2, 2]).shape[0] == 4


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_crop_and_resize_gradients(method):
    image = np.random.RandomState(3).randn(2, 4, 5, 2).astype(np.float32)
    boxes = np.array([[0.12, 0.05, 0.81, 0.77], [0.33, 0.9, 0.07, 0.41]], np.float32)

    def crop(img, bx):
        return tf.image.crop_and_resize(img, bx, [1, 0], [3, 2], method=method)

    if method == "bilinear":  # nearest is piecewise constant in the boxes: check the image only
        check_gradients(crop, [image, boxes], delta=1e-3, atol=5e-3, rtol=5e-3)
    else:
        check_gradients(lambda img: crop(img, tf.constant(boxes)), [image])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_resize_bicubic_gradient(dtype):
    image = np.random.RandomState(4).randn(1, 3, 4, 2).astype(dtype)
    for align, half in ((False, False), (True, False), (False, True)):
        check_gradients(  # the kernel computes in float32 whatever the input: float32 steps
            lambda v: tf.cast(tf.image.resize_bicubic(v, [5, 3], align, half), dtype),
            [image],
            delta=1e-3,
            atol=3e-3,
            rtol=3e-3,
        )
    x = tf.placeholder(tf.uint8, [1, 3, 3, 1])
    assert tf.gradients(tf.image.resize_bicubic(x, [4, 4]), x) == [None]


# -- draw_bounding_boxes ----------------------------------------------------------------------
DRAW_BOXES = np.array(
    [[[0.1, 0.2, 0.7, 0.9], [-0.5, -0.1, 0.5, 0.5]], [[0.5, 0.5, 1.5, 1.2], [0.6, 0.6, 0.2, 0.9]]],
    np.float32,
)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_draw_bounding_boxes_matches_tensorflow(dtype):
    img = (np.zeros((2, 6, 8, 3)) + 0.25).astype(dtype)
    with tf.Session() as sess:
        for key, images, colors in (
            ("draw", img, None),
            ("draw_gray", img[..., :1], None),
            ("draw_v2", img, [[0.1, 0.2, 0.3, 1.0]]),
        ):
            out = tf.image.draw_bounding_boxes(images, DRAW_BOXES, colors=colors)
            assert out.op.type == ("DrawBoundingBoxes" if colors is None else "DrawBoundingBoxesV2")
            got = sess.run(out)
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, REF[repr(key)].astype(dtype))


def test_draw_bounding_boxes_errors():
    with pytest.raises(errors.InvalidArgumentError, match="Channel depth"):
        run(
            lambda v: tf.image.draw_bounding_boxes(v, DRAW_BOXES),
            [np.zeros((2, 4, 4, 2), np.float32)],
        )
    with pytest.raises(TypeError):
        tf.image.draw_bounding_boxes(tf.zeros([1, 2, 2, 3], tf.uint8), DRAW_BOXES[:1])


def test_bfloat16_images_resize_to_float32():
    """The bfloat16 wrappers round only outputs typed by the bfloat16 attr: every resize of a
    bfloat16 image gives float32, as in TF (it once came back as bfloat16)."""
    img = X[:1].astype(ml_dtypes.bfloat16)
    with tf.Session() as sess:
        for fn in (tf.image.resize_bilinear, tf.image.resize_bicubic, tf.image.resize_area):
            got = sess.run(fn(img, [3, 4]))
            assert got.dtype == np.float32
            want = sess.run(fn(img.astype(np.float32), [3, 4]))
            np.testing.assert_array_equal(got, want)


# -- sample_distorted_bounding_box ------------------------------------------------------------
with open(os.path.join(os.path.dirname(__file__), "data", "tf_sample_distorted_bbox.json")) as f:
    SDBB = json.load(f)


def _distorted_runs(case, dtype=np.int32, runs=3):
    with tf.Graph().as_default():
        kw = {k: v for k, v in case.items() if k not in ("image_size", "boxes")}
        boxes = np.array(case["boxes"], np.float32).reshape(1, -1, 4)
        image_size = tf.constant(np.array(case["image_size"], dtype))
        out = tf.image.sample_distorted_bounding_box(image_size, boxes, **kw)
        with tf.Session() as sess:
            return [sess.run(list(out)) for _ in range(runs)]


@pytest.mark.parametrize("index", range(len(SDBB)))
def test_sample_distorted_bounding_box_is_tensorflows_stream(index):
    """Three runs of one node (each continues the Philox stream) give TensorFlow's crops."""
    case, want = SDBB[index]["case"], SDBB[index]["runs"]
    for (begin, size, box), (w_begin, w_size, w_box) in zip(_distorted_runs(case), want):
        assert begin.tolist() == w_begin and size.tolist() == w_size
        np.testing.assert_allclose(box, w_box, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.int64])
def test_sample_distorted_bounding_box_every_dtype(dtype):
    case, want = SDBB[1]["case"], SDBB[1]["runs"]  # a 100 x 80 image: fits every type
    for (begin, size, _), (w_begin, w_size, _) in zip(_distorted_runs(case, dtype), want):
        assert begin.dtype == dtype and size.dtype == dtype
        assert begin.tolist() == w_begin
        np.testing.assert_array_equal(size, np.array(w_size).astype(dtype))  # -1 wraps in uint8


def test_sample_distorted_bounding_box_v1_op_shapes_and_errors():
    case = SDBB[0]["case"]
    with tf.Graph().as_default():
        out = apply_op(
            "SampleDistortedBoundingBox",
            [tf.constant(case["image_size"]), tf.constant(case["boxes"])],
            seed=case["seed"],
            seed2=case["seed2"],
            min_object_covered=case["min_object_covered"],
        ).outputs
        assert [o.shape.as_list() for o in out] == [[3], [3], [1, 1, 4]]
        with tf.Session() as sess:
            assert sess.run(out[0]).tolist() == SDBB[0]["runs"][0][0]
    with pytest.raises(errors.InvalidArgumentError, match="No bounding boxes"):
        _distorted_runs({"image_size": [10, 10, 3], "boxes": [], "seed": 1}, runs=1)
    with pytest.raises(errors.InvalidArgumentError, match=r"\[0.0, 1.0\]"):
        bad = {"image_size": [10, 10, 3], "boxes": [[[0, 0, 1.5, 1]]], "seed": 1}
        _distorted_runs(bad, runs=1)
    with pytest.raises(ValueError):
        tf.image.sample_distorted_bounding_box([10, 10, 3], tf.zeros([4]))

"""tf.image against references: codecs round-trip through Pillow, resizing equals a per-pixel
Python transcription of TensorFlow's sampling rules (checked equal to TF 2.21 when written),
crops/pads/flips equal NumPy slicing, convert_image_dtype and per_image_standardization equal
their NumPy formulas."""

import io
import math

import numpy as np
import pytest

import flowgraph as tf

PIL = pytest.importorskip("PIL.Image")


def _run(fetch):
    with tf.Session() as sess:
        return sess.run(fetch)


def _image(h=5, w=7, c=3, seed=0):
    return np.random.RandomState(seed).randint(0, 256, (h, w, c)).astype(np.uint8)


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_png_round_trip(channels):
    img = _image(c=channels)
    png = tf.image.encode_png(img, compression=9)
    back = _run(tf.image.decode_png(png))
    np.testing.assert_array_equal(back, img)
    decoded = np.asarray(PIL.open(io.BytesIO(_run(png))))  # a standard PNG
    np.testing.assert_array_equal(decoded.reshape(img.shape), img)


def test_png_uint16_and_channel_conversion():
    img16 = (np.arange(12, dtype=np.uint16) * 5000).reshape(3, 4, 1)
    back = _run(tf.image.decode_png(tf.image.encode_png(img16), dtype=tf.uint16))
    np.testing.assert_array_equal(back, img16)
    rgb = _image()
    gray = _run(tf.image.decode_png(tf.image.encode_png(rgb), channels=1))
    want = np.asarray(PIL.fromarray(rgb).convert("L"))[:, :, None]
    np.testing.assert_array_equal(gray, want)


def test_jpeg_round_trip_is_close_and_decode_image_detects_formats():
    img = np.tile(np.linspace(0, 255, 16, dtype=np.uint8)[None, :, None], (16, 1, 3))
    jpg = tf.image.encode_jpeg(img, quality=100)
    back = _run(tf.image.decode_jpeg(jpg))
    assert back.shape == img.shape and np.abs(back.astype(int) - img).max() <= 3
    assert _run(tf.image.decode_jpeg(jpg, ratio=2)).shape == (8, 8, 3)
    np.testing.assert_array_equal(_run(tf.image.decode_image(jpg)), back)
    png = tf.image.encode_png(img)
    floats = _run(tf.image.decode_image(png, dtype=tf.float32))
    np.testing.assert_allclose(floats, img / 255.0, rtol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError):
        _run(tf.image.decode_png(tf.constant(b"not a png")))
    with pytest.raises(tf.errors.UnimplementedError):
        _run(tf.image.decode_jpeg(jpg, fancy_upscaling=False))


def _ref_bilinear(img, oh, ow, align, half):
    """TF's resize_bilinear, pixel by pixel."""
    n, h, w, c = img.shape
    sh = (h - 1) / (oh - 1) if align and oh > 1 else h / oh
    sw = (w - 1) / (ow - 1) if align and ow > 1 else w / ow
    out = np.zeros((n, oh, ow, c), np.float64)
    for y in range(oh):
        iy = (y + 0.5) * sh - 0.5 if half else y * sh
        y0, y1, dy = max(math.floor(iy), 0), min(math.ceil(iy), h - 1), iy - math.floor(iy)
        for x in range(ow):
            ix = (x + 0.5) * sw - 0.5 if half else x * sw
            x0, x1, dx = max(math.floor(ix), 0), min(math.ceil(ix), w - 1), ix - math.floor(ix)
            top = img[:, y0, x0] + (img[:, y0, x1] - img[:, y0, x0]) * dx
            bottom = img[:, y1, x0] + (img[:, y1, x1] - img[:, y1, x0]) * dx
            out[:, y, x] = top + (bottom - top) * dy
    return out


def _ref_nearest(img, oh, ow, align, half):
    _, h, w, _ = img.shape
    sh = (h - 1) / (oh - 1) if align and oh > 1 else h / oh
    sw = (w - 1) / (ow - 1) if align and ow > 1 else w / ow

    def index(i, s, size):
        v = (i + 0.5) * s if half else i * s
        j = math.floor(v + 0.5) if align else math.floor(v)
        return max(min(j, size - 1), 0)

    ys = [index(y, sh, h) for y in range(oh)]
    xs = [index(x, sw, w) for x in range(ow)]
    return img[:, ys][:, :, xs]


@pytest.mark.parametrize("align, half", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("size", [(9, 4), (3, 11), (5, 7)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8, np.int32])
def test_resize_matches_tensorflow_rules(align, half, size, dtype):
    img = (np.random.RandomState(1).rand(2, 5, 7, 3) * 100).astype(dtype)
    bil = tf.image.resize_bilinear(img, size, align_corners=align, half_pixel_centers=half)
    near = tf.image.resize_nearest_neighbor(img, size, align_corners=align, half_pixel_centers=half)
    got_b, got_n = _run([bil, near])
    assert got_b.dtype == np.float32 and got_n.dtype == dtype
    np.testing.assert_allclose(
        got_b, _ref_bilinear(img.astype(np.float64), *size, align, half), rtol=1e-5, atol=1e-4
    )
    np.testing.assert_array_equal(got_n, _ref_nearest(img, *size, align, half))


def test_resize_images_3d_and_methods():
    img = np.random.RandomState(2).rand(4, 6, 1).astype(np.float32)
    out = tf.image.resize_images(img, [8, 3])
    assert out.shape.as_list() == [8, 3, 1]
    np.testing.assert_allclose(
        _run(out), _ref_bilinear(img[None], 8, 3, False, False)[0], rtol=1e-5
    )
    near = tf.image.resize_images(img, [2, 3], tf.image.ResizeMethod.NEAREST_NEIGHBOR)
    np.testing.assert_array_equal(_run(near), img[::2, ::2])
    cubic = tf.image.resize_images(img, [2, 2], tf.image.ResizeMethod.BICUBIC)
    assert cubic.op.inputs[0].op.type == "ResizeBicubic"  # through the squeeze of the batch


def test_crops_pads_and_flips():
    img = _image(6, 8, 2)
    np.testing.assert_array_equal(
        _run(tf.image.crop_to_bounding_box(img, 1, 2, 3, 4)), img[1:4, 2:6]
    )
    padded = _run(tf.image.pad_to_bounding_box(img, 1, 2, 9, 11))
    want = np.zeros((9, 11, 2), np.uint8)
    want[1:7, 2:10] = img
    np.testing.assert_array_equal(padded, want)
    np.testing.assert_array_equal(_run(tf.image.central_crop(img, 0.5)), img[1:5, 2:6])
    np.testing.assert_array_equal(_run(tf.image.flip_left_right(img)), img[:, ::-1])
    np.testing.assert_array_equal(_run(tf.image.flip_up_down(img)), img[::-1])
    batch = np.stack([img] * 16)
    flipped = _run(tf.image.random_flip_left_right(batch, seed=3))
    kinds = {bool(np.array_equal(f, img[:, ::-1])) for f in flipped}
    assert kinds == {True, False}  # each image flips independently
    for f in flipped:
        assert np.array_equal(f, img) or np.array_equal(f, img[:, ::-1])
    crop = _run(tf.random_crop(img, [3, 3, 2], seed=1))
    assert any(np.array_equal(crop, img[i : i + 3, j : j + 3]) for i in range(4) for j in range(6))
    with pytest.raises(ValueError):
        tf.image.crop_to_bounding_box(img, 4, 0, 3, 3)


def test_convert_image_dtype_and_standardization():
    img = _image(3, 4, 3)
    f = _run(tf.image.convert_image_dtype(img, tf.float32))
    np.testing.assert_allclose(f, img / 255.0, rtol=1e-6)
    back = _run(tf.image.convert_image_dtype(f, tf.uint8))
    np.testing.assert_array_equal(back, (f * 255.5).astype(np.uint8))
    np.testing.assert_array_equal(back, img)
    wide = _run(tf.image.convert_image_dtype(img, tf.uint16))
    np.testing.assert_array_equal(wide, img.astype(np.uint16) * 257 // 257 * 256)
    narrow = _run(tf.image.convert_image_dtype(wide, tf.uint8))
    np.testing.assert_array_equal(narrow, img)
    sat = _run(
        tf.image.convert_image_dtype(np.array([1.5, -0.5], np.float32), tf.uint8, saturate=True)
    )
    assert sat.tolist() == [255, 0]
    std = _run(tf.image.per_image_standardization(img))
    x = img.astype(np.float32)
    want = (x - x.mean()) / max(x.std(), 1 / math.sqrt(x.size))
    np.testing.assert_allclose(std, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("align, half", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("resize", ["bilinear", "nearest"])
def test_resize_gradients_match_numeric_jacobians(align, half, resize):
    fn = tf.image.resize_bilinear if resize == "bilinear" else tf.image.resize_nearest_neighbor
    for in_hw, out_hw in (((3, 4), (5, 7)), ((5, 6), (2, 3))):
        shape = (2, *in_hw, 2)
        x = tf.placeholder(tf.float64, shape)
        if resize == "bilinear":
            x32 = tf.cast(x, tf.float32)
            y = tf.cast(fn(x32, out_hw, align_corners=align, half_pixel_centers=half), tf.float64)
        else:
            y = fn(x, out_hw, align_corners=align, half_pixel_centers=half)
        init = np.random.RandomState(0).rand(*shape)
        err = tf.test.compute_gradient_error(x, list(shape), y, [2, *out_hw, 2], x_init_value=init)
        assert err < 1e-3, (in_hw, out_hw, err)

"""tf.image crops, pads, crop-or-pad, letterboxing, rot90 and transpose on static and run-time
shapes, against NumPy (the same cases matched TensorFlow 2.21's values when written)."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors

RNG = np.random.RandomState(0)
IMG = RNG.rand(5, 7, 3).astype(np.float32)
BATCH = RNG.rand(2, 6, 4, 1).astype(np.float32)


def _run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def _crop_or_pad(x, th, tw):
    """NumPy reference: center crop, then center pad (TF's rounding: crop offset
    (size - target) // 2, pad offset (target - size) // 2)."""
    h, w = x.shape[-3:-1]
    ch, cw = max((h - th) // 2, 0), max((w - tw) // 2, 0)
    x = x[..., ch : ch + min(th, h), cw : cw + min(tw, w), :]
    ph, pw = max((th - h) // 2, 0), max((tw - w) // 2, 0)
    pad = [(0, 0)] * (x.ndim - 3) + [
        (ph, th - ph - x.shape[-3]),
        (pw, tw - pw - x.shape[-2]),
        (0, 0),
    ]
    return np.pad(x, pad)


@pytest.mark.parametrize("dynamic", [False, True])
def test_crop_pad_and_crop_or_pad(dynamic):
    image = tf.placeholder(tf.float32, [None, None, 3]) if dynamic else tf.constant(IMG)
    batch = tf.placeholder(tf.float32, [None, None, None, 1]) if dynamic else tf.constant(BATCH)
    ops = [
        tf.image.crop_to_bounding_box(image, 1, 2, 3, 4),
        tf.image.pad_to_bounding_box(image, 1, 2, 8, 10),
        tf.image.pad_to_bounding_box(batch, 1, 0, 9, 6),
        tf.image.resize_image_with_crop_or_pad(image, 3, 10),
        tf.image.resize_with_crop_or_pad(image, 8, 4),
        tf.image.resize_image_with_crop_or_pad(batch, 4, 7),
        tf.image.central_crop(image, 0.5),
    ]
    assert ops[0].shape.as_list() == [3, 4, 3] and ops[2].shape.as_list()[1:] == [9, 6, 1]
    got = _run(ops, {image: IMG, batch: BATCH} if dynamic else None)
    np.testing.assert_array_equal(got[0], IMG[1:4, 2:6])
    np.testing.assert_array_equal(got[1], np.pad(IMG, [(1, 2), (2, 1), (0, 0)]))
    np.testing.assert_array_equal(got[2], np.pad(BATCH, [(0, 0), (1, 2), (0, 2), (0, 0)]))
    np.testing.assert_array_equal(got[3], _crop_or_pad(IMG, 3, 10))
    np.testing.assert_array_equal(got[4], _crop_or_pad(IMG, 8, 4))
    np.testing.assert_array_equal(got[5], _crop_or_pad(BATCH, 4, 7))
    np.testing.assert_array_equal(got[6], IMG[1:4, 1:6])


def test_bounds_are_checked_now_or_at_run_time():
    with pytest.raises(ValueError, match="height must be >= target \\+ offset"):
        tf.image.crop_to_bounding_box(IMG, 4, 0, 3, 2)
    with pytest.raises(ValueError, match="width must be <= target - offset"):
        tf.image.pad_to_bounding_box(IMG, 0, 2, 8, 8)
    image = tf.placeholder(tf.float32, [None, None, 3])
    crop = tf.image.crop_to_bounding_box(image, 4, 0, 3, 2)
    with pytest.raises(errors.InvalidArgumentError, match="height must be >= target"):
        _run(crop, {image: IMG})
    with pytest.raises(ValueError, match="3 or 4 dimensions"):
        tf.image.resize_image_with_crop_or_pad(tf.zeros([2, 2]), 1, 1)


def test_resize_image_with_pad_letterboxes():
    wide = np.ones((4, 8, 1), np.float32)
    got = _run(tf.image.resize_image_with_pad(wide, 8, 8))
    assert got.shape == (8, 8, 1)
    np.testing.assert_array_equal(got[:2], 0)  # 4 rows of image centered in 8
    np.testing.assert_array_equal(got[2:6], 1)
    np.testing.assert_array_equal(got[6:], 0)


def test_rot90_and_transpose():
    k = tf.placeholder(tf.int32, [])
    dynamic = tf.placeholder(tf.float32, [None, None, 3])
    ops = [
        tf.image.rot90(IMG),
        tf.image.rot90(IMG, 3),
        tf.image.rot90(BATCH, 2),
        tf.image.rot90(dynamic, k),
        tf.image.transpose_image(IMG),
        tf.image.transpose_image(BATCH),
    ]
    for turns in range(-1, 5):
        got = _run(ops, {dynamic: IMG, k: turns})
        np.testing.assert_array_equal(got[3], np.rot90(IMG, turns, axes=(0, 1)))
    np.testing.assert_array_equal(got[0], np.rot90(IMG, 1, axes=(0, 1)))
    np.testing.assert_array_equal(got[1], np.rot90(IMG, 3, axes=(0, 1)))
    np.testing.assert_array_equal(got[2], np.rot90(BATCH, 2, axes=(1, 2)))
    np.testing.assert_array_equal(got[4], IMG.transpose(1, 0, 2))
    np.testing.assert_array_equal(got[5], BATCH.transpose(0, 2, 1, 3))

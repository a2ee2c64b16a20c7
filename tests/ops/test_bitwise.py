"""tf.bitwise against NumPy on every integer dtype (shift amounts clamped as TensorFlow's
kernels clamp them; values checked against TensorFlow when written) and tf.dtypes."""

import numpy as np
import pytest

import flowgraph as tf

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("dtype", INTS)
def test_bitwise_ops_on_every_integer_dtype(dtype):
    info = np.iinfo(dtype)
    x = np.array([0, 1, 12, info.max, info.min, 5], dtype)
    y = np.array([3, 10, 6, 1, 2, 7], dtype)
    bits = info.bits
    shifts = np.array([1, bits + 3, 2, bits - 1, 0, 5], dtype)  # bits + 3 clamps to bits - 1
    clamped = np.minimum(shifts, bits - 1).astype(dtype)
    with tf.Session() as sess:
        got = sess.run(
            [
                tf.bitwise.bitwise_and(x, y),
                tf.bitwise.bitwise_or(x, y),
                tf.bitwise.bitwise_xor(x, y),
                tf.bitwise.invert(x),
                tf.bitwise.left_shift(x, shifts),
                tf.bitwise.right_shift(x, shifts),
            ]
        )
    want = [x & y, x | y, x ^ y, ~x, np.left_shift(x, clamped), np.right_shift(x, clamped)]
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_array_equal(g, w)


def test_tensorflow_values_and_errors():
    x = np.array([12, -7, 255], np.int32)
    with tf.Session() as sess:
        left = sess.run(tf.bitwise.left_shift(x, [1, 40, -1]))
        right = sess.run(tf.bitwise.right_shift(np.array([-128], np.int8), np.array([3], np.int8)))
    np.testing.assert_array_equal(left, [24, -2147483648, 255])  # TensorFlow's values
    np.testing.assert_array_equal(right, [-16])  # arithmetic shift of a signed value
    with pytest.raises(TypeError):
        tf.bitwise.bitwise_and(tf.constant([1.0]), tf.constant([1.0]))
    assert tf.gradients(tf.cast(tf.bitwise.invert(tf.constant([1])), tf.float32), []) == []


def test_dtypes_namespace():
    assert tf.dtypes.float32 is tf.float32 and tf.dtypes.bool is tf.bool
    assert tf.dtypes.as_dtype("int64") == tf.int64
    assert isinstance(tf.float16, tf.dtypes.DType)
    with tf.Session() as sess:
        assert sess.run(tf.dtypes.cast(1.7, tf.int32)) == 1
        assert sess.run(tf.dtypes.saturate_cast(300, tf.uint8)) == 255

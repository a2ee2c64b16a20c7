"""bfloat16 computed through ml_dtypes: tf.bfloat16.as_numpy_dtype is ml_dtypes.bfloat16,
element-wise, reduction and matmul kernels compute in float32 and round as TensorFlow does
(bit patterns recorded from TensorFlow), constants and feeds round-trip, gradients flow."""

import ml_dtypes
import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import tensor_util

TF_BITS = {  # bfloat16 bit patterns from TensorFlow 2.21 (tf.compat.v1), inputs below
    "matmul": [49223, 49085, 16425, 16289, 16182, 49192, 49104, 16408, 49005, 48959, 16556, 49123],
    "exp": [
        16571,
        16319,
        16427,
        16661,
        16591,
        16065,
        16421,
        16220,
        16231,
        16321,
        16276,
        16521,
        16393,
        16273,
        16327,
        16307,
        16526,
        16209,
        16303,
        16090,
    ],
    "x*x+x": [
        16540,
        16144,
        16376,
        16616,
        16555,
        48320,
        16365,
        48644,
        48573,
        16148,
        15913,
        16484,
        16300,
        15884,
        16164,
        16100,
        16494,
        48679,
        16082,
        48640,
    ],
    "tanh": [
        16241,
        16067,
        16193,
        16250,
        16244,
        48960,
        16189,
        48666,
        48594,
        16071,
        15891,
        16229,
        16164,
        15864,
        16085,
        16037,
        16231,
        48719,
        16027,
        48946,
    ],
    "reduce_sum1": [16616, 15876, 16443, 16266],
    "sqrt_abs": [
        16298,
        16162,
        16253,
        16319,
        16303,
        16253,
        16249,
        16071,
        16036,
        16164,
        16067,
        16282,
        16223,
        16051,
        16170,
        16148,
        16284,
        16104,
        16143,
        16237,
    ],
    "div": [
        16062,
        15857,
        15996,
        16090,
        16068,
        48886,
        15990,
        48474,
        48402,
        15863,
        15676,
        16040,
        15951,
        15647,
        15876,
        15822,
        16042,
        48534,
        15809,
        48845,
    ],
    "relu": [
        16354,
        16077,
        16251,
        16399,
        16367,
        0,
        16243,
        0,
        0,
        16082,
        15892,
        16314,
        16195,
        15865,
        16099,
        16043,
        16319,
        0,
        16032,
        0,
    ],
    "reduce_mean0": [16034, 16265, 16049, 16164, 16111],
}

RNG = np.random.RandomState(0)
A = RNG.randn(4, 5).astype(np.float32)
B = RNG.randn(5, 3).astype(np.float32)
BUILD = {
    "matmul": lambda x, y: tf.matmul(x, y),
    "exp": lambda x, y: tf.exp(x),
    "x*x+x": lambda x, y: x * x + x,
    "tanh": lambda x, y: tf.tanh(x),
    "reduce_sum1": lambda x, y: tf.reduce_sum(x, 1),
    "sqrt_abs": lambda x, y: tf.sqrt(tf.abs(x)),
    "div": lambda x, y: x / (x + 3.0),
    "relu": lambda x, y: tf.nn.relu(x),
    "reduce_mean0": lambda x, y: tf.reduce_mean(x, 0),
}


def test_dtype_is_ml_dtypes_bfloat16():
    assert tf.bfloat16.as_numpy_dtype is ml_dtypes.bfloat16
    assert tf.as_dtype(ml_dtypes.bfloat16) == tf.bfloat16 and tf.bfloat16.is_floating
    assert tf.bfloat16.max == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)


@pytest.mark.parametrize("name", sorted(TF_BITS))
def test_kernels_round_like_tensorflow(name):
    x = tf.cast(tf.constant(A), tf.bfloat16)
    y = tf.cast(tf.constant(B), tf.bfloat16)
    out = BUILD[name](x, y)
    assert out.dtype == tf.bfloat16
    with tf.Session() as sess:
        got = sess.run(out)
    assert got.dtype == ml_dtypes.bfloat16
    assert np.asarray(got).view(np.uint16).ravel().tolist() == TF_BITS[name]


def test_constants_feeds_and_protos_round_trip():
    value = np.array([1.5, -2.0, 3.140625], ml_dtypes.bfloat16)
    proto = tensor_util.make_tensor_proto(value)
    assert proto.dtype == tf.bfloat16.as_datatype_enum
    np.testing.assert_array_equal(tensor_util.make_ndarray(proto), value)
    splat = tensor_util.make_ndarray(tensor_util.make_tensor_proto(value[:1], shape=[3]))
    assert splat.dtype == ml_dtypes.bfloat16 and splat.tolist() == [1.5] * 3
    p = tf.placeholder(tf.bfloat16, [3])
    with tf.Session() as sess:
        doubled = sess.run(p * 2, {p: [1.0, 2.5, 1.0001]})
        cast = sess.run(tf.to_bfloat16(tf.constant([1.0001, 3.14159])))
    assert doubled.dtype == ml_dtypes.bfloat16 and doubled.tolist() == [2.0, 5.0, 2.0]
    assert cast.tolist() == [1.0, 3.140625]  # round to nearest even


def test_gradients_in_bfloat16():
    x = tf.constant([1.5, 2.25, -3.0], tf.bfloat16)
    w = tf.constant([[1.0, 2.0, 3.0]], tf.bfloat16)
    loss = tf.reduce_sum(tf.matmul(w, tf.reshape(x * x, [3, 1])))
    with tf.Session() as sess:
        grad = sess.run(tf.gradients(loss, x)[0])
    assert grad.dtype == ml_dtypes.bfloat16 and grad.tolist() == [3.0, 9.0, -18.0]

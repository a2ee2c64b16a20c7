"""Activations, softmax, bias, cross-entropies, L2Loss, LRN, FusedBatchNorm, top-k vs NumPy."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.framework.apply_op import apply_op
from flowgraph.testing.op_test import check_op, run

FLOATS = [np.float16, np.float32, np.float64]
TOL = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-12}


def _rand(shape, dtype, seed=0, low=-3.0, high=3.0):
    return np.random.RandomState(seed).uniform(low, high, shape).astype(dtype)


SELU_SCALE, SELU_ALPHA = 1.0507009873554805, 1.6732632423543772
ACTIVATIONS = {
    "relu": (tf.nn.relu, lambda x: np.where(x > 0, x, 0)),
    "relu6": (tf.nn.relu6, lambda x: np.minimum(np.maximum(x, 0), 6)),
    "elu": (tf.nn.elu, lambda x: np.where(x > 0, x, np.exp(x) - 1)),
    "selu": (tf.nn.selu, lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * (np.exp(x) - 1))),
    "softplus": (tf.nn.softplus, lambda x: np.log1p(np.exp(x))),
    "softsign": (tf.nn.softsign, lambda x: x / (1 + np.abs(x))),
    # alpha is a float attr: 32 bits, like TF's, also when x is float64.
    "leaky_relu": (
        lambda x: tf.nn.leaky_relu(x, alpha=0.3),
        lambda x: np.where(x > 0, x, float(np.float32(0.3)) * x),
    ),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", FLOATS)
def test_activation(name, dtype):
    fn, ref = ACTIVATIONS[name]
    x = _rand((3, 5), dtype) * 3  # reaches past relu6's upper knee
    want = ref(x.astype(np.float64)).astype(dtype)
    check_op(fn, [x], lambda a: want, rtol=TOL[dtype] * 2, atol=TOL[dtype] * 2)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8])
def test_relu_integers(dtype):
    x = np.array([[-3, 0, 2, 7]], dtype)
    check_op(tf.nn.relu, [x], lambda a: np.maximum(a, 0).astype(dtype))
    check_op(tf.nn.relu6, [x], lambda a: np.clip(a, 0, 6).astype(dtype))


def test_softplus_is_stable_for_large_inputs():
    x = np.array([-100.0, 0.0, 100.0], np.float32)
    np.testing.assert_allclose(
        run(tf.nn.softplus, [x]), [0.0, np.log(2), 100.0], rtol=1e-6, atol=1e-30
    )


ACTIVATION_GRADS = {  # op -> (reference of d/dx given dy, x, y)
    "ReluGrad": lambda dy, x: dy * (x > 0),
    "Relu6Grad": lambda dy, x: dy * ((x > 0) & (x < 6)),
    "SoftplusGrad": lambda dy, x: dy / (1 + np.exp(-x)),
    "SoftsignGrad": lambda dy, x: dy / (1 + np.abs(x)) ** 2,
    "EluGrad": lambda dy, y: np.where(y < 0, dy * (y + 1), dy),
    "SeluGrad": lambda dy, y: np.where(y < 0, dy * (y + SELU_SCALE * SELU_ALPHA), dy * SELU_SCALE),
    "LeakyReluGrad": lambda dy, x: np.where(x > 0, dy, 0.2 * dy),
}


@pytest.mark.parametrize("op", sorted(ACTIVATION_GRADS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activation_grad_kernels(op, dtype):
    dy, x = _rand((4, 3), dtype, 1), _rand((4, 3), dtype, 2) * 3
    want = ACTIVATION_GRADS[op](dy.astype(np.float64), x.astype(np.float64)).astype(dtype)
    check_op(
        lambda a, b: apply_op(op, [a, b]).outputs[0],
        [dy, x],
        lambda a, b: want,
        rtol=1e-6,
        atol=1e-6,
    )


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_and_log_softmax(dtype):
    x = _rand((3, 4, 5), dtype) * 10
    x64 = x.astype(np.float64)
    check_op(
        tf.nn.softmax, [x], lambda a: _softmax(x64).astype(dtype), rtol=TOL[dtype], atol=TOL[dtype]
    )
    check_op(
        tf.nn.log_softmax,
        [x],
        lambda a: np.log(_softmax(x64)).astype(dtype),
        rtol=TOL[dtype] * 10,
        atol=TOL[dtype] * 10,
    )


def test_softmax_large_logits_and_errors():
    x = np.array([[1000.0, 0.0], [-1000.0, -1000.0]], np.float32)
    np.testing.assert_allclose(run(tf.nn.softmax, [x]), [[1, 0], [0.5, 0.5]])
    with pytest.raises(ValueError):
        tf.nn.softmax(tf.zeros([2, 3]), axis=1, dim=1)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", FLOATS + [np.int32])
def test_bias_add_and_grad(data_format, dtype):
    x, b = _rand((2, 3, 4, 5), dtype), _rand((5 if data_format == "NHWC" else 3,), dtype, 1)
    shape = (1, 1, 1, 5) if data_format == "NHWC" else (1, 3, 1, 1)
    check_op(
        lambda a, c: tf.nn.bias_add(a, c, data_format=data_format),
        [x, b],
        lambda a, c: a + c.reshape(shape),
    )
    axes = (0, 1, 2) if data_format == "NHWC" else (0, 2, 3)
    want = x.astype(np.float64).sum(axes).astype(dtype)
    check_op(
        lambda a: apply_op("BiasAddGrad", [a], data_format=data_format).outputs[0],
        [x],
        lambda a: want,
        rtol=TOL.get(dtype, 0) * 10,
        atol=TOL.get(dtype, 0) * 10,
    )


def test_bias_add_errors():
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.nn.bias_add(tf.zeros([2, 3]), tf.zeros([4]))
    with pytest.raises(ValueError, match="data_format"):
        tf.nn.bias_add(tf.zeros([2, 3]), tf.zeros([3]), data_format="CHWN")


@pytest.mark.parametrize("dtype", FLOATS)
def test_l2_loss(dtype):
    x = _rand((3, 4), dtype)
    check_op(
        tf.nn.l2_loss,
        [x],
        lambda a: np.asarray((a.astype(np.float64) ** 2).sum() / 2, dtype),
        rtol=TOL[dtype] * 10,
        atol=TOL[dtype],
    )


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_cross_entropy_op(dtype):
    logits, labels = _rand((4, 5), dtype), _softmax(_rand((4, 5), np.float64, 1)).astype(dtype)
    lg, lb = logits.astype(np.float64), labels.astype(np.float64)
    want = (-(lb * np.log(_softmax(lg))).sum(1)).astype(dtype), (_softmax(lg) - lb).astype(dtype)
    fn = lambda a, b: apply_op("SoftmaxCrossEntropyWithLogits", [a, b]).outputs
    check_op(fn, [logits, labels], lambda a, b: want, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_cross_entropy_large_logits(dtype):
    """The compiled kernel (float32/64, labels of the logits' shape) shifts each row by its
    maximum as TF's: logits of 1e4 and 1e30 give finite losses and gradients; a row of equal
    logits is uniform; labels need not be one-hot."""
    logits = np.array([[1e4, -1e4, 0.0], [1e30, 1e30, -1e30], [7.0, 7.0, 7.0]], dtype)
    labels = np.array([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], dtype)
    shifted = logits.astype(np.float64) - logits.astype(np.float64).max(1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    want_loss = -(labels * log_p).sum(1)
    loss, grad = apply_op("SoftmaxCrossEntropyWithLogits", [logits, labels]).outputs
    with tf.Session() as sess:
        got_loss, got_grad = sess.run([loss, grad])
    assert got_loss.dtype == dtype and got_grad.dtype == dtype
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-6)
    np.testing.assert_allclose(got_grad, np.exp(log_p) - labels, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
def test_sparse_softmax_cross_entropy(dtype, label_dtype):
    logits, labels = _rand((4, 5), dtype), np.array([0, 4, 2, 2], label_dtype)
    p = _softmax(logits.astype(np.float64))
    want = (-np.log(p[np.arange(4), labels])).astype(dtype)
    check_op(
        lambda a, b: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=b, logits=a),
        [logits, labels],
        lambda a, b: want,
        rtol=TOL[dtype] * 10,
        atol=TOL[dtype] * 10,
    )
    onehot = np.eye(5)[labels]
    fn = lambda a, b: apply_op("SparseSoftmaxCrossEntropyWithLogits", [a, b]).outputs[1]
    check_op(
        fn,
        [logits, labels],
        lambda a, b: (p - onehot).astype(dtype),
        rtol=TOL[dtype] * 10,
        atol=TOL[dtype] * 10,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sparse_softmax_cross_entropy_large_logits(dtype):
    """The compiled kernel (float32/64) shifts each row by its maximum: logits of 1e4 and 1e30
    give finite losses and gradients, as TF's; a row of equal logits is uniform."""
    logits = np.array([[1e4, -1e4, 0.0], [1e30, 1e30, -1e30], [7.0, 7.0, 7.0]], dtype)
    labels = np.array([1, 0, 2], np.int64)
    shifted = logits.astype(np.float64) - logits.astype(np.float64).max(1, keepdims=True)
    p = np.exp(shifted) / np.exp(shifted).sum(1, keepdims=True)
    want_loss = np.log(np.exp(shifted).sum(1)) - shifted[np.arange(3), labels]
    loss, grad = apply_op("SparseSoftmaxCrossEntropyWithLogits", [logits, labels]).outputs
    with tf.Session() as sess:
        got_loss, got_grad = sess.run([loss, grad])
    assert got_loss.dtype == dtype and got_grad.dtype == dtype
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-6)
    np.testing.assert_allclose(got_grad, p - np.eye(3)[labels], rtol=1e-6, atol=1e-7)


def test_sparse_softmax_cross_entropy_errors():
    logits = tf.placeholder(tf.float32, [None, 3])
    labels = tf.placeholder(tf.int32, [None])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="outside the valid range"):
            sess.run(loss, {logits: np.zeros((2, 3)), labels: [0, 3]})
        with pytest.raises(tf.errors.InvalidArgumentError, match="outside the valid range"):
            sess.run(loss, {logits: np.zeros((2, 3)), labels: [-1, 0]})
    with pytest.raises(ValueError, match="Rank mismatch"):
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.zeros([2, 3], tf.int32), logits=tf.zeros([2, 3])
        )
    with pytest.raises(ValueError, match="named arguments"):
        tf.nn.sparse_softmax_cross_entropy_with_logits(tf.zeros([2], tf.int32), tf.zeros([2, 3]))


def _lrn_ref(x, r, bias, alpha, beta):
    out = np.zeros_like(x, dtype=np.float64)
    depth = x.shape[-1]
    for d in range(depth):
        lo, hi = max(0, d - r), min(depth, d + r + 1)
        sq = (x[..., lo:hi].astype(np.float64) ** 2).sum(-1)
        out[..., d] = x[..., d] / (bias + alpha * sq) ** beta
    return out


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_lrn(dtype):
    x = _rand((2, 3, 2, 7), dtype)
    want = _lrn_ref(x, 2, 1.5, 0.3, 0.75).astype(dtype)
    check_op(
        lambda a: tf.nn.lrn(a, 2, 1.5, 0.3, 0.75),
        [x],
        lambda a: want,
        rtol=TOL[dtype] * 5,
        atol=TOL[dtype] * 5,
    )
    check_op(
        lambda a: tf.nn.local_response_normalization(a),
        [x],
        lambda a: _lrn_ref(a, 5, 1, 1, 0.5).astype(dtype),
        rtol=TOL[dtype] * 5,
        atol=TOL[dtype] * 5,
    )


def test_lrn_grad_kernel_matches_finite_differences():
    x, dy = _rand((1, 2, 2, 6), np.float32, 0, -1, 1), _rand((1, 2, 2, 6), np.float32, 1, -1, 1)
    y = _lrn_ref(x, 2, 1.0, 0.5, 0.75).astype(np.float32)
    got = run(
        lambda a, b, c: apply_op(
            "LRNGrad", [a, b, c], depth_radius=2, bias=1.0, alpha=0.5, beta=0.75
        ).outputs[0],
        [dy, x, y],
    )
    x64, eps, want = x.astype(np.float64), 1e-6, np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        hi, lo = x64.copy(), x64.copy()
        hi[idx] += eps
        lo[idx] -= eps
        want[idx] = np.sum(
            dy * (_lrn_ref(hi, 2, 1.0, 0.5, 0.75) - _lrn_ref(lo, 2, 1.0, 0.5, 0.75))
        ) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _bn_train_ref(x, scale, offset, eps):
    mean, var = x.mean((0, 1, 2)), x.var((0, 1, 2))
    y = (x - mean) / np.sqrt(var + eps) * scale + offset
    n = x.size // x.shape[-1]
    return y, mean, var * n / (n - 1)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_fused_batch_norm_training(data_format, dtype):
    x, scale, offset = (
        _rand((2, 3, 4, 5), dtype),
        _rand((5,), np.float32, 1),
        _rand((5,), np.float32, 2),
    )
    y, mean, var = _bn_train_ref(x.astype(np.float64), scale, offset, 0.001)
    if data_format == "NCHW":
        x, y = x.transpose(0, 3, 1, 2).copy(), y.transpose(0, 3, 1, 2)
    fn = lambda a, s, o: list(
        tf.nn.fused_batch_norm(a, s, o, epsilon=0.001, data_format=data_format)
    )
    tol = 1e-2 if dtype == np.float16 else 1e-5
    check_op(
        fn,
        [x, scale, offset],
        lambda *_: [y.astype(dtype), mean.astype(np.float32), var.astype(np.float32)],
        rtol=tol,
        atol=tol,
    )


def test_fused_batch_norm_inference_and_running_average():
    x, scale, offset = (
        _rand((2, 3, 4, 5), np.float32),
        _rand((5,), np.float32, 1),
        _rand((5,), np.float32, 2),
    )
    mean, var = _rand((5,), np.float32, 3), _rand((5,), np.float32, 4, 0.5, 2)
    want = (x - mean) / np.sqrt(var + 0.01) * scale + offset
    fn = lambda *a: list(tf.nn.fused_batch_norm(*a, epsilon=0.01, is_training=False))
    check_op(fn, [x, scale, offset, mean, var], lambda *_: [want, mean, var], rtol=1e-5, atol=1e-5)
    _, batch_mean, batch_var = _bn_train_ref(x.astype(np.float64), scale, offset, 0.01)
    fn = lambda *a: list(tf.nn.fused_batch_norm(*a, epsilon=0.01, exponential_avg_factor=0.25))[1:]
    want = [0.75 * mean + 0.25 * batch_mean, 0.75 * var + 0.25 * batch_var]
    check_op(
        fn,
        [x, scale, offset, mean, var],
        lambda *_: [w.astype(np.float32) for w in want],
        rtol=1e-5,
        atol=1e-5,
    )
    with pytest.raises(ValueError, match="mean"):
        tf.nn.fused_batch_norm(tf.zeros([1, 2, 2, 5]), tf.ones([5]), is_training=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
def test_top_k_sorted_with_ties_by_lower_index(dtype):
    x = np.array([[3, 1, 3, 2, 3, 0], [5, 5, 1, 0, 9, 5]], dtype)
    values, indices = run(lambda a: list(tf.nn.top_k(a, 4)), [x])
    np.testing.assert_array_equal(indices, [[0, 2, 4, 3], [4, 0, 1, 5]])
    np.testing.assert_array_equal(values, np.take_along_axis(x, indices, 1))
    assert values.dtype == dtype and indices.dtype == np.int32


def test_top_k_shapes_and_errors():
    x = tf.placeholder(tf.float32, [None, 2, 6])
    values, indices = tf.nn.top_k(x, 3)
    assert values.shape.as_list() == [None, 2, 3] and indices.dtype == tf.int32
    with pytest.raises(tf.errors.InvalidArgumentError, match="at least k"):
        tf.nn.top_k(tf.zeros([2, 3]), 4)
    k = tf.placeholder(tf.int32, [])
    out = tf.nn.top_k(tf.zeros([2, 3]), k)
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match="at least k"):
        sess.run(out, {k: 5})


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_in_top_k(dtype):
    pred = np.array(
        [[0.1, 0.9, 0.9, 0.3], [0.5, 0.2, 0.1, 0.0], [np.nan, 1, 2, 3], [1, 2, 3, 4]], np.float32
    )
    targets = np.array([2, 1, 3, 7], dtype)
    for k, want in [(1, [True, False, False, False]), (2, [True, True, False, False])]:
        got = run(lambda p, t, k=k: tf.nn.in_top_k(p, t, k), [pred, targets])
        np.testing.assert_array_equal(got, want)

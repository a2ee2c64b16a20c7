"""Numeric-Jacobian checks of the NN row's gradient functions, on float32 and float64."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.framework.apply_op import apply_op
from flowgraph.testing.gradient_checker import check_gradients

DTYPES = [np.float32, np.float64]


def _rand(shape, dtype, seed=0, low=-1.0, high=1.0):
    return np.random.RandomState(seed).uniform(low, high, shape).astype(dtype)


def _away_from_kinks(shape, dtype, seed=0, kinks=(0.0,), scale=2.0):
    """Inputs in [-scale, scale] at least 0.1 from every kink, so central differences see a
    smooth function."""
    x = _rand(shape, np.float64, seed, -scale, scale)
    for k in kinks:
        near = np.abs(x - k) < 0.1
        x[near] = k + 0.1 * np.sign(x[near] - k + 1e-9) + (x[near] - k)
    return x.astype(dtype)


# -- convolution and pooling ----------------------------------------------------------------------
CONV_CASES = [
    ([1, 1, 1, 1], "SAME", [1, 1, 1, 1]),
    ([1, 2, 2, 1], "SAME", [1, 1, 1, 1]),
    ([1, 2, 1, 1], "VALID", [1, 1, 1, 1]),
    ([1, 1, 1, 1], "SAME", [1, 2, 2, 1]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strides,padding,dilations", CONV_CASES)
def test_conv2d_grad(dtype, strides, padding, dilations):
    x, f = _rand((2, 5, 4, 2), dtype), _rand((3, 2, 2, 3), dtype, 1)
    check_gradients(lambda a, b: tf.nn.conv2d(a, b, strides, padding, dilations=dilations), [x, f])


@pytest.mark.parametrize("dtype", DTYPES)
def test_conv2d_nchw_grad(dtype):
    x, f = _rand((1, 2, 5, 4), dtype), _rand((2, 3, 2, 2), dtype, 1)
    check_gradients(
        lambda a, b: tf.nn.conv2d(a, b, [1, 1, 2, 1], "SAME", data_format="NCHW"), [x, f]
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_conv2d_backprop_ops_grad(dtype):
    """Second order: the gradients of Conv2DBackpropInput and Conv2DBackpropFilter."""
    f, dy = _rand((3, 3, 2, 3), dtype), _rand((1, 3, 2, 3), dtype, 1)
    check_gradients(
        lambda a, b: tf.nn.conv2d_backprop_input([1, 5, 4, 2], a, b, [1, 2, 2, 1], "SAME"), [f, dy]
    )
    x = _rand((1, 5, 4, 2), dtype, 2)
    check_gradients(
        lambda a, b: tf.nn.conv2d_backprop_filter(a, [3, 3, 2, 3], b, [1, 2, 2, 1], "SAME"), [x, dy]
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_depthwise_conv2d_grad(dtype):
    x, f = _rand((2, 5, 4, 2), dtype), _rand((3, 2, 2, 2), dtype, 1)
    check_gradients(lambda a, b: tf.nn.depthwise_conv2d(a, b, [1, 2, 1, 1], "SAME"), [x, f])
    dy = _rand((1, 3, 4, 4), dtype, 2)
    check_gradients(
        lambda a, b: tf.nn.depthwise_conv2d_native_backprop_input(
            [1, 5, 4, 2], a, b, [1, 2, 1, 1], "SAME"
        ),
        [f, dy],
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_max_pool_grad(dtype, padding):
    # Distinct, well-separated values: the argmax of each window is stable under the perturbation.
    x = (np.random.RandomState(0).permutation(2 * 5 * 5 * 2).reshape(2, 5, 5, 2) * 0.1).astype(
        dtype
    )
    check_gradients(lambda a: tf.nn.max_pool(a, 3, 2, padding), [x])


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pool_second_order(dtype):
    x = (np.random.RandomState(0).permutation(4 * 4 * 2).reshape(1, 4, 4, 2) * 0.1).astype(dtype)
    y = x.reshape(1, 2, 2, 2, 2, 2).max(axis=(2, 4))
    dy = _rand(y.shape, dtype, 1)

    def grad_of_pool(g):
        return apply_op(
            "MaxPoolGrad",
            [tf.constant(x), tf.constant(y), g],
            ksize=[1, 2, 2, 1],
            strides=[1, 2, 2, 1],
            padding="VALID",
        ).outputs[0]

    check_gradients(grad_of_pool, [dy])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_avg_pool_grad(dtype, padding):
    x = _rand((2, 5, 4, 2), dtype)
    check_gradients(lambda a: tf.nn.avg_pool(a, [1, 3, 2, 1], [1, 2, 2, 1], padding), [x])
    check_gradients(
        lambda a: tf.nn.avg_pool(a, [1, 1, 3, 2], [1, 1, 2, 2], padding, data_format="NCHW"),
        [x.transpose(0, 3, 1, 2).copy()],
    )


# -- activations, softmax, bias, losses -----------------------------------------------------------
ACTIVATIONS = {
    "relu": (tf.nn.relu, (0.0,)),
    "relu6": (tf.nn.relu6, (0.0, 6.0)),
    "elu": (tf.nn.elu, (0.0,)),
    "selu": (tf.nn.selu, (0.0,)),
    "leaky_relu": (lambda x: tf.nn.leaky_relu(x, 0.1), (0.0,)),
    "softplus": (tf.nn.softplus, ()),
    "softsign": (tf.nn.softsign, (0.0,)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_grads(dtype, name):
    fn, kinks = ACTIVATIONS[name]
    x = _away_from_kinks((3, 4), dtype, kinks=kinks, scale=8.0 if name == "relu6" else 2.0)
    check_gradients(fn, [x])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["relu", "elu", "selu", "softplus", "leaky_relu"])
def test_activation_second_order(dtype, name):
    """d/dx of (d act / dx . v): exercises the *Grad ops' own gradients."""
    fn = ACTIVATIONS[name][0]
    x = _away_from_kinks((2, 3), dtype)

    def first_derivative(a):
        y = fn(a)
        return tf.gradients(y, a, grad_ys=tf.ones_like(y) * 0.7)[0]

    check_gradients(first_derivative, [x])


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_log_softmax_grad(dtype):
    x = _rand((3, 4), dtype)
    check_gradients(tf.nn.softmax, [x])
    check_gradients(tf.nn.log_softmax, [x])
    check_gradients(lambda a: tf.nn.softmax(a, axis=0), [x])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_bias_add_grad(dtype, data_format):
    x, b = _rand((2, 3, 2, 3), dtype), _rand((3,), dtype, 1)
    check_gradients(lambda a, c: tf.nn.bias_add(a, c, data_format=data_format), [x, b])

    def bias_grad(dy):  # second order: the gradient of BiasAddGrad w.r.t. its input
        return apply_op("BiasAddGrad", [dy], data_format=data_format).outputs[0]

    check_gradients(bias_grad, [_rand(x.shape, dtype, 2)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_loss_grads(dtype):
    logits, labels = (
        _rand((3, 4), dtype),
        np.random.RandomState(1).dirichlet(np.ones(4), 3).astype(dtype),
    )
    check_gradients(tf.nn.l2_loss, [logits])
    check_gradients(
        lambda a, b: tf.nn.softmax_cross_entropy_with_logits_v2(labels=b, logits=a),
        [logits, labels],
    )
    sparse = np.array([0, 3, 1])
    check_gradients(
        lambda a: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=sparse, logits=a), [logits]
    )
    check_gradients(
        lambda a, b: tf.nn.sigmoid_cross_entropy_with_logits(labels=b, logits=a), [logits, labels]
    )
    check_gradients(
        lambda a: tf.nn.weighted_cross_entropy_with_logits(labels=labels, logits=a, pos_weight=2.0),
        [logits],
    )


def test_softmax_cross_entropy_v1_stops_label_gradient():
    logits, labels = (
        tf.constant(_rand((2, 3), np.float32)),
        tf.constant(np.full((2, 3), 1 / 3, np.float32)),
    )
    v1 = tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    v2 = tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
    assert tf.gradients(v1, labels)[0] is None
    assert tf.gradients(v2, labels)[0] is not None


@pytest.mark.parametrize("dtype", DTYPES)
def test_xent_second_order(dtype):
    logits = _rand((2, 4), dtype)
    labels = np.random.RandomState(1).dirichlet(np.ones(4), 2).astype(dtype)

    def dloss(a):
        loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=tf.constant(labels), logits=a)
        return tf.gradients(loss, a, grad_ys=tf.constant(np.array([0.3, -0.8], dtype)))[0]

    check_gradients(dloss, [logits])
    sparse = np.array([1, 3])

    def dsparse(a):
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=sparse, logits=a)
        return tf.gradients(loss, a, grad_ys=tf.constant(np.array([0.3, -0.8], dtype)))[0]

    check_gradients(dsparse, [logits])


@pytest.mark.parametrize("sparse", [False, True])
def test_xent_first_order_skips_second_order_term(sparse):
    """The `backprop` output gets zeros (no gradient): as in TF, the logits' gradient is then
    backprop times the loss gradient alone, with no Softmax built for the zero term."""
    logits = tf.constant(_rand((3, 4), np.float32))
    if sparse:
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[0, 3, 1], logits=logits)
    else:
        labels = np.random.RandomState(2).dirichlet(np.ones(4), 3).astype(np.float32)
        loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
    grad = tf.gradients(tf.reduce_mean(loss), logits)[0]
    graph = tf.get_default_graph()
    assert "Softmax" not in {op.type for op in graph.get_operations()}
    with tf.Session() as sess:
        got, backprop = sess.run([grad, loss.op.outputs[1]])
    np.testing.assert_allclose(got, backprop / 3, rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_normalization_grads(dtype):
    x = _rand((3, 4), dtype)
    check_gradients(lambda a: tf.nn.l2_normalize(a, axis=1), [x])
    check_gradients(lambda a: list(tf.nn.moments(a, [0])), [x])
    mean, var = _rand((4,), dtype, 1), _rand((4,), dtype, 2, 0.5, 1.5)
    check_gradients(
        lambda a, m, v, o, s: tf.nn.batch_normalization(a, m, v, o, s, 1e-3),
        [x, mean, var, _rand((4,), dtype, 3), _rand((4,), dtype, 4)],
    )


def test_lrn_grad():
    x = _rand((1, 2, 2, 5), np.float32)
    check_gradients(
        lambda a: tf.nn.lrn(a, 2, 1.0, 0.5, 0.75), [x], delta=1e-3, atol=2e-3, rtol=2e-3
    )


@pytest.mark.parametrize("is_training", [True, False])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_fused_batch_norm_grad(is_training, data_format):
    x = (
        _rand((2, 3, 3, 2), np.float32)
        if data_format == "NHWC"
        else _rand((2, 2, 3, 3), np.float32)
    )
    scale, offset = _rand((2,), np.float32, 1), _rand((2,), np.float32, 2)
    mean, var = np.array([0.1, -0.2], np.float32), np.array([0.8, 1.3], np.float32)

    def bn(a, s, o):
        kw = {} if is_training else {"mean": mean, "variance": var}
        return tf.nn.fused_batch_norm(
            a, s, o, data_format=data_format, is_training=is_training, **kw
        )[0]

    check_gradients(bn, [x, scale, offset], atol=5e-3, rtol=5e-3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_top_k_grad(dtype):
    x = (np.random.RandomState(0).permutation(12).reshape(2, 6) * 0.3).astype(dtype)
    check_gradients(lambda a: tf.nn.top_k(a, 3).values, [x])


def test_embedding_lookup_dense_grad_through_shards():
    table = _rand((5, 2), np.float64)
    check_gradients(
        lambda a, b: tf.nn.embedding_lookup([a, b], tf.constant([[0, 3], [4, 1]])),
        [table[0::2].copy(), table[1::2].copy()],
    )

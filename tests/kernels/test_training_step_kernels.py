"""Edge semantics of the fast paths in the training-step kernels (pooling, ReLU, conv, SGD).

The fast paths multiply by 0/1 masks and write into preallocated arrays; these tests pin what
the plain formulation gave: NaN handling of MaxPool's first-maximum rule, non-finite gradients
that must not leak into other cells, +0.0 rather than -0.0, and results equal to NumPy loops.
"""

import numpy as np
import pytest

from flowgraph.framework.apply_op import apply_op
from flowgraph.testing.op_test import run


def _max_pool_grad(x, dy, k=2, s=2, padding="VALID"):
    y = np.zeros(dy.shape, x.dtype)
    return run(
        lambda a, b, c: apply_op(
            "MaxPoolGrad", [a, b, c], ksize=[1, k, k, 1], strides=[1, s, s, 1], padding=padding
        ).outputs[0],
        [x, y, dy],
    )


def _scan_argmax_grad(x, dy, k, s):
    """VALID max-pool gradient by a strict `>` scan over each window in row-major order."""
    dx = np.zeros_like(dy, shape=x.shape)
    n, oh, ow, c = dy.shape
    for b in range(n):
        for y in range(oh):
            for z in range(ow):
                for ch in range(c):
                    cells = [(y * s + i, z * s + j) for i in range(k) for j in range(k)]
                    best = 0
                    for t, (r, col) in enumerate(cells):
                        if x[b, r, col, ch] > x[b, cells[best][0], cells[best][1], ch]:
                            best = t
                    r, col = cells[best]
                    dx[b, r, col, ch] += dy[b, y, z, ch]
    return dx


@pytest.mark.parametrize("k,s", [(2, 2), (3, 2)])
def test_max_pool_grad_nan_inputs_follow_the_strict_scan(k, s):
    x = np.random.RandomState(0).randint(0, 3, (2, 6, 6, 2)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan  # first tap of a window: claims it
    x[0, 2, 3, 1] = np.nan  # a later tap: ignored
    x[1, 4, 4, 0] = -np.inf
    oh = (6 - k) // s + 1
    dy = np.random.RandomState(1).uniform(-1, 1, (2, oh, oh, 2)).astype(np.float32)
    got = _max_pool_grad(x, dy, k, s)
    np.testing.assert_array_equal(got, _scan_argmax_grad(x, dy, k, s))


def test_max_pool_grad_non_finite_gradient_stays_at_the_maximum():
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    dy = np.array([[np.nan, np.inf], [-np.inf, 1.0]], np.float32).reshape(1, 2, 2, 1)
    got = _max_pool_grad(x, dy)[0, :, :, 0]
    want = np.zeros((4, 4), np.float32)
    want[1, 1], want[1, 3], want[3, 1], want[3, 3] = np.nan, np.inf, -np.inf, 1.0
    np.testing.assert_array_equal(got, want)


def test_max_pool_grad_zeros_are_positive():
    x = np.random.RandomState(0).uniform(size=(1, 4, 4, 3)).astype(np.float32)
    dy = -np.ones((1, 2, 2, 3), np.float32)
    got = _max_pool_grad(x, dy)
    assert not np.signbit(got[got == 0]).any()


@pytest.mark.parametrize("k,s", [(2, 2), (3, 2)])
def test_max_pool_grad_grad_gathers_exactly_at_the_first_maximum(k, s):
    x = np.random.RandomState(0).randint(0, 3, (2, 6, 6, 2)).astype(np.float64)
    x[0, 0, 0, 0] = np.nan
    ddx = np.random.RandomState(1).uniform(-1, 1, x.shape)
    ddx[0, 0, 0, 0], ddx[1, 1, 1, 1], ddx[1, 2, 2, 0] = np.nan, -np.inf, -0.0
    oh = (6 - k) // s + 1
    y = np.zeros((2, oh, oh, 2))
    got = run(
        lambda a, b, c: apply_op(
            "MaxPoolGradGrad", [a, b, c], ksize=[1, k, k, 1], strides=[1, s, s, 1], padding="VALID"
        ).outputs[0],
        [x, y, ddx],
    )
    # The adjoint of the scan's scatter, one unit gradient per output cell, read back as a gather.
    want = np.zeros_like(y)
    for idx in np.ndindex(*y.shape):
        unit = np.zeros_like(y)
        unit[idx] = 1
        want[idx] = ddx[_scan_argmax_grad(x, unit, k, s) == 1][0]
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got).sum() == np.signbit(want).sum()


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float16])
def test_max_pool_grad_dtypes(dtype):
    x = np.random.RandomState(2).randint(0, 4, (1, 6, 6, 2)).astype(dtype)
    dy = np.random.RandomState(3).randint(1, 5, (1, 2, 2, 2)).astype(dtype)
    got = _max_pool_grad(x, dy, 3, 3)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, _scan_argmax_grad(x, dy, 3, 3))


@pytest.mark.parametrize("op", ["ReluGrad", "Relu6Grad"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint16])
def test_relu_grads_are_gradient_times_mask(op, dtype):
    """TF's formula, gradients * cast(mask): dtype kept, a NaN gradient stays NaN everywhere."""
    x = np.array([[-2, 0, 3, 6], [7, 1, 0, 5]]).astype(dtype)
    dy = np.array([[1, 2, 3, 4], [5, 6, 7, 8]]).astype(dtype)
    if dtype in (np.float32, np.float16):
        dy[0, 0], dy[0, 2] = np.nan, np.inf
    mask = (x > 0) & (x < 6) if op == "Relu6Grad" else x > 0
    got = run(lambda a, b: apply_op(op, [a, b]).outputs[0], [dy, x])
    assert got.dtype == dtype
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got, dy * mask.astype(dtype))


@pytest.mark.parametrize(
    "budget", [1, 3000, 40000, 2 << 20]
)  # one output row .. whole batch per block
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_im2col_blocks_tile_the_patch_matrix(budget, dtype):
    from flowgraph.kernels.cpu import windows as W

    x = np.random.RandomState(0).uniform(-1, 1, (3, 9, 8, 2)).astype(dtype)
    win = W.window(
        {
            "data_format": "NHWC",
            "strides": [1, 2, 1, 1],
            "dilations": [1, 1, 2, 1],
            "padding": "SAME",
        },
        x.shape,
        3,
        2,
    )
    xp = W.pad(x, win)
    want = W.patches(xp, win).reshape(-1, 3 * 2 * 2).astype(np.float32)
    got = np.full_like(want, np.nan)
    for first, last, block in W.im2col_blocks(xp, win, np.float32, budget):
        got[first:last] = block
    np.testing.assert_array_equal(got, want)


def test_im2col_blocks_of_an_empty_batch():
    from flowgraph.kernels.cpu import windows as W

    x = np.zeros((0, 5, 5, 2), np.float32)
    win = W.window(
        {"data_format": "NHWC", "strides": [1, 1, 1, 1], "padding": "VALID"}, x.shape, 3, 3
    )
    assert list(W.im2col_blocks(x, win, np.float32)) == []


@pytest.mark.parametrize(
    "shape,data_format",
    [
        ((5, 3), "NHWC"),
        ((2, 4, 3, 6), "NHWC"),
        ((2, 6, 4, 3), "NCHW"),
        ((2, 6, 4), "NCHW"),
        ((0, 4, 3), "NHWC"),
        ((3, 2, 0), "NCHW"),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_bias_add_grad_sums_all_but_the_channel_axis(shape, data_format, dtype):
    dy = np.random.RandomState(0).randint(-50, 50, shape).astype(dtype)
    axis = 1 if data_format == "NCHW" else len(shape) - 1
    got = run(lambda d: apply_op("BiasAddGrad", [d], data_format=data_format).outputs[0], [dy])
    assert got.dtype == dtype and got.shape == (shape[axis],)
    np.testing.assert_array_equal(
        got, dy.sum(axis=tuple(a for a in range(len(shape)) if a != axis))
    )


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_apply_gradient_descent_rebinds_a_fresh_array(shape, dtype):
    import flowgraph as tf

    init = np.arange(np.prod(shape, dtype=int), dtype=dtype).reshape(shape)
    g = np.full(shape, 0.5, dtype)
    var = tf.Variable(init)
    update = tf.train.GradientDescentOptimizer(0.25).apply_gradients([(tf.constant(g), var)])
    with tf.Session() as sess:
        sess.run(var.initializer)
        before = sess.run(var)
        sess.run(update)
        after = sess.run(var)
    assert after.dtype == dtype and after.shape == shape
    np.testing.assert_array_equal(after, init - np.asarray(0.25, dtype) * g)
    np.testing.assert_array_equal(before, init)  # the value read before the update is untouched


@pytest.mark.parametrize("in_channels", [1, 2])
@pytest.mark.parametrize(
    "strides,padding,dilations",
    [((1, 1), "SAME", (1, 1)), ((2, 3), "SAME", (1, 1)), ((1, 2), "VALID", (2, 1))],
)
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_conv2d_backprop_input_is_the_adjoint(
    in_channels, strides, padding, dilations, data_format
):
    """<Conv2D(x, f), dy> = <x, Conv2DBackpropInput(f, dy)>, for the one-channel path too."""
    rng = np.random.RandomState(0)
    x, f = rng.standard_normal((2, 9, 8, in_channels)), rng.standard_normal((3, 2, in_channels, 4))
    if data_format == "NCHW":
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    attrs = {
        "strides": [1, 1, *strides] if data_format == "NCHW" else [1, *strides, 1],
        "padding": padding,
        "dilations": [1, 1, *dilations] if data_format == "NCHW" else [1, *dilations, 1],
        "data_format": data_format,
    }
    y = run(lambda a, b: apply_op("Conv2D", [a, b], **attrs).outputs[0], [x, f])
    dy = rng.standard_normal(y.shape)
    dx = run(
        lambda b, d: apply_op(
            "Conv2DBackpropInput", [np.array(x.shape, np.int32), b, d], **attrs
        ).outputs[0],
        [f, dy],
    )
    assert dx.shape == x.shape
    np.testing.assert_allclose(np.sum(y * dy), np.sum(x * dx), rtol=1e-10)


def test_max_pool_grad_grad_rejects_a_gradient_of_the_wrong_shape():
    import flowgraph as tf

    x = np.zeros((1, 4, 4, 1), np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="expected the input's"):
        run(
            lambda a, b, c: apply_op(
                "MaxPoolGradGrad",
                [a, b, c],
                ksize=[1, 2, 2, 1],
                strides=[1, 2, 2, 1],
                padding="VALID",
            ).outputs[0],
            [x, np.zeros((1, 2, 2, 1), np.float32), np.zeros((1, 4, 2, 1), np.float32)],
        )


def test_conv2d_and_filter_backprop_of_a_depth_zero_input():
    x, f = np.zeros((2, 5, 5, 0), np.float32), np.zeros((3, 3, 0, 4), np.float32)
    attrs = {"strides": [1, 1, 1, 1], "padding": "SAME"}
    y = run(lambda a, b: apply_op("Conv2D", [a, b], **attrs).outputs[0], [x, f])
    np.testing.assert_array_equal(y, np.zeros((2, 5, 5, 4), np.float32))
    df = run(
        lambda a, d: apply_op(
            "Conv2DBackpropFilter", [a, np.array(f.shape, np.int32), d], **attrs
        ).outputs[0],
        [x, np.ones((2, 5, 5, 4), np.float32)],
    )
    assert df.shape == f.shape


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_relu_and_its_gradient_on_special_values(dtype):
    """Relu is x < 0 ? 0 : x as in TensorFlow (checked against TF 2.21): NaN and -0.0 pass
    through; ReluGrad is dy * (x > 0), so a NaN or inf gradient where the unit is off gives NaN.
    float32/float64 run the compiled loops, float16 NumPy's."""
    x = np.array([-2, -0.0, 0.0, 3, np.nan, -np.inf, np.inf], dtype)
    got = run(lambda a: apply_op("Relu", [a]).outputs[0], [x])
    want = np.array([0, -0.0, 0, 3, np.nan, 0, np.inf], dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    dy = np.array([1, -2, np.nan, np.inf, -1, 5, -0.0], dtype)
    got = run(lambda a, b: apply_op("ReluGrad", [a, b]).outputs[0], [dy, x])
    with np.errstate(invalid="ignore"):
        want = dy * (x > 0).astype(dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))

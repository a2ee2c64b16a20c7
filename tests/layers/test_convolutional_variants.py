"""tf.layers Conv1D, Conv2DTranspose, SeparableConv1D/2D and 1-D pooling against NumPy
references; variable names and shapes as TF 1.15's layers create them."""

import inspect

import numpy as np
import pytest

import flowgraph as tf

RNG = np.random.RandomState(0)


def _run(outputs, feed=None):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        weights = sess.run(tf.trainable_variables())
        return sess.run(outputs, feed), weights


def _conv1d_ref(x, k, stride=1, same=False):
    """x [N, L, C], k [K, C, F]; TF's 'same' pads (K - 1) // 2 before."""
    _, length, _ = x.shape
    width = k.shape[0]
    if same:
        out_len = -(-length // stride)
        total = max((out_len - 1) * stride + width - length, 0)
        x = np.pad(x, [(0, 0), (total // 2, total - total // 2), (0, 0)])
    out_len = (x.shape[1] - width) // stride + 1
    return np.stack(
        [
            np.einsum("nkc,kcf->nf", x[:, i * stride : i * stride + width], k)
            for i in range(out_len)
        ],
        axis=1,
    )


def test_conv1d_layer():
    x = RNG.rand(2, 7, 3).astype(np.float32)
    same = tf.layers.conv1d(x, 4, 3, padding="same", bias_initializer=tf.ones_initializer())
    valid = tf.layers.Conv1D(2, 2, strides=2, name="strided")
    out = valid(tf.constant(x))
    assert same.shape == (2, 7, 4) and out.shape == (2, 3, 2)
    (got_same, got_valid), weights = _run([same, out])
    names = [v.name for v in tf.trainable_variables()]
    assert names == ["conv1d/kernel:0", "conv1d/bias:0", "strided/kernel:0", "strided/bias:0"]
    np.testing.assert_allclose(got_same, _conv1d_ref(x, weights[0], same=True) + 1, 1e-5, 1e-6)
    np.testing.assert_allclose(got_valid, _conv1d_ref(x, weights[2], stride=2), 1e-5, 1e-6)


def _conv2d_transpose_ref(x, k, stride, out_hw, same):
    """Scatter each input pixel times the kernel [kh, kw, F, C] into the (padded) output."""
    n, h, w, _ = x.shape
    kh, kw, filters, _ = k.shape
    full_h, full_w = (h - 1) * stride + kh, (w - 1) * stride + kw
    full = np.zeros((n, max(full_h, out_hw[0]), max(full_w, out_hw[1]), filters))
    for i in range(h):
        for j in range(w):
            contribution = np.einsum("nc,hwfc->nhwf", x[:, i, j], k)
            full[:, i * stride : i * stride + kh, j * stride : j * stride + kw] += contribution
    if same:  # TF crops the padding it would have added to the forward convolution
        pad_h = max((h - 1) * stride + kh - out_hw[0], 0)
        pad_w = max((w - 1) * stride + kw - out_hw[1], 0)
        return full[:, pad_h // 2 : pad_h // 2 + out_hw[0], pad_w // 2 : pad_w // 2 + out_hw[1]]
    return full[:, : out_hw[0], : out_hw[1]]


@pytest.mark.parametrize("padding", ["same", "valid"])
def test_conv2d_transpose_layer(padding):
    x = RNG.rand(2, 4, 5, 3).astype(np.float32)
    image = tf.placeholder(tf.float32, [None, 4, 5, 3])
    up = tf.layers.conv2d_transpose(image, 6, 3, strides=2, padding=padding, use_bias=False)
    want_hw = (8, 10) if padding == "same" else (9, 11)
    assert up.shape.as_list() == [None, *want_hw, 6]
    got, weights = _run(up, {image: x})
    kernel = weights[0]
    assert tf.trainable_variables()[0].name == "conv2d_transpose/kernel:0"
    assert kernel.shape == (3, 3, 6, 3)
    want = _conv2d_transpose_ref(x, kernel, 2, want_hw, padding == "same")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="dilation_rate"):
        tf.layers.Conv2DTranspose(4, 3, dilation_rate=2)


def test_separable_convolutions():
    x = RNG.rand(2, 5, 5, 3).astype(np.float32)
    out = tf.layers.separable_conv2d(x, 4, 3, depth_multiplier=2, activation=tf.nn.relu)
    seq = RNG.rand(2, 7, 3).astype(np.float32)
    out1 = tf.layers.separable_conv1d(seq, 5, 3, padding="same")
    assert out.shape == (2, 3, 3, 4) and out1.shape == (2, 7, 5)
    (got, got1), weights = _run([out, out1])
    shapes = [(v.name, v.shape.as_list()) for v in tf.trainable_variables()]
    assert shapes == [
        ("separable_conv2d/depthwise_kernel:0", [3, 3, 3, 2]),
        ("separable_conv2d/pointwise_kernel:0", [1, 1, 6, 4]),
        ("separable_conv2d/bias:0", [4]),
        ("separable_conv1d/depthwise_kernel:0", [3, 3, 1]),
        ("separable_conv1d/pointwise_kernel:0", [1, 3, 5]),
        ("separable_conv1d/bias:0", [5]),
    ]
    depthwise, pointwise = weights[0], weights[1]
    dw = np.stack(
        [
            np.stack(
                [
                    np.einsum("nhwc,hwcm->ncm", x[:, i : i + 3, j : j + 3], depthwise)
                    for j in range(3)
                ],
                1,
            )
            for i in range(3)
        ],
        1,
    ).reshape(2, 3, 3, 6)
    np.testing.assert_allclose(got, np.maximum(dw @ pointwise[0, 0], 0), rtol=1e-5, atol=1e-6)
    per_channel = np.stack(
        [
            _conv1d_ref(seq[..., c : c + 1], weights[3][:, c : c + 1, :], same=True)[..., 0]
            for c in range(3)
        ],
        -1,
    )
    np.testing.assert_allclose(got1, per_channel @ weights[4][0], rtol=1e-5, atol=1e-6)


def test_pooling1d():
    x = RNG.rand(2, 7, 3).astype(np.float32)
    m = tf.layers.max_pooling1d(x, 2, 2)
    a = tf.layers.average_pooling1d(x, 3, 1, padding="same")
    first = tf.layers.MaxPooling1D(2, 1, data_format="channels_first")(tf.constant(x))
    (got_m, got_a, got_first), _ = _run([m, a, first])
    np.testing.assert_allclose(got_m, x[:, :6].reshape(2, 3, 2, 3).max(2))
    padded = np.pad(x, [(0, 0), (1, 1), (0, 0)], constant_values=np.nan)
    windows = np.stack([padded[:, i : i + 3] for i in range(7)], 1)
    np.testing.assert_allclose(got_a, np.nanmean(windows, axis=2), rtol=1e-6)
    np.testing.assert_allclose(got_first, np.maximum(x[:, :, :-1], x[:, :, 1:]))


def test_layers_of_every_rank_share_tf1_signatures():
    """One rank-generic base per concept: TF1's positional order holds for 1-D, 2-D and 3-D, and
    the functional forms take the class's arguments after `inputs`, then `reuse`."""
    params = list(inspect.signature(tf.layers.conv3d).parameters)
    assert params[:7] == ["inputs", "filters", "kernel_size", "strides", "padding"] + [
        "data_format",
        "dilation_rate",
    ]
    assert params[-2:] == ["name", "reuse"]
    assert tf.layers.conv2d_transpose.__name__ == "conv2d_transpose"
    layer = tf.layers.Conv3D(4, 3, 1, "same", "channels_first")
    assert (layer.padding, layer.data_format, layer.strides) == ("same", "channels_first", (1,) * 3)
    assert tf.layers.MaxPooling1D(2, 1).pool_size == (2,)
    with pytest.raises(ValueError, match="tuple of 3 positive"):
        tf.layers.Conv3D(4, (3, 3))
    with pytest.raises(TypeError, match="Conv3DTranspose .* no dilation_rate"):
        tf.layers.Conv3DTranspose(2, 2, dilation_rate=2)
    x = tf.zeros([1, 3, 2, 4, 5])  # NCDHW
    up = tf.layers.conv3d_transpose(x, 6, (1, 2, 3), 2, "valid", "channels_first", name="up")
    assert up.shape.as_list() == [1, 6, 4, 8, 11]
    pooled = tf.layers.average_pooling3d(up, 2, 2, "same", "channels_first")
    assert pooled.shape.as_list() == [1, 6, 2, 4, 6]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(pooled).shape == (1, 6, 2, 4, 6)

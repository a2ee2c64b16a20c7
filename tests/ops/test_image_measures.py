"""tf.image total_variation, psnr, ssim, image_gradients, sobel_edges and the YIQ/YUV
transforms: values recorded from TensorFlow 2.21 and NumPy references."""

import numpy as np
import pytest

import flowgraph as tf

RNG = np.random.RandomState(0)
A = RNG.rand(2, 16, 13, 3).astype(np.float32)
B = np.clip(A + RNG.randn(2, 16, 13, 3).astype(np.float32) * 0.1, 0, 1)
A8, B8 = (A * 255).astype(np.uint8), (B * 255).astype(np.uint8)


def _run(fetches):
    with tf.Session() as sess:
        return sess.run(fetches)


def test_psnr_ssim_and_total_variation_match_tensorflow():
    got = _run(
        {
            "psnr": tf.image.psnr(A, B, 1.0),
            "psnr8": tf.image.psnr(A8, B8, 255),
            "ssim": tf.image.ssim(A, B, 1.0),
            "ssim8": tf.image.ssim(A8, B8, 255),
            "ssim5": tf.image.ssim(A, B, 1.0, filter_size=5, filter_sigma=1.0),
            "tv": tf.image.total_variation(A),
            "tv3": tf.image.total_variation(A[0]),
        }
    )
    tensorflow = {
        "psnr": [20.920442581176758, 20.495849609375],
        "psnr8": [20.916051864624023, 20.48550796508789],
        "ssim": [0.9430378079414368, 0.9540902972221375],
        "ssim8": [0.9429171085357666, 0.953957736492157],
        "ssim5": [0.9486855864524841, 0.9462790489196777],
        "tv": [403.37774658203125, 392.7793273925781],
    }
    for name, values in tensorflow.items():
        np.testing.assert_allclose(got[name], values, rtol=1e-6, err_msg=name)
    mse = ((A - B) ** 2).mean(axis=(1, 2, 3))
    np.testing.assert_allclose(got["psnr"], -10 * np.log10(mse), rtol=1e-5)
    tv = np.abs(np.diff(A[0], axis=0)).sum() + np.abs(np.diff(A[0], axis=1)).sum()
    np.testing.assert_allclose(got["tv3"], tv, rtol=1e-5)
    with pytest.raises(ValueError, match="3 or 4-dimensional"):
        tf.image.total_variation(tf.zeros([3, 3]))


def test_gradients_sobel_and_color_transforms():
    dy, dx = _run(tf.image.image_gradients(A))
    np.testing.assert_allclose(dy[:, :-1], np.diff(A, axis=1), atol=1e-7)
    np.testing.assert_array_equal(dy[:, -1], 0)
    np.testing.assert_allclose(dx[:, :, :-1], np.diff(A, axis=2), atol=1e-7)
    sobel = _run(tf.image.sobel_edges(A))
    assert sobel.shape == (2, 16, 13, 3, 2)
    padded = np.pad(A, [(0, 0), (1, 1), (1, 1), (0, 0)], mode="reflect")
    vertical = sum(
        w * padded[:, 1 + dy : 17 + dy, 1 + dx : 14 + dx]
        for (dy, dx), w in {
            (-1, -1): -1,
            (-1, 0): -2,
            (-1, 1): -1,
            (1, -1): 1,
            (1, 0): 2,
            (1, 1): 1,
        }.items()
    )
    np.testing.assert_allclose(sobel[..., 0], vertical, atol=1e-5)
    yiq, back = _run([tf.image.rgb_to_yiq(A), tf.image.yiq_to_rgb(tf.image.rgb_to_yiq(A))])
    np.testing.assert_allclose(yiq[..., 0], A @ np.array([0.299, 0.587, 0.114]), atol=1e-6)
    np.testing.assert_allclose(back, A, atol=1e-4)  # the matrices are 8-digit inverses
    yuv_back = _run(tf.image.yuv_to_rgb(tf.image.rgb_to_yuv(A)))
    np.testing.assert_allclose(yuv_back, A, atol=1e-4)

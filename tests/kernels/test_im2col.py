"""The compiled tap-major patch matrix (loops.im2col_taps) against the NumPy copy it replaces
(windows.im2col_taps takes that path when the input must be cast)."""

import itertools

import numpy as np

from flowgraph.kernels.cpu import windows as W


def test_compiled_im2col_taps_equals_the_numpy_copy():
    rng = np.random.default_rng(0)
    shapes = itertools.product([5, 8], [7, 8], [1, 3], [1, 3], [2, 3], [1, 2], [1, 2])
    checked = 0
    for (h, w, c, kh, kw, s, d), padding in itertools.product(shapes, ["SAME", "VALID"]):
        x = rng.standard_normal((2, h, w, c)).astype(np.float32)
        attrs = {
            "strides": [1, s, s, 1],
            "dilations": [1, d, d, 1],
            "padding": padding,
            "explicit_paddings": [],
            "data_format": "NHWC",
        }
        win = W.window(attrs, x.shape, kh, kw)
        compiled = W.im2col_taps(x, win, np.float32)
        numpy_copy = W.im2col_taps(x.astype(np.float64), win, np.float32)
        np.testing.assert_array_equal(compiled, numpy_copy, err_msg=str((h, w, c, kh, kw, s, d)))
        checked += 1
    assert checked == 256

"""Declarative op checks against NumPy (STYLE.md convention 11).

`check_op(fn, inputs, reference)` builds `fn` twice, on fed placeholders and on Const inputs,
runs both in a Session and compares each output's dtype, shape and values with
`reference(*inputs)`. Errors must be the same on both paths, so shape inference and kernels
agree.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def run(fn, inputs, feed: bool = True, **kwargs):
    """Runs `fn(*tensors, **kwargs)` on `inputs` in a fresh graph; returns the fetched value(s)."""
    import flowgraph as tf

    g = tf.Graph()
    with g.as_default():
        if feed:
            phs = [
                tf.placeholder(dtypes.as_dtype(np.asarray(a).dtype), np.shape(a)) for a in inputs
            ]
            out = fn(*phs, **kwargs)
            feed_dict = dict(zip(phs, inputs))
        else:
            out = fn(*[tf.constant(a) for a in inputs], **kwargs)
            feed_dict = None
        with tf.Session(graph=g) as sess:
            return sess.run(out, feed_dict)


def assert_close(got, want, rtol=1e-6, atol=1e-6):
    """Same dtype, same shape, values within atol + rtol*|want| (exact for ints, bools, bytes)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if got.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def check_op(fn, inputs, reference, rtol=1e-6, atol=1e-6, **kwargs):
    """Checks `fn` against `reference` on fed and on constant inputs."""
    with np.errstate(all="ignore"):  # the reference may compute nan/inf, as the kernel does
        want = _as_list(reference(*inputs))
    for feed in (True, False):
        got = _as_list(run(fn, inputs, feed=feed, **kwargs))
        assert len(got) == len(want), f"{len(got)} outputs, expected {len(want)}"
        for g, w in zip(got, want):
            assert_close(g, w, rtol, atol)

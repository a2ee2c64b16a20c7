"""ReluGrad(MaxPoolGrad) fused into one node (runtime/passes/remapper.py, kernels/cpu/pooling.py
`_FusedMaxPoolGrad`): a conv -> ReLU -> max-pool layer's training step computes the same bits as
with `remapping` OFF, ties, NaNs and negative zeros included, on every type the fusion takes,
NHWC and NCHW, SAME and VALID, disjoint and overlapping windows; only where the pool's gradient
has the ReluGrad as its one reader; and the fused gradient matches a numeric Jacobian."""

from __future__ import annotations

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import RewriterConfig
from flowgraph.testing.gradient_checker import compute_gradient_error


def _run(graph, fetches, feeds, remapping: bool):
    """(the fetched values, the op of each partition-graph node by name)."""
    config = tf.ConfigProto()
    if not remapping:
        config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    with tf.Session(graph=graph, config=config) as s:
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True)
        values = s.run(fetches, feeds, options=opts, run_metadata=md)
    return values, {n.name: n.op for gd in md.partition_graphs for n in gd.node}


def _inputs(shape, dtype, seed=0):
    """Values with many ties (a few levels, zeros among them), negatives and a NaN."""
    rng = np.random.RandomState(seed)
    x = rng.randint(-2, 3, shape).astype(dtype)
    x.reshape(-1)[7] = np.nan
    return x


def _pool_layer(x_shape, ksize, strides, padding, dtype, fmt, extra_reader=False):
    """relu -> max_pool and the gradient of a loss at the relu's input, the pool's incoming
    gradient fed (with NaNs, zeros and negatives) so that every case of ReluGrad's mask shows."""
    xs = _inputs(x_shape, dtype)
    if fmt == "NCHW":
        xs = np.ascontiguousarray(xs.transpose(0, 3, 1, 2))
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(dtype, xs.shape, name="x")
        relu = tf.nn.relu(x, name="relu")
        k4 = [1, 1, *ksize] if fmt == "NCHW" else [1, *ksize, 1]
        s4 = [1, 1, *strides] if fmt == "NCHW" else [1, *strides, 1]
        pool = tf.nn.max_pool(relu, k4, s4, padding, data_format=fmt, name="pool")
        dy = tf.placeholder(dtype, pool.shape, name="dy")
        fetches = [pool, *tf.gradients(pool, [x], grad_ys=[dy])]
        if extra_reader:  # the pool's gradient itself fetched: it must stay
            fetches.append(g.get_operation_by_name("gradients/pool_grad/MaxPoolGrad").outputs[0])
    rng = np.random.RandomState(1)
    dys = rng.uniform(-1, 1, pool.shape.as_list()).astype(dtype)
    dys.reshape(-1)[::5] = 0.0
    dys.reshape(-1)[3] = np.nan
    return g, {x: xs, dy: dys}, fetches


CASES = [
    ((2, 8, 8, 3), (2, 2), (2, 2), "SAME"),  # the 2x2 loop
    ((2, 7, 5, 3), (2, 2), (2, 2), "SAME"),  # disjoint windows with padding
    ((2, 7, 7, 2), (3, 3), (3, 3), "VALID"),  # disjoint, a remainder not covered
    ((2, 7, 6, 3), (3, 3), (2, 2), "SAME"),  # overlapping: masked after the sums
    ((1, 6, 6, 2), (2, 3), (1, 1), "VALID"),
    ((2, 4, 6, 1), (2, 2), (2, 2), "VALID"),  # one channel: NCHW is C-contiguous as NHWC
]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("x_shape,ksize,strides,padding", CASES)
def test_fused_pool_grad_equals_the_unfused_pair(dtype, fmt, x_shape, ksize, strides, padding):
    g, feeds, fetches = _pool_layer(x_shape, ksize, strides, padding, dtype, fmt)
    fused, ops = _run(g, fetches, feeds, remapping=True)
    plain, plain_ops = _run(g, fetches, feeds, remapping=False)
    masked = dtype != np.float16  # paired with the pool (pool_masks.py; its mask may be empty)
    want = "_MaxPoolGradWithMask" if masked else "_FusedMaxPoolGrad"
    assert ops["gradients/relu_grad/ReluGrad"] == want
    assert ops["pool"] == ("_MaxPoolWithMask" if masked else "MaxPool")
    assert "gradients/pool_grad/MaxPoolGrad" not in ops
    assert plain_ops["gradients/relu_grad/ReluGrad"] == "ReluGrad"
    dx = plain[1]
    assert np.isnan(dx).any() and (np.signbit(dx) & (dx == 0)).any()  # NaN and -0 reached
    for a, b in zip(fused, plain, strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 6, 4, 5), (2, 7, 6, 3)])
def test_pool_mask_gradient_without_relu_equals_max_pool_grad(dtype, shape):
    """The forward's mask (2x2 windows tiling x; else an empty one) for a plain MaxPoolGrad."""
    xs = _inputs(shape, dtype)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(dtype, xs.shape, name="x")
        pool = tf.nn.max_pool(x * 1, [1, 2, 2, 1], [1, 2, 2, 1], "VALID", name="pool")
        fetches = [pool, *tf.gradients(tf.reduce_sum(pool * pool), [x])]
    fused, ops = _run(g, fetches, {x: xs}, remapping=True)
    plain, _ = _run(g, fetches, {x: xs}, remapping=False)
    assert ops["pool"] == "_MaxPoolWithMask"
    assert ops["gradients/pool_grad/MaxPoolGrad"] == "_MaxPoolGradWithMask"
    for a, b in zip(fused, plain, strict=True):
        assert a.tobytes() == b.tobytes()


def test_pool_gradient_with_another_reader_is_not_fused():
    g, feeds, fetches = _pool_layer((2, 4, 4, 3), (2, 2), (2, 2), "VALID", np.float32, "NHWC", True)
    fused, ops = _run(g, fetches, feeds, remapping=True)
    plain, _ = _run(g, fetches, feeds, remapping=False)
    assert ops["gradients/relu_grad/ReluGrad"] == "ReluGrad"
    for a, b in zip(fused, plain, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_fused_gradient_matches_the_numeric_jacobian(fmt):
    """Distinct values away from 0 (no ties, no kinks within the checker's delta)."""
    rng = np.random.RandomState(2)
    values = rng.permutation(np.arange(1, 2 * 6 * 6 * 2 + 1)).astype(np.float64) * 0.1
    xs = (values * rng.choice([-1, 1], values.size)).reshape(2, 6, 6, 2)
    if fmt == "NCHW":
        xs = np.ascontiguousarray(xs.transpose(0, 3, 1, 2))
    k4 = [1, 1, 2, 2] if fmt == "NCHW" else [1, 2, 2, 1]
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, xs.shape)
        pool = tf.nn.max_pool(tf.nn.relu(x), k4, k4, "VALID", data_format=fmt)
        y = tf.reduce_sum(pool * pool)
        with tf.Session(graph=g) as sess:
            md = tf.RunMetadata()
            opts = tf.RunOptions(output_partition_graphs=True)
            sess.run(tf.gradients(y, x), {x: xs}, options=opts, run_metadata=md)
            ops = {n.op for gd in md.partition_graphs for n in gd.node}
            assert "_MaxPoolGradWithMask" in ops and "MaxPoolGrad" not in ops
            err = compute_gradient_error(x, list(xs.shape), y, [], x_init_value=xs)
    assert err < 1e-6

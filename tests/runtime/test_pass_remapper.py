"""Fused convolution epilogues (runtime/passes/remapper.py, kernels/cpu/conv.py `_FusedConv2D`):
Conv2D -> BiasAdd (-> Relu) becomes one node, visibly in the partition graphs, only where
nothing else reads the intermediates; a training step computes the same bits as with
`remapping` OFF, on every type Conv2D computes and on each of its kernel paths."""

from __future__ import annotations

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.core.protos import RewriterConfig
from flowgraph.framework.apply_op import apply_op


def _session(graph, remapping: bool, threads: int = 1) -> tf.Session:
    config = tf.ConfigProto(intra_op_parallelism_threads=threads)
    if not remapping:
        config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    return tf.Session(graph=graph, config=config)


def _run(graph, init, fetches, feeds, remapping: bool, threads: int = 1):
    """(the fetched values, the op of each partition-graph node by name)."""
    with _session(graph, remapping, threads) as s:
        s.run(init)
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True)
        values = s.run(fetches, feeds, options=opts, run_metadata=md)
    return values, {n.name: n.op for gd in md.partition_graphs for n in gd.node}


def _layer(x_shape, f_shape, strides, dtype, fmt="NHWC", relu=True, seed=0):
    """A conv layer's training step: (graph, init, x, [output, dW, db, dx]); inputs from a
    seeded generator, a few NaNs in x to follow through the ReLU."""
    rng = np.random.RandomState(seed)
    xs = rng.uniform(-1, 1, x_shape).astype(dtype)
    xs.reshape(-1)[:: max(1, xs.size // 3)] = np.nan
    if fmt == "NCHW":
        xs = np.ascontiguousarray(xs.transpose(0, 3, 1, 2))
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(dtype, xs.shape, name="x")
        w = tf.Variable(rng.uniform(-1, 1, f_shape).astype(dtype), name="w")
        b = tf.Variable(rng.uniform(-1, 1, f_shape[-1]).astype(dtype), name="b")
        strides4 = [1, 1, *strides] if fmt == "NCHW" else [1, *strides, 1]
        conv = tf.nn.conv2d(x, w, strides4, "SAME", data_format=fmt, name="conv")
        y = tf.nn.bias_add(conv, b, data_format=fmt, name="bias")
        if relu:
            y = tf.nn.relu(y, name="relu")
        loss = tf.reduce_sum(tf.where(tf.is_nan(y), tf.zeros_like(y), y) ** 2)
        fetches = [y, *tf.gradients(loss, [w, b, x])]
        init = tf.global_variables_initializer()
    return g, init, {x: xs}, fetches


# One shape per Conv2D path: im2col of taps (few input channels), Winograd (3x3, 8+ channels),
# KH accumulating GEMMs (conv_rows: height stride 1, 4+ channels), im2col blocks (strided).
PATHS = [
    ((2, 7, 6, 3), (3, 3, 3, 5), (1, 1)),
    ((2, 8, 8, 8), (3, 3, 8, 16), (1, 1)),
    ((2, 7, 6, 5), (2, 3, 5, 4), (1, 1)),
    ((2, 9, 7, 6), (3, 3, 6, 4), (2, 2)),
]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("x_shape,f_shape,strides", PATHS)
def test_fused_step_equals_the_unfused_one(dtype, x_shape, f_shape, strides):
    g, init, feeds, fetches = _layer(x_shape, f_shape, strides, dtype)
    fused, ops = _run(g, init, fetches, feeds, remapping=True)
    plain, plain_ops = _run(g, init, fetches, feeds, remapping=False)
    assert ops["relu"] == "_FusedConv2D" and "conv" not in ops and "bias" not in ops
    assert plain_ops["relu"] == "Relu" and plain_ops["conv"] == "Conv2D"
    assert np.isnan(plain[0]).any() and (plain[0] == 0).any()
    for a, b in zip(fused, plain, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("relu", [True, False])
def test_nchw_and_bias_alone(relu):
    g, init, feeds, fetches = _layer((2, 6, 5, 4), (3, 3, 4, 3), (1, 1), np.float32, "NCHW", relu)
    fused, ops = _run(g, init, fetches, feeds, remapping=True)
    plain, _ = _run(g, init, fetches, feeds, remapping=False)
    assert ops["relu" if relu else "bias"] == "_FusedConv2D" and "conv" not in ops
    for a, b in zip(fused, plain, strict=True):
        np.testing.assert_array_equal(a, b)


def test_blocks_on_the_pool_apply_the_epilogue_each():
    """A convolution large enough to be split into blocks of images on two threads (42M
    multiply-adds, above windows.INLINE_COST)."""
    g, init, feeds, fetches = _layer((96, 16, 16, 6), (3, 3, 6, 32), (1, 1), np.float32)
    fused, ops = _run(g, init, fetches[:1], feeds, remapping=True, threads=2)
    plain, _ = _run(g, init, fetches[:1], feeds, remapping=False, threads=2)
    assert ops["relu"] == "_FusedConv2D"
    np.testing.assert_array_equal(fused[0], plain[0])


def test_an_intermediate_read_elsewhere_is_not_fused_away():
    g, init, feeds, fetches = _layer((2, 6, 5, 4), (3, 3, 4, 3), (1, 1), np.float32)
    conv, bias = g.get_tensor_by_name("conv:0"), g.get_tensor_by_name("bias:0")
    _, ops = _run(g, init, [fetches[0], conv], feeds, remapping=True)
    assert (ops["conv"], ops["bias"], ops["relu"]) == ("Conv2D", "BiasAdd", "Relu")
    _, ops = _run(g, init, [fetches[0], bias], feeds, remapping=True)
    assert ops["bias"] == "_FusedConv2D" and ops["relu"] == "Relu" and "conv" not in ops
    with g.as_default(), tf.control_dependencies([conv.op]):
        after = tf.identity(fetches[0], name="after")
    _, ops = _run(g, init, [after], feeds, remapping=True)
    assert ops["conv"] == "Conv2D"


def _fused_conv(x, f, b, fused_ops):
    return apply_op(
        "_FusedConv2D",
        [x, f, [b]],
        name="fused",
        strides=[1, 1, 1, 1],
        padding="SAME",
        fused_ops=fused_ops,
    ).outputs[0]


def test_the_kernel_names_what_it_cannot_do():
    x, f = np.ones((1, 3, 3, 2), np.float32), np.ones((1, 1, 2, 4), np.float32)
    g = tf.Graph()
    with g.as_default(), tf.Session(graph=g) as s:
        with pytest.raises(errors.UnimplementedError, match="Relu6"):
            s.run(_fused_conv(x, f, np.ones(4, np.float32), ["BiasAdd", "Relu6"]))
        with pytest.raises(errors.InvalidArgumentError, match="output depth"):
            s.run(_fused_conv(x, f, np.ones(3, np.float32), ["BiasAdd"]))

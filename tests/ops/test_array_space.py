"""tf.roll, space_to_depth/depth_to_space and space_to_batch(_nd)/batch_to_space(_nd) against
element-by-element NumPy references on every dtype, their static shapes, errors and gradients.
The kernels' values were also compared with TensorFlow 2.21's tf.compat.v1 (all equal)."""

import itertools

import numpy as np
import pytest
from array_helpers import run_with, sample, unknown

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.testing.gradient_checker import check_gradients
from flowgraph.testing.op_test import check_op
from tests.helpers import ALL_DTYPES


def _space_to_depth_ref(x, b):
    n, h, w, c = x.shape
    out = np.empty((n, h // b, w // b, c * b * b), x.dtype)
    for i, j, bi, bj in itertools.product(range(h // b), range(w // b), range(b), range(b)):
        depth = (bi * b + bj) * c
        out[:, i, j, depth : depth + c] = x[:, i * b + bi, j * b + bj, :]
    return out


def _depth_to_space_ref(x, b):
    n, h, w, c = x.shape
    out = np.empty((n, h * b, w * b, c // (b * b)), x.dtype)
    for i, j in itertools.product(range(h * b), range(w * b)):
        depth = ((i % b) * b + j % b) * (c // (b * b))
        out[:, i, j, :] = x[:, i // b, j // b, depth : depth + c // (b * b)]
    return out


def _space_to_batch_ref(x, block, paddings):
    """Output batch index = offset-in-block (row major) * batch + original batch index."""
    pad = [(0, 0), *paddings] + [(0, 0)] * (x.ndim - 1 - len(block))
    padded = np.pad(x, pad, constant_values=b"" if x.dtype == object else 0)
    m, batch = len(block), x.shape[0]
    spatial = [padded.shape[i + 1] // block[i] for i in range(m)]
    out = np.empty([batch * int(np.prod(block)), *spatial, *x.shape[m + 1 :]], x.dtype)
    for k, offset in enumerate(itertools.product(*(range(b) for b in block))):
        for pos in itertools.product(*(range(s) for s in spatial)):
            src = tuple(p * b + o for p, b, o in zip(pos, block, offset))
            out[(slice(k * batch, (k + 1) * batch), *pos)] = padded[(slice(None), *src)]
    return out


def _batch_to_space_ref(x, block, crops):
    m = len(block)
    batch = x.shape[0] // int(np.prod(block))
    full = np.empty(
        [batch] + [x.shape[i + 1] * block[i] for i in range(m)] + list(x.shape[m + 1 :])
    )
    full = full.astype(x.dtype)
    for k, offset in enumerate(itertools.product(*(range(b) for b in block))):
        for pos in itertools.product(*(range(s) for s in x.shape[1 : m + 1])):
            dst = tuple(p * b + o for p, b, o in zip(pos, block, offset))
            full[(slice(None), *dst)] = x[(slice(k * batch, (k + 1) * batch), *pos)]
    return full[
        (slice(None), *(slice(c0, full.shape[i + 1] - c1) for i, (c0, c1) in enumerate(crops)))
    ]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_roll(dtype):
    x = sample(dtype, (3, 4, 2))
    check_op(lambda t: tf.roll(t, 2, 1), [x], lambda a: np.roll(a, 2, 1))
    check_op(lambda t: tf.roll(t, [-1, 5], [0, 2]), [x], lambda a: np.roll(a, [-1, 5], [0, 2]))
    # An axis named twice rolls by the sum of its shifts; negative axes count from the end.
    check_op(lambda t: tf.manip.roll(t, [1, 2], [-1, 2]), [x], lambda a: np.roll(a, 3, 2))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_space_to_depth_and_back(dtype):
    x = sample(dtype, (2, 4, 6, 3))
    check_op(lambda t: tf.space_to_depth(t, 2), [x], lambda a: _space_to_depth_ref(a, 2))
    y = sample(dtype, (1, 2, 3, 18))
    check_op(lambda t: tf.nn.depth_to_space(t, 3), [y], lambda a: _depth_to_space_ref(a, 3))


def test_space_to_depth_nchw_is_nhwc_transposed():
    x = sample(np.float32, (2, 3, 4, 6))
    to_nhwc = (0, 2, 3, 1)
    check_op(
        lambda t: tf.space_to_depth(t, 2, data_format="NCHW"),
        [x],
        lambda a: _space_to_depth_ref(a.transpose(to_nhwc), 2).transpose(0, 3, 1, 2),
    )
    y = sample(np.float32, (1, 8, 2, 3))
    check_op(
        lambda t: tf.depth_to_space(t, 2, data_format="NCHW"),
        [y],
        lambda a: _depth_to_space_ref(a.transpose(to_nhwc), 2).transpose(0, 3, 1, 2),
    )


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_space_to_batch_nd_and_back(dtype):
    x = sample(dtype, (2, 3, 5, 2))
    block, pads = [2, 3], [[1, 0], [0, 1]]
    check_op(
        lambda t: tf.space_to_batch_nd(t, block, pads),
        [x],
        lambda a: _space_to_batch_ref(a, block, pads),
    )
    y = sample(dtype, (12, 2, 2, 1))
    crops = [[1, 0], [0, 2]]
    check_op(
        lambda t: tf.batch_to_space_nd(t, block, crops),
        [y],
        lambda a: _batch_to_space_ref(a, block, crops),
    )


def test_space_to_batch_one_spatial_dim_and_square_forms():
    x = sample(np.int32, (3, 5, 2))
    check_op(
        lambda t: tf.manip.space_to_batch_nd(t, [2], [[1, 2]]),
        [x],
        lambda a: _space_to_batch_ref(a, [2], [[1, 2]]),
    )
    img = sample(np.float64, (1, 4, 4, 2))
    check_op(
        lambda t: tf.space_to_batch(t, [[0, 2], [2, 0]], block_size=2),
        [img],
        lambda a: _space_to_batch_ref(a, [2, 2], [[0, 2], [2, 0]]),
    )
    batch = sample(np.float64, (8, 2, 3, 1))
    check_op(
        lambda t: tf.batch_to_space(t, [[0, 1], [1, 1]], 2),
        [batch],
        lambda a: _batch_to_space_ref(a, [2, 2], [[0, 1], [1, 1]]),
    )
    # The old keyword name still works; TF 1.15's wrappers build the ND ops.
    assert tf.space_to_batch(img, [[0, 0], [0, 0]], block_shape=2).op.type == "SpaceToBatchND"
    with pytest.raises(ValueError, match="both 'block_size' and 'block_shape'"):
        tf.space_to_batch(img, [[0, 0], [0, 0]], 2, block_shape=2)


def test_v1_square_block_ops_from_a_graph_def():
    """SpaceToBatch/BatchToSpace (block_size attr) run as GraphDefs written by TF use them."""
    img = sample(np.float32, (2, 4, 2, 1))
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(img)
        pads = tf.constant([[0, 0], [1, 1]])
        from flowgraph.framework.apply_op import apply_op

        s2b = apply_op("SpaceToBatch", [x, pads], block_size=2).outputs[0]
        back = apply_op("BatchToSpace", [s2b, pads], block_size=2).outputs[0]
        assert s2b.shape.as_list() == [8, 2, 2, 1]
        with tf.Session() as s:
            got, round_trip = s.run([s2b, back])
    np.testing.assert_array_equal(got, _space_to_batch_ref(img, [2, 2], [[0, 0], [1, 1]]))
    np.testing.assert_array_equal(round_trip, img)


def test_static_shapes():
    p = tf.placeholder(tf.float32, [None, 4, 6, 3])
    assert tf.space_to_depth(p, 2).shape.as_list() == [None, 2, 3, 12]
    assert tf.depth_to_space(tf.placeholder(tf.float32, [2, None, 3, 8]), 2).shape.as_list() == [
        2,
        None,
        6,
        2,
    ]
    assert tf.space_to_batch_nd(p, [2, 3], [[0, 2], [0, 0]]).shape.as_list() == [None, 3, 2, 3]
    q = tf.placeholder(tf.float32, [12, 3, None, 5])
    assert tf.batch_to_space_nd(q, [2, 3], [[1, 1], [0, 0]]).shape.as_list() == [2, 4, None, 5]
    dynamic = tf.placeholder(tf.int32, [2])
    assert tf.space_to_batch_nd(p, dynamic, [[0, 0], [0, 0]]).shape.as_list() == [None] * 4
    assert tf.roll(p, 1, 0).shape.as_list() == [None, 4, 6, 3]


def test_construction_errors():
    p = tf.placeholder(tf.float32, [1, 5, 4, 3])
    with pytest.raises(ValueError, match="should be divisible by block_size: 2"):
        tf.space_to_depth(p, 2)
    with pytest.raises(ValueError, match="depth dimension 3 should be divisible by: 4"):
        tf.depth_to_space(p, 2)
    with pytest.raises(ValueError, match="input rank should be: 4"):
        tf.space_to_depth(tf.placeholder(tf.float32, [4, 4, 3]), 2)
    with pytest.raises(ValueError, match="block_size"):
        tf.space_to_depth(p, 1)
    with pytest.raises(ValueError, match="not divisible by block_shape"):
        tf.space_to_batch_nd(p, [2, 2], [[0, 0], [0, 0]])
    with pytest.raises(ValueError, match=r"paddings should have shape \[2, 2\]"):
        tf.space_to_batch_nd(p, [2, 2], [[0, 1]])
    with pytest.raises(ValueError, match="non-negative"):
        tf.space_to_batch_nd(p, [1, 2], [[0, 0], [-1, 1]])
    with pytest.raises(ValueError, match="not divisible by product of block sizes"):
        tf.batch_to_space_nd(p, [2, 1], [[0, 0], [0, 0]])
    with pytest.raises(ValueError, match="shift and axis must have the same size"):
        tf.roll(p, [1, 2], [0])
    with pytest.raises(ValueError, match="1-D or higher"):
        tf.roll(tf.constant(1.0), 1, 0)


def test_run_time_errors_name_the_problem():
    u = unknown()
    with pytest.raises(errors.InvalidArgumentError, match="out of range"):
        run_with(tf.roll(u, 1, 3), {u: np.zeros((2, 2))})
    with pytest.raises(errors.InvalidArgumentError, match="divisible by block_size"):
        run_with(tf.space_to_depth(u, 2), {u: np.zeros((1, 3, 4, 1))})
    with pytest.raises(errors.InvalidArgumentError, match="not divisible by block_shape"):
        run_with(tf.space_to_batch_nd(u, [2], [[0, 0]]), {u: np.zeros((1, 3))})
    with pytest.raises(errors.InvalidArgumentError, match="product of block sizes"):
        run_with(tf.batch_to_space_nd(u, [2], [[0, 0]]), {u: np.zeros((3, 2))})
    with pytest.raises(errors.InvalidArgumentError, match="cropping"):
        run_with(tf.batch_to_space_nd(u, [2], [[3, 2]]), {u: np.zeros((2, 2))})


def test_required_space_to_batch_paddings():
    paddings, crops = tf.required_space_to_batch_paddings([5, 7], [2, 3], [[1, 0], [0, 0]])
    shape = tf.placeholder(tf.int32, [2])
    dyn_paddings, dyn_crops = tf.required_space_to_batch_paddings(shape, [2, 3], [[1, 0], [0, 0]])
    with tf.Session() as s:
        assert s.run(paddings).tolist() == [[1, 0], [0, 2]]
        assert s.run(crops).tolist() == [[0, 0], [0, 2]]
        got = s.run([dyn_paddings, dyn_crops], {shape: [5, 7]})
    assert [g.tolist() for g in got] == [[[1, 0], [0, 2]], [[0, 0], [0, 2]]]


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: tf.roll(t, [1, -2], [0, 2]),
        lambda t: tf.space_to_depth(t, 2),
        lambda t: tf.depth_to_space(tf.tile(t, [1, 1, 1, 4]), 2),
        lambda t: tf.space_to_batch_nd(t, [2, 1], [[1, 1], [0, 1]]),
        lambda t: tf.batch_to_space_nd(t, [1, 2], [[0, 1], [1, 0]]),
    ],
    ids=["roll", "space_to_depth", "depth_to_space", "space_to_batch_nd", "batch_to_space_nd"],
)
def test_gradients(fn):
    x = np.random.RandomState(1).uniform(-1, 1, (2, 2, 4, 1))
    check_gradients(fn, [x])

"""searchsorted (LowerBound/UpperBound), unravel_index, tensor_scatter_* and
extract_image_patches against NumPy on every dtype their kernels claim, TF's shapes and errors,
and the gradients against numeric Jacobians. The patch reference loops over positions; it was
checked against TF 2.21 (tf.compat.v1.extract_image_patches) on five geometries: equal."""

import ml_dtypes
import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.framework.apply_op import apply_op
from flowgraph.testing.gradient_checker import check_gradients
from flowgraph.testing.op_test import check_op, run

BF16 = ml_dtypes.bfloat16
REAL = [np.float16, BF16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64]
REAL += [np.uint8, np.uint16, np.uint32, np.uint64]
COMPLEX = [np.complex64, np.complex128]


def _feed_unknown(fn, *values):
    """fn on placeholders of unknown shape: only the kernel sees the shapes."""
    g = tf.Graph()
    with g.as_default():
        phs = [tf.placeholder(tf.as_dtype(np.asarray(v).dtype)) for v in values]
        with tf.Session() as sess:
            return sess.run(fn(*phs), dict(zip(phs, values)))


# -- searchsorted -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", REAL)
def test_searchsorted_every_dtype(dtype):
    rng = np.random.RandomState(0)
    seq = np.sort(rng.randint(0, 9, (3, 7)), axis=1).astype(dtype)
    vals = rng.randint(0, 10, (3, 5)).astype(dtype)

    def ref(side):
        return lambda s, v: np.stack(
            [np.searchsorted(s[i], v[i], side=side) for i in range(len(s))]
        ).astype(np.int32)

    check_op(tf.searchsorted, [seq, vals], ref("left"))
    check_op(lambda s, v: tf.searchsorted(s, v, side="right"), [seq, vals], ref("right"))


def test_searchsorted_ranks_types_and_errors():
    seq = np.array([[[1.0, 2, 2, 3]], [[0, 5, 6, 7]]])  # [2, 1, 4]
    vals = np.array([[[2.0, 2.5, 0, 9, 2]], [[6, 6, -1, 8, 5]]])
    got = run(lambda s, v: tf.searchsorted(s, v, side="right", out_type=tf.int64), [seq, vals])
    assert got.dtype == np.int64 and got.tolist() == [[[3, 3, 0, 4, 3]], [[3, 3, 0, 4, 2]]]
    assert run(tf.searchsorted, [seq[0, 0], vals[0, 0]]).tolist() == [1, 3, 0, 4, 1]
    assert tf.searchsorted(tf.placeholder(tf.float32, [None, 4]), tf.zeros([2, 3])).shape == [2, 3]
    with pytest.raises(ValueError, match="side must be"):
        tf.searchsorted([1.0], [1.0], side="middle")
    with pytest.raises(errors.InvalidArgumentError, match="Leading dim_size"):
        _feed_unknown(tf.searchsorted, np.zeros((2, 3)), np.zeros((3, 1)))
    with pytest.raises(ValueError):
        apply_op("LowerBound", [tf.zeros([3]), tf.zeros([2, 3])])


# -- unravel_index ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_unravel_index(dtype):
    idx = np.array([0, 7, 11, 5], dtype)
    dims = np.array([3, 4], dtype)
    check_op(
        tf.unravel_index, [idx, dims], lambda i, d: np.stack(np.unravel_index(i, d)).astype(dtype)
    )
    check_op(tf.unravel_index, [idx[1], dims], lambda i, d: np.array(np.unravel_index(i, d), dtype))
    assert tf.unravel_index(tf.zeros([5], tf.int64), [2, 3, 4]).shape.as_list() == [3, 5]


def test_unravel_index_errors():
    for idx, dims, match in (
        ([7], [2, 3], "out of bound"),
        ([-1], [2, 3], "out of bound"),
        ([1], [2, 0], "contain a dim of zero"),
        ([[1, 2]], [2, 3], "scalar or vector"),
    ):
        with pytest.raises(errors.InvalidArgumentError, match=match):
            _feed_unknown(tf.unravel_index, np.array(idx, np.int32), np.array(dims, np.int32))
    with pytest.raises(TypeError):
        tf.unravel_index(tf.constant([1.0]), [2, 3])


# -- tensor_scatter_* -------------------------------------------------------------------------
INDICES = np.array([[1, 0], [3, 2], [1, 0]])  # a duplicate: combined (or one wins for update)


def _ref_scatter(fn):
    def ref(t, u):
        out = t.copy()
        fn.at(out, tuple(INDICES.T), u) if fn else None
        if not fn:
            out[tuple(INDICES.T)] = u
        return out

    return ref


@pytest.mark.parametrize("dtype", REAL + COMPLEX + [np.bool_])
def test_tensor_scatter_every_dtype(dtype):
    rng = np.random.RandomState(1)
    t = rng.randint(0, 5, (4, 3, 2)).astype(dtype)
    u = rng.randint(0, 5, (3, 2)).astype(dtype)
    u[2] = u[0]  # duplicate index, same update: the result of update does not depend on order
    cases = [("update", tf.tensor_scatter_update, None)]
    if dtype != np.bool_:
        cases += [
            ("add", tf.tensor_scatter_add, np.add),
            ("sub", tf.tensor_scatter_sub, np.subtract),
        ]
    if dtype not in COMPLEX + [np.bool_]:
        cases += [("max", tf.tensor_scatter_nd_max, np.maximum)]
        cases += [("min", tf.tensor_scatter_nd_min, np.minimum)]
    for _, fn, ufunc in cases:
        check_op(lambda a, b: fn(a, INDICES, b), [t, u], _ref_scatter(ufunc))
    assert tf.tensor_scatter_nd_add is tf.tensor_scatter_add


def test_tensor_scatter_shapes_and_errors():
    t = tf.placeholder(tf.float32, [None, 3])
    assert tf.tensor_scatter_update(t, [[0]], tf.zeros([1, 3])).shape.as_list() == [None, 3]
    with pytest.raises(ValueError, match="outer"):
        tf.tensor_scatter_add(tf.zeros([4, 2]), [[1], [1]], [[1.0, 2.0]])
    with pytest.raises(errors.InvalidArgumentError, match="does not index into shape"):
        run(lambda a: tf.tensor_scatter_update(a, [[5]], [1.0]), [np.zeros(4, np.float32)])
    with pytest.raises(errors.InvalidArgumentError, match="updates.shape"):
        _feed_unknown(tf.tensor_scatter_update, np.zeros((4, 2)), np.array([[1]]), np.zeros((1, 3)))
    with pytest.raises(errors.InvalidArgumentError, match="kernel"):
        run(lambda a: tf.tensor_scatter_add(a, [[0]], [True]), [np.zeros(2, np.bool_)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tensor_scatter_gradients(dtype):
    rng = np.random.RandomState(2)
    t = rng.uniform(-1, 1, (4, 3)).astype(dtype)
    u = rng.uniform(-1, 1, (3, 3)).astype(dtype)
    idx = [[1], [3], [1]]
    for fn in (tf.tensor_scatter_add, tf.tensor_scatter_sub):
        check_gradients(lambda a, b, fn=fn: fn(a, idx, b), [t, u])
    check_gradients(lambda a, b: tf.tensor_scatter_update(a, [[1], [3]], b), [t, u[:2]])
    t[1] = 5  # max/min without ties: each cell's winner is clear
    for fn in (tf.tensor_scatter_nd_max, tf.tensor_scatter_nd_min):
        check_gradients(lambda a, b, fn=fn: fn(a, [[1], [3], [0]], b), [t, u])


def test_tensor_scatter_max_gradient_splits_ties():
    t = tf.constant([1.0, 2.0])
    u = tf.constant([1.0])
    out = tf.tensor_scatter_nd_max(t, [[0]], u)
    gt, gu = tf.gradients(out, [t, u])
    with tf.Session() as sess:
        assert sess.run([gt, gu])[0].tolist() == [0.5, 1.0] and sess.run(gu).tolist() == [0.5]


# -- extract_image_patches --------------------------------------------------------------------
def ref_patches(x, k, s, r, padding):
    """TF's definition, one output cell at a time."""
    n, h, w, d = x.shape
    kh, kw = k[1], k[2]
    eh, ew = (kh - 1) * r[1] + 1, (kw - 1) * r[2] + 1
    if padding == "VALID":
        oh = (h - eh) // s[1] + 1 if h >= eh else 0
        ow = (w - ew) // s[2] + 1 if w >= ew else 0
        top = left = 0
    else:
        oh, ow = -(-h // s[1]), -(-w // s[2])
        top = max((oh - 1) * s[1] + eh - h, 0) // 2
        left = max((ow - 1) * s[2] + ew - w, 0) // 2
    out = np.zeros((n, oh, ow, kh * kw * d), x.dtype)
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    y, z = i * s[1] + a * r[1] - top, j * s[2] + b * r[2] - left
                    if 0 <= y < h and 0 <= z < w:
                        out[:, i, j, (a * kw + b) * d : (a * kw + b + 1) * d] = x[:, y, z, :]
    return out


GEOMETRIES = [
    ([1, 2, 2, 1], [1, 2, 2, 1], [1, 2, 2, 1], "SAME"),
    ([1, 3, 2, 1], [1, 1, 2, 1], [1, 1, 1, 1], "VALID"),
    ([1, 3, 3, 1], [1, 2, 3, 1], [1, 2, 1, 1], "SAME"),
    ([1, 4, 4, 1], [1, 3, 3, 1], [1, 1, 1, 1], "SAME"),
    ([1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID"),
    ([1, 8, 3, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID"),  # taller than the image: empty
]


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_extract_image_patches_geometries(geometry):
    x = np.random.RandomState(0).randn(2, 7, 6, 3).astype(np.float32)
    check_op(
        lambda a: tf.extract_image_patches(a, *geometry), [x], lambda a: ref_patches(a, *geometry)
    )


@pytest.mark.parametrize("dtype", REAL)
def test_extract_image_patches_every_dtype(dtype):
    x = np.random.RandomState(0).randint(0, 100, (1, 5, 4, 2)).astype(dtype)
    g = GEOMETRIES[2]
    check_op(lambda a: tf.image.extract_patches(a, *g), [x], lambda a: ref_patches(a, *g))


def test_extract_image_patches_shapes_and_errors():
    x = tf.placeholder(tf.float32, [None, 7, None, 3])
    p = tf.extract_image_patches(x, [1, 3, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
    assert p.shape.as_list() == [None, 4, None, 27]
    assert tf.image.extract_image_patches is tf.extract_image_patches
    with pytest.raises(ValueError, match="only supported across rows and columns"):
        tf.extract_image_patches(x, [2, 3, 3, 1], [1, 1, 1, 1], [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="minimum"):
        tf.extract_image_patches(x, [1, 3, 3, 1], [1, 1, 1, 1], [1, 1, 1], "SAME")
    with pytest.raises(ValueError):
        tf.extract_image_patches(tf.zeros([3, 3]), [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], "SAME")
    with pytest.raises(TypeError, match="FULL"):
        tf.extract_image_patches(x, [1, 3, 3, 1], [1, 1, 1, 1], [1, 1, 1, 1], "FULL")


@pytest.mark.parametrize("geometry", GEOMETRIES[:4])
def test_extract_image_patches_gradient(geometry):
    x = np.random.RandomState(3).randn(2, 5, 4, 2)
    check_gradients(lambda a: tf.extract_image_patches(a, *geometry), [x])


def test_extract_image_patches_gradient_unknown_shape():
    x = tf.placeholder(tf.float64, [None, None, None, 2])
    p = tf.extract_image_patches(x, [1, 3, 2, 1], [1, 2, 1, 1], [1, 1, 1, 1], "SAME")
    (g,) = tf.gradients(tf.reduce_sum(p * p), x)
    value = np.random.RandomState(4).randn(1, 5, 4, 2)
    with tf.Session() as sess:
        got = sess.run(g, {x: value})
    # d/dx sum(p^2) = 2 x times the number of patches each cell appears in (0 is the padding)
    cells = np.arange(1.0, 21.0).reshape(1, 5, 4, 1)
    numbers = ref_patches(cells, [1, 3, 2, 1], [1, 2, 1, 1], [1, 1, 1, 1], "SAME")
    per_cell = np.bincount(numbers.astype(int).ravel(), minlength=21)[1:].reshape(5, 4)
    np.testing.assert_allclose(got, 2 * value * per_cell[None, :, :, None], rtol=1e-12)

"""Indexing ops (slice, strided_slice / Tensor.__getitem__, gather, gather_nd, scatter_nd,
one_hot, boolean_mask, unique, setdiff1d, sequence_mask) against NumPy."""

import numpy as np
import pytest
from array_helpers import run_with, sample, unknown

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.testing.op_test import assert_close, check_op
from tests.helpers import ALL_DTYPES

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5)

SPECS = [
    (1,),
    (-1,),
    (slice(1, None),),
    (slice(None, None, -1),),
    (slice(None, None, 2),),
    (Ellipsis, 0),
    (Ellipsis, slice(None, None, -2)),
    (None, 1),
    (slice(None), None, -1),
    (1, slice(-2, None), slice(None, 1, -1)),
    (slice(10, -10, -1),),
    (slice(-10, 10, 2),),
    (slice(2, 0, -1), Ellipsis, None),
    (0, 1, 2),
    (Ellipsis,),
    (slice(3, 1),),
    (slice(None), slice(5, None, -2), slice(-1, -6, -2)),
    (None, Ellipsis, None),
]


@pytest.mark.parametrize("spec", SPECS, ids=[repr(s) for s in SPECS])
def test_getitem_matches_numpy(spec):
    check_op(lambda t: t[spec], [X], lambda a: np.asarray(a[spec]))
    const = tf.constant(X)[spec]
    assert const.shape.as_list() == list(np.shape(X[spec]))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_getitem_dtypes(dtype):
    x = sample(dtype, (3, 4))
    check_op(lambda t: t[1:, ::-2], [x], lambda a: a[1:, ::-2])
    check_op(lambda t: t[-1], [x], lambda a: a[-1])


def test_getitem_static_shapes_with_unknown_dims():
    x = tf.placeholder(tf.float32, [None, 4, 3])
    assert x[1:, ..., ::-1].shape.as_list() == [None, 4, 3]
    assert x[0].shape.as_list() == [4, 3]
    assert x[:, tf.newaxis, -1].shape.as_list() == [None, 1, 3]
    assert x[..., 1:3].shape.as_list() == [None, 4, 2]
    assert tf.placeholder(tf.float32)[0].shape.ndims is None
    assert x[0].op.type == "StridedSlice" and x[0].op.get_attr("shrink_axis_mask") == 1


def test_getitem_tensor_indices():
    i = tf.placeholder(tf.int32, [])
    j = tf.placeholder(tf.int64, [])
    x = tf.constant(X)
    y = x[i, 1:j]
    assert y.shape.as_list() == [None, 5]
    assert_close(run_with(y, {i: 2, j: 3}), X[2, 1:3])
    assert_close(run_with(x[i:], {i: 1}), X[1:])
    assert_close(run_with(x[tf.constant(1)], None), X[1])


def test_getitem_errors():
    x = tf.constant(X)
    with pytest.raises(TypeError, match="Only integers"):
        x[[1, 2], 0]
    with pytest.raises(TypeError, match="Only integers"):
        x[1.5]
    with pytest.raises(ValueError, match="out of bounds"):
        x[3]
    with pytest.raises(ValueError, match="Index out of range"):
        x[0, 0, 0, 0]
    with pytest.raises(ValueError, match="Multiple ellipses"):
        x[..., ...]
    with pytest.raises(ValueError, match="non-zero"):
        x[::0]
    i = tf.placeholder(tf.int32, [])
    with pytest.raises(
        errors.InvalidArgumentError, match="slice index 7 of dimension 1 out of bounds"
    ):
        run_with(x[:, i], {i: 7})


def test_getitem_bool_mask_and_iteration():
    x = tf.constant(X[:, 0, 0])
    assert_close(run_with(x[np.array([True, False, True])], None), X[[0, 2], 0, 0])
    assert [t.shape.as_list() for t in tf.constant(X)] == [[4, 5]] * 3


def test_strided_slice_masks_directly():
    check_op(
        lambda t: tf.strided_slice(t, [0, 2], [0, -1], [1, 2], begin_mask=1, end_mask=1),
        [X[0]],
        lambda a: a[:, 2:-1:2],
    )
    check_op(
        lambda t: tf.strided_slice(t, [1, 0], [2, 0], [1, 1], shrink_axis_mask=1, ellipsis_mask=2),
        [X],
        lambda a: a[1, ...],
    )
    check_op(
        lambda t: tf.strided_slice(t, [0, 1], [0, 3], new_axis_mask=1),
        [X[0]],
        lambda a: a[None, 1:3],
    )
    with pytest.raises(NotImplementedError, match="var"):
        tf.strided_slice(tf.constant(X), [0], [1], var=object())


def test_slice():
    for dtype in ALL_DTYPES:
        x = sample(dtype, (3, 4))
        check_op(lambda t: tf.slice(t, [1, 0], [2, -1]), [x], lambda a: a[1:3, :])
    p = tf.placeholder(tf.float32, [None, 4])
    assert tf.slice(p, [0, 1], [-1, 2]).shape.as_list() == [None, 2]
    with pytest.raises(ValueError, match="Expected size\\[1\\] in \\[0, 3\\]"):
        tf.slice(p, [0, 1], [1, 4])
    u = unknown()
    with pytest.raises(errors.InvalidArgumentError, match="Expected begin\\[0\\] in \\[0, 2\\]"):
        run_with(tf.slice(u, [3], [-1]), {u: np.zeros(2)})


# -- gather / scatter -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_gather(dtype):
    params = sample(dtype, (4, 3))
    for idx_dtype in (np.int32, np.int64):
        idx = np.array([[3, 0], [1, 1]], idx_dtype)
        check_op(lambda p, i: tf.gather(p, i), [params, idx], lambda p, i: p[i])
        check_op(lambda p, i: tf.gather(p, i, axis=-1), [params, idx[0] % 3], lambda p, i: p[:, i])


def test_gather_batch_dims():
    params = np.arange(2 * 3 * 5 * 2).reshape(2, 3, 5, 2).astype(np.float32)
    idx = np.array([[4, 0, 1], [2, 2, 3]], np.int32)

    def reference(p, i, axis):
        return np.stack([np.take(p[b], i[b], axis=axis - 1) for b in range(p.shape[0])])

    for axis in (1, 2):
        ids = idx % params.shape[axis]
        got = tf.gather(tf.constant(params), ids, axis=axis, batch_dims=1)
        assert got.shape.as_list() == list(reference(params, ids, axis).shape)
        check_op(
            lambda p, i, a=axis: tf.gather(p, i, axis=a, batch_dims=1),
            [params, ids],
            lambda p, i, a=axis: reference(p, i, a),
        )
    with pytest.raises(ValueError, match="batch_dims"):
        tf.gather(tf.constant(params), idx, axis=0, batch_dims=1)


def test_gather_errors_and_shapes():
    p = tf.placeholder(tf.float32, [None, 4, 3])
    assert tf.gather(p, [[0, 1]], axis=1).shape.as_list() == [None, 1, 2, 3]
    i = tf.placeholder(tf.int32, [None])
    with pytest.raises(
        errors.InvalidArgumentError, match="indices\\[1\\] = 5 is not in \\[0, 4\\)"
    ):
        run_with(tf.gather(tf.zeros([4, 2]), i), {i: [0, 5]})
    with pytest.raises(errors.InvalidArgumentError, match="is not in"):
        run_with(tf.gather(tf.zeros([4, 2]), i), {i: [-1]})
    with pytest.raises(ValueError, match="out of range"):
        tf.gather(tf.zeros([4, 2]), [0], axis=2)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, object, np.complex64])
def test_gather_nd(dtype):
    params = sample(dtype, (3, 4, 2))
    idx = np.array([[[0, 1], [2, 3]], [[1, 0], [0, 0]]], np.int64)
    check_op(tf.gather_nd, [params, idx], lambda p, i: p[i[..., 0], i[..., 1]])
    check_op(tf.gather_nd, [params, np.array([[2], [0]], np.int32)], lambda p, i: p[i[:, 0]])
    check_op(tf.gather_nd, [params, np.array([1, 2, 1], np.int32)], lambda p, i: p[1, 2, 1])


def test_gather_nd_errors():
    i = tf.placeholder(tf.int32, [None, 2])
    with pytest.raises(
        errors.InvalidArgumentError, match="does not index into param shape \\[4,3\\]"
    ):
        run_with(tf.gather_nd(tf.zeros([4, 3]), i), {i: [[0, 0], [5, 0]]})
    with pytest.raises(ValueError):
        tf.gather_nd(tf.zeros([4, 3]), [[0, 0, 0]])
    with pytest.raises(ValueError, match="batch_dims=2"):
        tf.gather_nd(tf.zeros([4, 3]), [[0]], batch_dims=2)


@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_gather_nd_batch_dims(idx_dtype):
    params = sample(np.float32, (2, 3, 4, 2))
    idx = np.array([[[1, 2], [0, 3], [2, 2]], [[2, 0], [1, 1], [0, 0]]], idx_dtype)
    want = lambda p, i: np.stack([p[b][i[b, :, 0], i[b, :, 1]] for b in range(2)])
    check_op(lambda p, i: tf.gather_nd(p, i, batch_dims=1), [params, idx], want)
    assert tf.gather_nd(tf.constant(params), idx, batch_dims=1).shape.as_list() == [2, 3, 2]


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int32, np.int64, np.complex64, np.bool_]
)
def test_scatter_nd(dtype):
    idx = np.array([[1], [3], [1]], np.int32)
    updates = sample(dtype, (3, 2))

    def reference(i, u):
        out = np.zeros((5, 2), dtype)
        for k in range(len(i)):  # duplicates accumulate
            out[i[k, 0]] = out[i[k, 0]] + u[k] if dtype is not np.bool_ else out[i[k, 0]] | u[k]
        return out

    check_op(lambda i, u: tf.scatter_nd(i, u, [5, 2]), [idx, updates], reference)


def test_scatter_nd_errors():
    i = tf.placeholder(tf.int32, [None, 1])
    with pytest.raises(errors.InvalidArgumentError, match="does not index into shape"):
        run_with(tf.scatter_nd(i, [1.0], [4]), {i: [[4]]})
    with pytest.raises(ValueError, match="updates"):
        tf.scatter_nd([[0]], [[1.0, 2.0]], [4])


# -- encoding and sets ------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_one_hot(axis):
    idx = np.array([[0, 5], [2, -1]], np.int64)

    def reference(i):
        out = (i[..., None] == np.arange(3)).astype(np.float32) * 4 - 1
        return out if axis is None else np.moveaxis(out, -1, axis)

    check_op(lambda i: tf.one_hot(i, 3, on_value=3.0, off_value=-1.0, axis=axis), [idx], reference)
    assert tf.one_hot(tf.constant(idx), 3, axis=axis).shape.as_list() == list(reference(idx).shape)


def test_one_hot_dtypes_and_errors():
    assert tf.one_hot([1], 2).dtype == tf.float32
    assert tf.one_hot([1], 2, dtype=tf.int32).dtype == tf.int32
    assert tf.one_hot([1], 2, on_value=5, off_value=0).dtype == tf.int32
    on = tf.constant(True)
    assert tf.one_hot([1], 2, on_value=on, off_value=False).dtype == tf.bool
    assert_close(
        run_with(tf.one_hot(tf.constant([1], tf.uint8), 3, dtype=tf.int64), None),
        np.array([[0, 1, 0]], np.int64),
    )
    with pytest.raises(TypeError):
        tf.one_hot([1], 2, on_value=tf.constant(1.0), dtype=tf.int32)
    with pytest.raises(TypeError):
        tf.one_hot([1], 2, on_value=tf.constant(1.0), off_value=tf.constant(0, tf.int32))
    with pytest.raises(ValueError, match="axis"):
        tf.one_hot([1], 2, axis=3)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, object, np.bool_])
def test_unique(dtype):
    x = sample(dtype, (12,))

    def reference(a, counts=False):
        seen = {}
        for v in a.tolist():
            seen.setdefault(v, len(seen))
        y = np.array(list(seen), dtype=a.dtype)
        idx = np.array([seen[v] for v in a.tolist()], np.int32)
        cnt = np.array([a.tolist().count(v) for v in seen], np.int32)
        return [y, idx, cnt] if counts else [y, idx]

    check_op(tf.unique, [x], reference)
    check_op(tf.unique_with_counts, [x], lambda a: reference(a, True))
    if dtype is np.float32:
        nan = np.array([np.nan, 1, np.nan], np.float32)
        check_op(tf.unique, [nan], lambda a: [a, np.arange(3, dtype=np.int32)])
    y, idx = tf.unique(tf.constant(x), out_idx=tf.int64)
    assert idx.dtype == tf.int64 and y.shape.as_list() == [None] and idx.shape.as_list() == [12]


def test_setdiff1d():
    x, y = np.array([1, 2, 3, 4, 5, 6], np.int32), np.array([1, 3, 5], np.int32)
    check_op(
        tf.setdiff1d,
        [x, y],
        lambda a, b: [a[~np.isin(a, b)], np.flatnonzero(~np.isin(a, b)).astype(np.int32)],
    )
    s = np.array([b"a", b"b", b"c"], object)
    check_op(
        lambda a, b: tf.listdiff(a, b, out_idx=tf.int64)[1],
        [s, s[1:2]],
        lambda a, b: np.array([0, 2], np.int64),
    )
    with pytest.raises(ValueError):
        tf.setdiff1d([[1]], [1])


def test_boolean_mask():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    m = np.array([[True, False, True], [False, False, True]])
    check_op(tf.boolean_mask, [x, m], lambda a, b: a[b])
    check_op(lambda a, b: tf.boolean_mask(a, b, axis=1), [x, m[0]], lambda a, b: a[:, b])
    got = tf.boolean_mask(tf.constant(x), m)
    assert got.shape.as_list() == [None, 4]
    with pytest.raises(ValueError, match="scalar"):
        tf.boolean_mask(x, True)
    with pytest.raises(ValueError):
        tf.boolean_mask(x, [True, False, True])


def test_sequence_mask():
    lengths = np.array([[1, 3], [0, 2]], np.int32)
    check_op(lambda n: tf.sequence_mask(n, 4), [lengths], lambda n: np.arange(4) < n[..., None])
    check_op(tf.sequence_mask, [lengths], lambda n: np.arange(3) < n[..., None])
    check_op(
        lambda n: tf.sequence_mask(n, 3, dtype=tf.float32),
        [lengths[0]],
        lambda n: (np.arange(3) < n[..., None]).astype(np.float32),
    )
    with pytest.raises(ValueError, match="scalar"):
        tf.sequence_mask([1], [2, 3])

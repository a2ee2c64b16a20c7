"""Sparse ops against NumPy references on dense equivalents, on each dtype they claim, and
their gradients against numeric Jacobians. Orderings and edge cases (empty groups of
sparse_reduce_max, threshold only on summed entries of sparse_add, split sizes) were checked
against TensorFlow."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.testing.gradient_checker import compute_gradient_error

NUMERIC = [np.float16, np.float32, np.float64, np.int32, np.int64, np.complex64]
IND = np.array([[0, 0], [0, 2], [1, 1], [2, 0], [2, 3]])
SHAPE = [3, 4]


def _dense(indices, values, shape):
    out = np.zeros(shape, np.asarray(values).dtype)
    out[tuple(np.asarray(indices).T)] = values
    return out


def _values(dtype, n=5, seed=0):
    v = np.random.RandomState(seed).randint(1, 9, n)
    return (v + 1j * v).astype(dtype) if np.dtype(dtype).kind == "c" else v.astype(dtype)


def _run(fetch, feed=None):
    with tf.Session() as sess:
        return sess.run(fetch, feed)


@pytest.mark.parametrize("dtype", NUMERIC + [np.bool_, object])
def test_sparse_to_dense_every_dtype(dtype):
    if dtype is object:
        vals, default = np.array([b"a", b"b", b"c", b"d", b"e"], object), b""
    elif dtype is np.bool_:
        vals, default = np.array([True, False, True, True, False]), False
    else:
        vals, default = _values(dtype), dtype(7)
    out = _run(tf.sparse_to_dense(IND, SHAPE, vals, default))
    want = np.full(SHAPE, default, dtype=np.asarray(vals).dtype)
    want[tuple(IND.T)] = vals
    np.testing.assert_array_equal(out, want)
    st = tf.SparseTensor(IND, vals, SHAPE)
    np.testing.assert_array_equal(_run(tf.sparse.to_dense(st, default)), want)


def test_sparse_to_dense_scalar_value_vector_index_and_errors():
    np.testing.assert_array_equal(_run(tf.sparse_to_dense([1, 3], [5], 2.0)), [0, 2, 0, 2, 0])
    for idx, msg in (
        ([[1], [0]], "out of order"),
        ([[1], [1]], "is repeated"),
        ([[1], [4]], "out of bounds"),
    ):
        with pytest.raises(errors.InvalidArgumentError, match=msg):
            _run(tf.sparse_to_dense(idx, [3], [1, 2]))
    out = _run(tf.sparse_to_dense([[1], [0]], [3], [1, 2], validate_indices=False))
    assert out.tolist() == [2, 1, 0]


def test_sparse_to_dense_gradient():
    vals = tf.placeholder(tf.float64, [5])
    default = tf.placeholder(tf.float64, [])
    y = tf.sparse_to_dense(IND, SHAPE, vals, default)
    err = compute_gradient_error([vals, default], [[5], []], y, SHAPE)
    assert err < 1e-6


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.complex128])
@pytest.mark.parametrize(
    "adj_a,adj_b", [(False, False), (True, False), (False, True), (True, True)]
)
def test_sparse_tensor_dense_matmul(dtype, adj_a, adj_b):
    vals = _values(dtype)
    a = _dense(IND, vals, SHAPE)
    b = (
        _values(dtype, 4 * 2, seed=1).reshape(4, 2)
        if not adj_a
        else _values(dtype, 6, 1).reshape(3, 2)
    )
    b = b.T if adj_b else b
    st = tf.SparseTensor(IND, vals, SHAPE)
    out = _run(tf.sparse_tensor_dense_matmul(st, b, adjoint_a=adj_a, adjoint_b=adj_b))
    aa = a.conj().T if adj_a else a
    bb = b.conj().T if adj_b else b
    assert out.dtype == dtype
    np.testing.assert_allclose(out, aa @ bb, rtol=1e-5)


@pytest.mark.parametrize(
    "adj_a,adj_b", [(False, False), (True, False), (False, True), (True, True)]
)
def test_sparse_tensor_dense_matmul_gradient(adj_a, adj_b):
    vals = tf.placeholder(tf.float64, [5])
    b_shape = [3 if adj_a else 4, 2]
    b_shape = b_shape[::-1] if adj_b else b_shape
    b = tf.placeholder(tf.float64, b_shape)
    y = tf.sparse_tensor_dense_matmul(tf.SparseTensor(IND, vals, SHAPE), b, adj_a, adj_b)
    out_rows = 4 if adj_a else 3
    err = compute_gradient_error([vals, b], [[5], b_shape], y, [out_rows, 2])
    assert err < 1e-6


@pytest.mark.parametrize(
    "adj_a,adj_b", [(False, False), (True, False), (False, True), (True, True)]
)
def test_sparse_tensor_dense_matmul_complex_gradient_matches_dense(adj_a, adj_b):
    rng = np.random.RandomState(0)
    v = (rng.randn(5) + 1j * rng.randn(5)).astype(np.complex128)
    b_shape = [3 if adj_a else 4, 2][:: -1 if adj_b else 1]
    b = (rng.randn(*b_shape) + 1j * rng.randn(*b_shape)).astype(np.complex128)
    vt, bt = tf.constant(v), tf.constant(b)
    y = tf.sparse_tensor_dense_matmul(tf.SparseTensor(IND, vt, SHAPE), bt, adj_a, adj_b)
    dense = tf.matmul(tf.sparse_to_dense(IND, SHAPE, vt), bt, adjoint_a=adj_a, adjoint_b=adj_b)
    rows = 4 if adj_a else 3
    g = tf.constant((rng.randn(rows, 2) + 1j * rng.randn(rows, 2)).astype(np.complex128))
    got = _run(tf.gradients(y, [vt, bt], grad_ys=g))
    want = _run(tf.gradients(dense, [vt, bt], grad_ys=g))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize(
    "axis,keep", [(None, False), (0, False), (1, True), (-1, False), ([0, 1], True)]
)
def test_sparse_reduce_sum(dtype, axis, keep):
    vals = _values(dtype)
    st = tf.SparseTensor(IND, vals, SHAPE)
    out = _run(tf.sparse_reduce_sum(st, axis, keepdims=keep))
    want = _dense(IND, vals, SHAPE).sum(
        axis=None if axis is None else tuple(np.atleast_1d(axis)), keepdims=keep
    )
    np.testing.assert_allclose(out, want, rtol=1e-3)
    if axis is not None and not isinstance(axis, list):
        assert tf.sparse_reduce_sum(st, axis, keepdims=keep).shape.as_list() == list(want.shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_sparse_reduce_max_empty_group_is_zero(dtype):
    st = tf.SparseTensor([[0, 0], [0, 2], [2, 1]], np.array([-1, -3, 5], dtype), [3, 3])
    assert _run(tf.sparse_reduce_max(st, 1)).tolist() == [-1, 0, 5]  # TF zero-fills row 1
    assert _run(tf.sparse.reduce_max(st)) == 5


def test_sparse_reduce_sum_gradient():
    vals = tf.placeholder(tf.float64, [5])
    st = tf.SparseTensor(IND, vals, SHAPE)
    for axis, shape in ((1, [3]), (0, [4]), ([0, 1], [])):
        y = tf.sparse_reduce_sum(st, axis)
        assert compute_gradient_error(vals, [5], y, shape) < 1e-6


def test_sparse_concat_orders_entries_and_checks_shapes():
    a = tf.SparseTensor([[0, 0], [1, 1]], [1.0, 2.0], [2, 3])
    b = tf.SparseTensor([[0, 1], [1, 0]], [3.0, 4.0], [2, 2])
    c = _run(tf.sparse_concat(1, [a, b]))
    assert c.indices.tolist() == [[0, 0], [0, 4], [1, 1], [1, 3]]  # TF's output
    assert c.values.tolist() == [1, 3, 2, 4] and c.dense_shape.tolist() == [2, 5]
    r = _run(tf.sparse.concat(0, [a, a]))
    np.testing.assert_array_equal(
        _run(tf.sparse.to_dense(tf.SparseTensor(*r))),
        np.concatenate([_run(tf.sparse.to_dense(a))] * 2),
    )
    with pytest.raises(errors.InvalidArgumentError, match="shapes must match"):
        _run(tf.sparse_concat(0, [a, b]))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_sparse_softmax(dtype):
    ind = np.array([[0, 0, 0], [0, 0, 2], [0, 1, 1], [1, 0, 0], [1, 0, 1], [1, 0, 3]])
    vals = np.array([1.0, 2.0, 3.0, -1.0, 0.5, 4.0], dtype)
    out = _run(tf.sparse_softmax(tf.SparseTensor(ind, vals, [2, 2, 4])))
    group = ind[:, 0] * 2 + ind[:, 1]
    want = np.empty(6)
    for g in np.unique(group):
        e = np.exp(vals[group == g].astype(np.float64))
        want[group == g] = e / e.sum()
    assert out.values.dtype == dtype
    np.testing.assert_allclose(out.values, want, rtol=1e-3 if dtype == np.float16 else 1e-6)


def test_sparse_softmax_gradient():
    vals = tf.placeholder(tf.float64, [5])
    y = tf.sparse_softmax(tf.SparseTensor(IND, vals, SHAPE)).values
    assert compute_gradient_error(vals, [5], y, [5]) < 1e-6


@pytest.mark.parametrize("dtype", NUMERIC)
def test_sparse_add_sparse_and_dense(dtype):
    a_ind, b_ind = [[0, 1], [1, 0]], [[0, 1], [1, 1]]
    a_val, b_val = np.array([1, 2], dtype), np.array([3, 4], dtype)
    a, b = tf.SparseTensor(a_ind, a_val, [2, 2]), tf.SparseTensor(b_ind, b_val, [2, 2])
    s = _run(tf.sparse_add(a, b))
    assert s.indices.tolist() == [[0, 1], [1, 0], [1, 1]]
    np.testing.assert_array_equal(
        _run(tf.sparse.to_dense(tf.SparseTensor(*s))),
        _dense(a_ind, a_val, [2, 2]) + _dense(b_ind, b_val, [2, 2]),
    )
    dense = np.ones((2, 2), dtype)
    np.testing.assert_array_equal(
        _run(tf.sparse_add(dense, a)), dense + _dense(a_ind, a_val, [2, 2])
    )


def test_sparse_add_threshold_applies_to_summed_entries_only():
    a = tf.SparseTensor([[0, 1], [1, 0]], [2.0, 1.0], [2, 2])
    b = tf.SparseTensor([[0, 1], [1, 1]], [-1.5, 0.5], [2, 2])
    s = _run(tf.sparse_add(a, b, thresh=0.6))
    assert s.indices.tolist() == [[1, 0], [1, 1]] and s.values.tolist() == [1.0, 0.5]  # as TF


def test_sparse_add_gradients():
    av, bv = tf.placeholder(tf.float64, [2]), tf.placeholder(tf.float64, [2])
    a = tf.SparseTensor([[0, 1], [1, 0]], av, [2, 2])
    b = tf.SparseTensor([[0, 1], [1, 1]], bv, [2, 2])
    s = tf.sparse_add(a, b)
    assert compute_gradient_error([av, bv], [[2], [2]], s.values, [3]) < 1e-6
    d = tf.placeholder(tf.float64, [2, 2])
    y = tf.sparse_add(a, d)
    assert compute_gradient_error([av, d], [[2], [2, 2]], y, [2, 2]) < 1e-6


def test_sparse_reshape_matches_dense_reshape():
    vals = _values(np.int32)
    st = tf.SparseTensor(IND, vals, SHAPE)
    for new in ([2, 6], [-1, 3], [12], [2, 2, 3]):
        r = tf.sparse_reshape(st, new)
        got = _run(tf.sparse.to_dense(r))
        np.testing.assert_array_equal(got, _dense(IND, vals, SHAPE).reshape(new))
    with pytest.raises(errors.InvalidArgumentError):
        _run(tf.sparse_reshape(st, [5, -1]).indices)


def test_sparse_retain_and_reorder_and_transpose():
    vals = np.arange(5.0)
    st = tf.SparseTensor(IND, vals, SHAPE)
    kept = _run(tf.sparse_retain(st, [True, False, True, False, True]))
    assert kept.indices.tolist() == [[0, 0], [1, 1], [2, 3]] and kept.values.tolist() == [0, 2, 4]
    shuffled = tf.SparseTensor(IND[::-1], vals[::-1], SHAPE)
    ordered = _run(tf.sparse_reorder(shuffled))
    assert ordered.indices.tolist() == IND.tolist() and ordered.values.tolist() == vals.tolist()
    t = _run(tf.sparse.to_dense(tf.sparse_transpose(st)))
    np.testing.assert_array_equal(t, _dense(IND, vals, SHAPE).T)


def test_sparse_reorder_gradient():
    vals = tf.placeholder(tf.float64, [5])
    y = tf.sparse_reorder(tf.SparseTensor(IND[::-1], vals, SHAPE)).values
    assert compute_gradient_error(vals, [5], y * np.arange(1.0, 6.0), [5]) < 1e-6


def test_sparse_fill_empty_rows_like_tf():
    st = tf.SparseTensor([[3, 0], [0, 1], [0, 0]], [1.0, 2.0, 3.0], [5, 2])
    out, empty = _run(tf.sparse_fill_empty_rows(st, -1.0))
    assert out.indices.tolist() == [[0, 1], [0, 0], [1, 0], [2, 0], [3, 0], [4, 0]]
    assert out.values.tolist() == [2, 3, -1, -1, 1, -1]
    assert empty.tolist() == [False, True, True, False, True]
    vals, default = tf.placeholder(tf.float64, [3]), tf.placeholder(tf.float64, [])
    filled, _ = tf.sparse_fill_empty_rows(tf.SparseTensor(st.indices, vals, [5, 2]), default)
    assert compute_gradient_error([vals, default], [[3], []], filled.values, [6]) < 1e-6


def test_sparse_split_sizes_like_tf():
    st = tf.SparseTensor([[0, 0], [0, 4], [1, 2], [1, 3]], [1, 2, 3, 4], [2, 5])
    parts = _run(tf.sparse_split(sp_input=st, num_split=3, axis=1))
    assert [p.dense_shape.tolist() for p in parts] == [[2, 2], [2, 2], [2, 1]]
    assert [p.indices.tolist() for p in parts] == [[[0, 0]], [[1, 0], [1, 1]], [[0, 0]]]
    assert [p.values.tolist() for p in parts] == [[1], [3, 4], [2]]
    with pytest.raises(ValueError, match="Keyword"):
        tf.sparse_split(st, 2, 1)


def test_sparse_to_indicator():
    st = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], [3, 1, 2], [2, 2])
    out = _run(tf.sparse_to_indicator(st, 5))
    assert out.tolist() == [[False, True, False, True, False], [False, False, True, False, False]]


def test_sparse_dense_elementwise_and_gradients():
    st = tf.SparseTensor([[0, 0], [1, 1]], [6, -7], [2, 2])
    quotient = _run(st / tf.constant([[4, 4], [2, 2]]))
    assert quotient.values.dtype == np.float64 and quotient.values.tolist() == [1.5, -3.5]  # TF
    assert _run((st * tf.constant([2, 3])).values).tolist() == [12, -21]
    vals, d = tf.placeholder(tf.float64, [5]), tf.placeholder(tf.float64, [4])
    sp = tf.SparseTensor(IND, vals, SHAPE)
    for y in ((sp * d).values, (sp / d).values):
        err = compute_gradient_error(
            [vals, d], [[5], [4]], y, [5], x_init_value=[np.arange(1.0, 6.0), np.arange(2.0, 6.0)]
        )
        assert err < 1e-6


def test_sparse_namespace_names():
    for name in (
        "SparseTensor",
        "placeholder",
        "to_dense",
        "matmul",
        "reduce_sum",
        "concat",
        "softmax",
        "add",
        "reshape",
        "retain",
        "fill_empty_rows",
        "split",
        "reorder",
        "transpose",
        "to_indicator",
        "reduce_max",
    ):
        assert callable(getattr(tf.sparse, name))


# Recorded from TensorFlow 2.21 (tf.compat.v1) for the builds in test_more_sparse_ops_like_tf.
TF_MORE = [
    ([[0, 3], [1, 1]], [2.0, 3.0], [2, 4]),
    ([[0, 0], [0, 4], [1, 1], [1, 2], [2, 3]], [1.0, 2.0, 5.0, 3.0, 7.0], [3, 5]),
    ([[0, 0], [0, 4], [1, 1], [1, 2], [2, 3]], [-1.0, 0.0, 0.0, 0.0, 4.0], [3, 5]),
    ([[0], [1], [2]], [3.0, 3.0, 4.0], [3]),
    ([[0, 0], [0, 2], [0, 3], [0, 4]], [1.0, 3.0, 4.0, 2.0], [1, 5]),
    ([[0, 0], [0, 4], [1, 2], [2, 3]], [1.0, 2.0, 3.0, 4.0], [3, 5]),
    ([[0, 0, 0], [0, 0, 4], [1, 0, 2], [2, 0, 3]], [1.0, 2.0, 3.0, 4.0], [3, 1, 5]),
    ([[0, 1], [0, 3], [1, 2]], [0.25, 0.5, 1.0], [2, 5]),
    [0.0, 5.0, 7.0, 0.0],
]


def test_more_sparse_ops_like_tf():
    st = tf.SparseTensor([[0, 0], [0, 4], [1, 2], [2, 3]], [1.0, 2.0, 3.0, 4.0], [3, 5])
    o = tf.SparseTensor([[0, 0], [1, 1], [2, 3]], [-1.0, 5.0, 7.0], [3, 5])
    ids = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant([3, 1, 2], tf.int64), [2, 2])
    weights = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], [0.5, 0.25, 1.0], [2, 2])
    built = [
        tf.sparse_slice(st, [0, 1], [2, 10]),
        tf.sparse_maximum(st, o),
        tf.sparse_minimum(st, o),
        tf.sparse_reduce_sum_sparse(st, 1),
        tf.sparse_reduce_sum_sparse(st, 0, keepdims=True),
        tf.sparse_reset_shape(st),
        tf.sparse.expand_dims(st, 1),
        tf.sparse_merge(ids, weights, 5),
    ]
    v = tf.constant([1.0, 2.0, 3.0, 4.0])
    sliced = tf.sparse_slice(tf.SparseTensor(st.indices, v, st.dense_shape), [0, 1], [2, 10])
    grad = tf.gradients(tf.reduce_sum(sliced.values * [5.0, 7.0]), v)[0]
    with tf.Session() as sess:
        got = [
            (r.indices.tolist(), np.round(r.values, 5).tolist(), r.dense_shape.tolist())
            for r in sess.run(built)
        ] + [sess.run(grad).tolist()]
    assert got == TF_MORE


def test_sparse_eye_mask_and_missing_names():
    eye = _run(tf.sparse.to_dense(tf.sparse.eye(3, 4)))
    np.testing.assert_array_equal(eye, np.eye(3, 4))
    slices = tf.IndexedSlices(
        tf.constant([[1.0], [2.0], [3.0]]), tf.constant([0, 5, 7]), tf.constant([10, 1])
    )
    masked = tf.sparse_mask(slices, [5])
    values, indices = _run([masked.values, masked.indices])
    assert values.tolist() == [[1.0], [3.0]] and indices.tolist() == [0, 7]
    with pytest.raises(NotImplementedError, match="serialize_sparse"):
        tf.serialize_sparse(tf.SparseTensor([[0]], [1], [2]))

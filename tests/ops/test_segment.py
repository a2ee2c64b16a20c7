"""Segment reductions, dynamic_partition, bincount, histogram_fixed_width(_bins) and einsum
against NumPy references on each dtype they claim, and their gradients against numeric
Jacobians (empty-segment values as TensorFlow gives them)."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.testing.gradient_checker import compute_gradient_error

REAL = [np.float16, np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8]
NUMBER = REAL + [np.complex64, np.complex128]
IDS = np.array([0, 0, 2, 2, 2, 5])
REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}


def _run(fetch, feed=None):
    with tf.Session() as sess:
        return sess.run(fetch, feed)


def _data(dtype, rows=6, seed=0):
    v = np.random.RandomState(seed).randint(1, 6, (rows, 3))
    return (v + 1j * v[::-1]).astype(dtype) if np.dtype(dtype).kind == "c" else v.astype(dtype)


def _reference(kind, data, ids, n, empty):
    wide = np.complex128 if data.dtype.kind == "c" else np.float64
    out = np.full(
        (n,) + data.shape[ids.ndim :], empty, dtype=wide if kind == "mean" else data.dtype
    )
    flat, rows = ids.reshape(-1), data.reshape((ids.size,) + data.shape[ids.ndim :])
    for s in range(n):
        if (flat == s).any():
            out[s] = REDUCE[kind](rows[flat == s].astype(out.dtype), axis=0)
    return out


@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("dtype", NUMBER)
def test_sorted_segments(kind, dtype):
    if kind in ("max", "min") and np.dtype(dtype).kind == "c":
        pytest.skip("max/min are defined on real types only")
    data = _data(dtype)
    fn = getattr(tf, f"segment_{kind}")
    out = _run(fn(data, IDS))
    want = _reference(kind, data, IDS, 6, 1 if kind == "prod" else 0)
    if kind == "mean" and np.dtype(dtype).kind in "iu":
        want = np.trunc(want)
    assert out.dtype == dtype and out.shape == (6, 3)
    np.testing.assert_allclose(out.astype(np.complex128), want.astype(np.complex128), rtol=1e-3)
    assert fn(data, IDS).shape.as_list() == [None, 3]


def test_sorted_segment_errors():
    with pytest.raises(errors.InvalidArgumentError, match="not increasing"):
        _run(tf.segment_sum([1.0, 2.0, 3.0], [0, 2, 1]))
    with pytest.raises(errors.InvalidArgumentError):
        _run(tf.segment_sum([1.0, 2.0, 3.0], [0, 1]))


@pytest.mark.parametrize("kind", ["max", "min", "prod"])
@pytest.mark.parametrize("dtype", REAL)
def test_unsorted_segments_drop_negative_ids(kind, dtype):
    data = _data(dtype)
    ids = np.array([[3, -1], [0, 3], [0, 1]])
    d = data.reshape(3, 2, 3)
    out = _run(getattr(tf, f"unsorted_segment_{kind}")(d, ids, 5))
    info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
    empty = {
        "max": -np.inf if np.dtype(dtype).kind == "f" else info.min,
        "min": np.inf if np.dtype(dtype).kind == "f" else info.max,
        "prod": 1,
    }[kind]
    want = _reference(kind, d, ids, 5, empty)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unsorted_segment_mean_and_sqrt_n(dtype):
    data = _data(dtype)
    ids = np.array([3, 0, 3, 3, 0, 1])
    counts = np.bincount(ids, minlength=4).reshape(4, 1)
    sums = _reference("sum", data, ids, 4, 0)
    np.testing.assert_allclose(
        _run(tf.unsorted_segment_mean(data, ids, 4)), sums / np.maximum(counts, 1), rtol=1e-6
    )
    np.testing.assert_allclose(
        _run(tf.math.unsorted_segment_sqrt_n(data, ids, 4)),
        sums / np.sqrt(np.maximum(counts, 1)),
        rtol=1e-6,
    )


@pytest.mark.parametrize("kind", ["sum", "mean", "sqrt_n"])
def test_sparse_segments(kind):
    data = _data(np.float32)
    indices, ids = np.array([5, 0, 0, 3]), np.array([0, 0, 1, 3])
    out = _run(getattr(tf, f"sparse_segment_{kind}")(data, indices, ids))
    rows = data[indices]
    want = np.zeros((4, 3), np.float64)
    for s in range(4):
        if (ids == s).any():
            total = rows[ids == s].sum(0)
            n = (ids == s).sum()
            want[s] = {"sum": total, "mean": total / n, "sqrt_n": total / np.sqrt(n)}[kind]
    np.testing.assert_allclose(out, want, rtol=1e-6)
    six = _run(getattr(tf, f"sparse_segment_{kind}")(data, indices, ids, num_segments=6))
    assert six.shape == (6, 3)


SEGMENT_GRADS = [
    (lambda x: tf.segment_sum(x, IDS), [6, 3]),
    (lambda x: tf.segment_mean(x, IDS), [6, 3]),
    (lambda x: tf.segment_max(x, IDS), [6, 3]),
    (lambda x: tf.segment_min(x, IDS), [6, 3]),
    (lambda x: tf.segment_prod(x, IDS), [6, 3]),
    (lambda x: tf.unsorted_segment_sum(x, [2, -1, 0, 2, 1, 0], 4), [4, 3]),
    (lambda x: tf.unsorted_segment_max(x, [2, -1, 0, 2, 1, 0], 3), [3, 3]),  # none empty: -inf
    (lambda x: tf.unsorted_segment_min(x, [2, -1, 0, 2, 1, 0], 3), [3, 3]),
    (lambda x: tf.unsorted_segment_prod(x, [2, -1, 0, 2, 1, 0], 4), [4, 3]),
    (lambda x: tf.unsorted_segment_mean(x, [2, -1, 0, 2, 1, 0], 4), [4, 3]),
    (lambda x: tf.sparse_segment_sum(x, [5, 0, 0, 3], [0, 0, 1, 3]), [4, 3]),
    (lambda x: tf.sparse_segment_mean(x, [5, 0, 0, 3], [0, 0, 1, 3]), [4, 3]),
    (lambda x: tf.sparse_segment_sqrt_n(x, [5, 0, 0, 3], [0, 0, 1, 3], num_segments=5), [5, 3]),
]


@pytest.mark.parametrize("i", range(len(SEGMENT_GRADS)))
def test_segment_gradients(i):
    fn, out_shape = SEGMENT_GRADS[i]
    x = tf.placeholder(tf.float64, [6, 3])
    init = np.random.RandomState(i).permutation(18).reshape(6, 3) / 3.0 + 0.5  # distinct values
    assert compute_gradient_error(x, [6, 3], fn(x), out_shape, x_init_value=init) < 1e-6


def test_segment_prod_gradient_with_zeros():
    x = tf.placeholder(tf.float64, [6, 3])
    init = np.arange(1.0, 19.0).reshape(6, 3)
    init[0, 0] = 0.0  # one zero in segment 0, column 0
    init[2, 1] = init[3, 1] = 0.0  # two zeros in segment 2, column 1
    y = tf.unsorted_segment_prod(x, IDS, 6)
    g = _run(tf.gradients(y, x), {x: init})[0]
    assert g[1, 0] == 0 and g[0, 0] == init[1, 0]  # the zero's derivative: the others' product
    assert g[2, 1] == 0 and g[3, 1] == 0 and g[4, 1] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, object])
def test_dynamic_partition(dtype):
    data = (
        np.arange(12).reshape(4, 3).astype(dtype)
        if dtype is not object
        else np.array([[b"a"], [b"b"], [b"c"], [b"d"]], object)
    )
    parts = [2, 0, 2, 2]
    out = _run(tf.dynamic_partition(data, parts, 3))
    for k in range(3):
        np.testing.assert_array_equal(out[k], data[np.array(parts) == k])
    assert out[1].shape == (0,) + data.shape[1:]
    with pytest.raises(errors.InvalidArgumentError):
        _run(tf.dynamic_partition(data, [0, 1, 3, 0], 3))


def test_dynamic_partition_gradient_with_unused_output():
    x = tf.placeholder(tf.float64, [2, 3])
    a, b, _ = tf.dynamic_partition(x, [[0, 1, 0], [2, 1, 1]], 3)
    y = tf.concat([a * 2.0, b * b], 0)
    assert compute_gradient_error(x, [2, 3], y, [5]) < 1e-6


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.float32, tf.float64])
def test_bincount(dtype):
    arr = np.array([[1, 1, 4], [0, 4, 4]], np.int32)
    np.testing.assert_array_equal(_run(tf.bincount(arr, dtype=dtype)), np.bincount(arr.ravel()))
    assert _run(tf.bincount(arr, dtype=dtype)).dtype == dtype.as_numpy_dtype
    w = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(
        _run(tf.bincount(arr, weights=w, minlength=7)),
        np.bincount(arr.ravel(), w.ravel(), minlength=7),
    )
    assert _run(tf.bincount(arr, maxlength=2)).tolist() == [1, 2]
    assert _run(tf.bincount(np.zeros(0, np.int32))).shape == (0,)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_histogram_fixed_width(dtype):
    values = np.array([-1.0, 0.0, 1.5, 2.0, 5.0, 15.0, 4.99]).astype(dtype)
    out = _run(tf.histogram_fixed_width(values, [0, 5], nbins=5))
    clipped = np.clip(values.astype(np.float64), 0, 4.999999)
    np.testing.assert_array_equal(out, np.bincount(np.floor(clipped).astype(int), minlength=5))
    assert out.dtype == np.int32
    bins = _run(tf.histogram_fixed_width_bins(values.astype(np.float32), [0.0, 5.0], nbins=5))
    np.testing.assert_array_equal(bins, np.floor(clipped).astype(int))


EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 2)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->i", [(3, 4), (3, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ij,kl->ik", [(2, 3), (4, 5)]),
    ("ij", [(3, 4)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.complex64])
def test_einsum_matches_numpy(eq, shapes, dtype):
    rng = np.random.RandomState(0)
    xs = [rng.randint(-3, 4, s).astype(dtype) for s in shapes]
    y = tf.einsum(eq, *xs)
    out = _run(y)
    want = np.einsum(eq, *xs)
    assert out.dtype == dtype and y.shape.as_list() == list(np.shape(want))
    np.testing.assert_allclose(out, want, rtol=1e-5)


@pytest.mark.parametrize("eq,shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_gradients(eq, shapes):
    xs = [tf.placeholder(tf.float64, s) for s in shapes]
    y = tf.einsum(eq, *xs)
    err = compute_gradient_error(xs, [list(s) for s in shapes], y, y.shape.as_list())
    assert err < 1e-6


def test_einsum_bad_equation():
    with pytest.raises((ValueError, errors.InvalidArgumentError)):
        tf.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(TypeError):
        tf.einsum("ij->ji", np.ones((2, 3)), foo=1)


def test_dense_bincount_rows_and_binary_output():
    from flowgraph.framework.apply_op import apply_op

    arr = tf.constant([[1, 1, 3], [0, 5, 2]])
    counts = apply_op("DenseBincount", [arr, 4, tf.constant([], tf.float32)]).outputs[0]
    binary = apply_op(
        "DenseBincount", [arr, 4, tf.constant([], tf.int32)], binary_output=True
    ).outputs[0]
    got = _run([counts, binary])
    assert got[0].tolist() == [[0, 2, 0, 1], [1, 0, 1, 0]]
    assert got[1].tolist() == [[0, 1, 0, 1], [1, 0, 1, 0]]

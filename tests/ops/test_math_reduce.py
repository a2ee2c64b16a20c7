"""Reductions, arg-reductions and scans against NumPy, with TF1's argument rules and the
semantics the real-TF fixture documents (integer Mean truncates, ArgMax takes the first tie)."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.testing.op_test import check_op, run

FLOATS = [np.float16, np.float32, np.float64]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
COMPLEX = [np.complex64, np.complex128]
REAL = FLOATS + INTS
NUMERIC = REAL + COMPLEX
FIXTURES = "/work/shared/fixtures/tensorflow/graphs"


def values(dtype, shape=(2, 3, 4)):
    rng = np.random.RandomState(0)
    if np.dtype(dtype).kind in "iu":
        return rng.randint(0 if np.dtype(dtype).kind == "u" else -3, 4, size=shape).astype(dtype)
    v = rng.uniform(-2, 2, size=shape)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.uniform(-2, 2, size=shape)
    return v.astype(dtype)


def tol(dtype):
    return 3e-3 if dtype == np.float16 else 1e-5


def np_mean(x, axis, keepdims):
    if x.dtype.kind in "iu":
        s = np.sum(x, axis=axis, keepdims=keepdims, dtype=np.int64)
        n = np.prod([x.shape[a] for a in np.atleast_1d(axis)]) if axis is not None else x.size
        return np.trunc(s / n).astype(x.dtype)
    return np.mean(
        x.astype(np.complex128 if x.dtype.kind == "c" else np.float64), axis=axis, keepdims=keepdims
    ).astype(x.dtype)


def np_sum(x, axis, keepdims):
    return np.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


def np_prod(x, axis, keepdims):
    return np.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


REDUCTIONS = [
    (tf.reduce_sum, np_sum, NUMERIC),
    (tf.reduce_mean, np_mean, NUMERIC),
    (tf.reduce_prod, np_prod, NUMERIC),
    (tf.reduce_max, lambda x, axis, keepdims: np.max(x, axis=axis, keepdims=keepdims), REAL),
    (tf.reduce_min, lambda x, axis, keepdims: np.min(x, axis=axis, keepdims=keepdims), REAL),
]
AXES = [None, 0, -1, [0, 2], (1,), []]


@pytest.mark.parametrize(
    "fn,ref,dtype",
    [
        pytest.param(f, r, d, id=f"{f.__name__}-{np.dtype(d).name}")
        for f, r, ds in REDUCTIONS
        for d in ds
    ],
)
def test_reductions(fn, ref, dtype):
    x = values(dtype)
    for axis in AXES:
        for keepdims in (False, True):
            want = ref(x, tuple(axis) if isinstance(axis, list) else axis, keepdims)
            check_op(
                lambda t: fn(t, axis=axis, keepdims=keepdims),
                [x],
                lambda _: np.asarray(want, dtype),
                rtol=tol(dtype),
                atol=tol(dtype),
            )


@pytest.mark.parametrize("fn,ref", [(tf.reduce_any, np.any), (tf.reduce_all, np.all)])
def test_bool_reductions(fn, ref):
    x = np.array([[True, False, True], [True, True, True]])
    for axis in (None, 0, 1, -1):
        check_op(lambda t: fn(t, axis=axis), [x], lambda v: ref(v, axis=axis))
    with pytest.raises(TypeError):
        fn(tf.constant([1.0]))


def test_integer_mean_truncates_toward_zero():
    assert run(lambda t: tf.reduce_mean(t), [np.array([-1, -2, -4], np.int32)]) == -2
    assert run(lambda t: tf.reduce_mean(t), [np.array([1, 2, 4], np.int32)]) == 2
    # The sum is taken in a wider type, as TF does (issue 7, defect 6): no wrap-around.
    assert run(lambda t: tf.reduce_mean(t), [np.array([100, 100, 100], np.int8)]) == 100
    assert run(lambda t: tf.reduce_mean(t), [np.array([255, 255, 1], np.uint8)]) == 170
    big = np.array([[2**31 - 1, 2**31 - 1]], np.int32)
    assert run(lambda t: tf.reduce_mean(t, 1), [big]).tolist() == [2**31 - 1]
    assert run(lambda t: tf.reduce_mean(t), [np.array([-128, -128, 127], np.int8)]) == -43
    u64 = np.array([2**63, 2**62], np.uint64)
    assert run(lambda t: tf.reduce_mean(t), [u64]) == 2**62 + 2**61


def test_reduction_argument_aliases_and_errors():
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    a = tf.reduce_sum(x, reduction_indices=[1], keep_dims=True)
    assert a.shape.as_list() == [2, 1]
    with pytest.raises(ValueError, match="both 'axis' and 'reduction_indices'"):
        tf.reduce_sum(x, axis=0, reduction_indices=0)
    with pytest.raises(ValueError, match="both 'keepdims' and 'keep_dims'"):
        tf.reduce_sum(x, keepdims=True, keep_dims=True)
    with pytest.raises(ValueError, match="Invalid reduction dimension"):
        tf.reduce_sum(x, axis=2)
    with tf.Graph().as_default():
        total = tf.reduce_sum(tf.constant([[1.0]]))
        assert total.op.name == "Sum" and total.op.inputs[1].op.name == "Const_1"
        assert total.shape.as_list() == []
    p = tf.placeholder(tf.float32)
    total = tf.reduce_sum(p)  # unknown rank: Range(0, Rank(p))
    assert total.shape.as_list() == []
    axis = tf.placeholder(tf.int32)
    with tf.Session() as sess:
        assert sess.run(total, {p: np.ones((2, 3, 4))}) == 24.0
        with pytest.raises(errors.InvalidArgumentError, match="Invalid reduction dimension"):
            sess.run(tf.reduce_sum(x, axis=axis), {axis: 5})


def test_reduction_static_shapes():
    x = tf.placeholder(tf.float32, [None, 3, 4])
    assert tf.reduce_mean(x, axis=1).shape.as_list() == [None, 4]
    assert tf.reduce_mean(x, axis=[-1, 0], keepdims=True).shape.as_list() == [1, 3, 1]
    assert (
        tf.reduce_max(x, axis=tf.placeholder(tf.int32), keepdims=True).shape.as_list() == [None] * 3
    )


def test_empty_reductions():
    e = np.zeros((0, 3), np.float32)
    assert run(lambda t: tf.reduce_sum(t, 0), [e]).tolist() == [0, 0, 0]
    assert run(lambda t: tf.reduce_prod(t, 0), [e]).tolist() == [1, 1, 1]
    assert run(lambda t: tf.reduce_max(t, 0), [e]).tolist() == [-np.inf] * 3
    assert (
        run(lambda t: tf.reduce_min(t, 0), [np.zeros((0, 2), np.int32)]).tolist() == [2**31 - 1] * 2
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduce_logsumexp(dtype):
    x = np.array([[0.0, 1.0, 1000.0], [-np.inf, -np.inf, -np.inf]], dtype)

    def ref(v, axis, keepdims):
        with np.errstate(divide="ignore", invalid="ignore"):
            m = np.max(v, axis=axis, keepdims=True)
            m = np.where(np.isfinite(m), m, 0)
            out = np.log(np.sum(np.exp(v - m), axis=axis, keepdims=True)) + m
        return out if keepdims else np.squeeze(out, axis=axis)

    for axis in (1, -1):
        for keepdims in (False, True):
            check_op(
                lambda t: tf.reduce_logsumexp(t, axis=axis, keepdims=keepdims),
                [x],
                lambda v: ref(v, axis, keepdims).astype(dtype),
            )
    y = np.random.RandomState(1).randn(3, 4).astype(dtype)
    check_op(
        tf.reduce_logsumexp,
        [y],
        lambda v: np.asarray(np.log(np.sum(np.exp(v.astype(np.float64)))), dtype),
        rtol=1e-5,
    )


def test_variance_and_std():
    x = np.random.RandomState(2).randn(3, 5).astype(np.float32)
    check_op(
        lambda t: tf.math.reduce_variance(t, axis=1), [x], lambda v: np.var(v, axis=1), rtol=1e-5
    )
    check_op(
        lambda t: tf.math.reduce_std(t), [x], lambda v: np.asarray(np.std(v), np.float32), rtol=1e-5
    )


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.complex64])
def test_count_nonzero(dtype):
    x = np.array([[0, 1, 2], [0, 0, 3]]).astype(dtype)
    check_op(lambda t: tf.count_nonzero(t), [x], lambda v: np.int64(np.count_nonzero(v)))
    check_op(
        lambda t: tf.count_nonzero(t, axis=1, keepdims=True, dtype=tf.int32),
        [x],
        lambda v: np.count_nonzero(v, axis=1, keepdims=True).astype(np.int32),
    )
    s = tf.constant(["", "a", "bc"])
    with tf.Session() as sess:
        assert sess.run(tf.count_nonzero(s)) == 2


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("fn,ref", [(tf.argmax, np.argmax), (tf.argmin, np.argmin)])
def test_arg_reductions(fn, ref, dtype):
    x = values(dtype, (3, 4))
    x[0, :] = x[0, 1]  # ties: the first index wins
    for axis in (0, 1, -1):
        check_op(lambda t: fn(t, axis=axis), [x], lambda v: ref(v, axis=axis).astype(np.int64))
    check_op(
        lambda t: fn(t, dimension=1, output_type=tf.int32),
        [x],
        lambda v: ref(v, 1).astype(np.int32),
    )
    check_op(lambda t: fn(t), [x], lambda v: ref(v, 0).astype(np.int64))  # axis None -> 0


def test_arg_reduction_errors_and_shapes():
    x = tf.placeholder(tf.float32, [None, 5])
    assert tf.argmax(x, 1).shape.as_list() == [None] and tf.argmax(x, 1).dtype == tf.int64
    with pytest.raises(ValueError):
        tf.argmax(x, axis=1, dimension=1)
    with pytest.raises(ValueError, match="Expected dimension"):
        tf.argmax(x, 2)
    e, ax = tf.placeholder(tf.float32), tf.placeholder(tf.int32)
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="empty"):
            sess.run(tf.argmax(e, 0), {e: np.zeros((0, 2))})
        with pytest.raises(errors.InvalidArgumentError, match="Expected dimension"):
            sess.run(tf.argmax(e, ax), {e: np.zeros((2, 2)), ax: 3})


def _np_scan(fn, identity):
    def ref(x, axis, exclusive, reverse):
        if reverse:
            x = np.flip(x, axis)
        out = fn(x, axis=axis, dtype=x.dtype)
        if exclusive:
            out = np.concatenate(
                [np.full_like(np.take(x, [0], axis), identity), np.delete(out, -1, axis)], axis
            )
        return np.flip(out, axis) if reverse else out

    return ref


@pytest.mark.parametrize(
    "dtype",
    [np.float16, np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8, np.complex64],
)
@pytest.mark.parametrize(
    "fn,ref", [(tf.cumsum, _np_scan(np.cumsum, 0)), (tf.cumprod, _np_scan(np.cumprod, 1))]
)
def test_scans(fn, ref, dtype):
    x = values(dtype, (3, 4))
    for axis in (0, 1, -1):
        for exclusive in (False, True):
            for reverse in (False, True):
                kw = {"axis": axis, "exclusive": exclusive, "reverse": reverse}
                check_op(
                    lambda t, kw=kw: fn(t, **kw),
                    [x],
                    lambda v, kw=kw: ref(v, *kw.values()),
                    rtol=tol(dtype),
                    atol=tol(dtype),
                )
    assert run(tf.cumsum, [np.array([1, 2, 3], np.int32)]).tolist() == [1, 3, 6]
    assert run(
        lambda t: tf.cumsum(t, exclusive=True, reverse=True), [np.array([1, 2, 3], np.int32)]
    ).tolist() == [5, 3, 0]


def test_fixture_reductions_values():
    """Rebuilds the real-TF `reductions` fixture with our wrappers and compares every fetch:
    int Mean truncates toward zero, ArgMax/ArgMin take the first tie, negative axes."""
    import os

    path = os.path.join(FIXTURES, "reductions.npz")
    if not os.path.exists(path):
        pytest.skip("fixtures not present")
    data = np.load(path)
    x = tf.placeholder(tf.float32, [2, 3, 4])
    n = tf.placeholder(tf.int32, [2, 3])
    b = tf.placeholder(tf.bool, [2, 3])
    built = {
        "sum_last_keep": tf.reduce_sum(x, -1, keepdims=True),
        "sum_all": tf.reduce_sum(x),
        "mean_0_neg1": tf.reduce_mean(x, [0, -1]),
        "max_1": tf.reduce_max(x, 1),
        "min_neg2_keep": tf.reduce_min(x, -2, keepdims=True),
        "prod_last": tf.reduce_prod(x, -1),
        "argmax_last": tf.argmax(x, -1),
        "argmax_0_i32": tf.argmax(x, 0, output_type=tf.int32),
        "argmin_1": tf.argmin(x, 1),
        "int_mean": tf.reduce_mean(n, 1),
        "int_sum_keep": tf.reduce_sum(n, 0, keepdims=True),
        "any_1": tf.reduce_any(b, 1),
        "all_0": tf.reduce_all(b, 0),
        "logsumexp": tf.reduce_logsumexp(x, -1),
    }
    feed = {x: data["feed_x_0"], n: data["feed_n_0"], b: data["feed_b_0"]}
    with tf.Session() as sess:
        got = sess.run(built, feed)
    for key, value in got.items():
        want = data[f"fetch_{key}_0"]
        assert value.dtype == want.dtype and value.shape == want.shape, key
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6, err_msg=key)

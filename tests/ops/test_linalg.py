"""Matrix ops against NumPy: MatMul/BatchMatMulV2 (transposes, adjoints, broadcasting),
inverses, determinants, Cholesky, solves, diagonals, bands, tensordot, eye, trace; with the
static shape checks and run-time errors TF1 gives."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.testing.op_test import check_op, run

MATMUL_TYPES = [np.float16, np.float32, np.float64, np.int32, np.int64, np.complex64, np.complex128]
LINALG_TYPES = [np.float16, np.float32, np.float64, np.complex64, np.complex128]


def rand(shape, dtype, seed=0):
    rng = np.random.RandomState(seed)
    if np.dtype(dtype).kind in "iu":
        return rng.randint(-3, 4, size=shape).astype(dtype)
    v = rng.uniform(-1, 1, size=shape)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.uniform(-1, 1, size=shape)
    return v.astype(dtype)


def tol(dtype):
    return {"e": 5e-2, "f": 1e-4, "F": 1e-4}.get(np.dtype(dtype).char, 1e-10)


def well_conditioned(shape, dtype, seed=0):
    n = shape[-1]
    return (rand(shape, dtype, seed) + 3 * np.eye(n)).astype(dtype)


def adj(m):
    return np.conj(np.swapaxes(m, -1, -2))


@pytest.mark.parametrize("dtype", MATMUL_TYPES)
def test_matmul_transposes_and_adjoints(dtype):
    a, b = rand((2, 3), dtype, 1), rand((3, 4), dtype, 2)
    t = tol(dtype)
    check_op(tf.matmul, [a, b], lambda x, y: x @ y, rtol=t, atol=t)
    check_op(
        lambda x, y: tf.matmul(x, y, transpose_a=True),
        [a.T.copy(), b],
        lambda x, y: x.T @ y,
        rtol=t,
        atol=t,
    )
    check_op(
        lambda x, y: tf.matmul(x, y, transpose_b=True),
        [a, b.T.copy()],
        lambda x, y: x @ y.T,
        rtol=t,
        atol=t,
    )
    check_op(
        lambda x, y: tf.matmul(x, y, adjoint_a=True, adjoint_b=True),
        [adj(a).copy(), adj(b).copy()],
        lambda x, y: adj(x) @ adj(y),
        rtol=t,
        atol=t,
    )
    check_op(
        lambda x, y: tf.matmul(x, y, a_is_sparse=True), [a, b], lambda x, y: x @ y, rtol=t, atol=t
    )


@pytest.mark.parametrize("dtype", MATMUL_TYPES)
def test_batch_matmul_broadcasts(dtype):
    a, b = rand((2, 1, 3, 4), dtype, 1), rand((5, 4, 2), dtype, 2)
    t = tol(dtype)
    check_op(tf.matmul, [a, b], np.matmul, rtol=t, atol=t)
    check_op(
        lambda x, y: tf.matmul(x, y, transpose_a=True, adjoint_b=True),
        [np.swapaxes(a, -1, -2).copy(), adj(b).copy()],
        lambda x, y: np.matmul(np.swapaxes(x, -1, -2), adj(y)),
        rtol=t,
        atol=t,
    )
    check_op(tf.matmul, [a[0], rand((4, 2), dtype)], np.matmul, rtol=t, atol=t)  # rank 3 @ rank 2


def test_matmul_shapes_and_errors():
    a = tf.placeholder(tf.float32, [None, 3])
    assert tf.matmul(a, tf.placeholder(tf.float32, [3, 5])).shape.as_list() == [None, 5]
    bm = tf.matmul(tf.placeholder(tf.float32, [2, 1, 4, 3]), tf.placeholder(tf.float32, [7, 3, 6]))
    assert bm.op.type == "BatchMatMulV2" and bm.shape.as_list() == [2, 7, 4, 6]
    assert tf.matmul(tf.placeholder(tf.float32), a).op.type == "BatchMatMulV2"
    with pytest.raises(ValueError, match="Dimensions must be equal"):
        tf.matmul(a, tf.placeholder(tf.float32, [4, 5]))
    with pytest.raises(ValueError):
        tf.matmul(tf.placeholder(tf.float32, [2, 3, 4]), tf.placeholder(tf.float32, [5, 4, 2]))
    with pytest.raises(ValueError, match="Only one of"):
        tf.matmul(a, a, transpose_a=True, adjoint_a=True)
    with pytest.raises(TypeError):
        tf.matmul(tf.constant([[1]], tf.int8), tf.constant([[1]], tf.int8))
    x, y = tf.placeholder(tf.float32, [None, None]), tf.placeholder(tf.float32, [None, None])
    with (
        tf.Session() as sess,
        pytest.raises(errors.InvalidArgumentError, match="Matrix size-incompatible"),
    ):
        sess.run(tf.matmul(x, y), {x: np.ones((2, 3)), y: np.ones((4, 2))})


def widen(x):
    """The input in double precision, where the reference is computed."""
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


@pytest.mark.parametrize("dtype", LINALG_TYPES)
def test_inverse_determinant_cholesky(dtype):
    t = tol(dtype)
    m = well_conditioned((2, 3, 3), dtype)
    check_op(
        tf.matrix_inverse, [m], lambda x: np.linalg.inv(widen(x)).astype(dtype), rtol=t, atol=t
    )
    check_op(
        lambda x: tf.matrix_inverse(x, adjoint=True),
        [m],
        lambda x: np.linalg.inv(adj(widen(x))).astype(dtype),
        rtol=t,
        atol=t,
    )
    check_op(
        tf.matrix_determinant, [m], lambda x: np.linalg.det(widen(x)).astype(dtype), rtol=t, atol=t
    )
    spd = (m @ adj(m)).astype(dtype)
    check_op(
        tf.cholesky,
        [spd],
        lambda x: np.linalg.cholesky(widen(x)).astype(dtype),
        rtol=t * 10,
        atol=t * 10,
    )
    check_op(
        tf.linalg.slogdet,
        [m],
        lambda x: [np.asarray(v).astype(dtype) for v in np.linalg.slogdet(widen(x))],
        rtol=t,
        atol=t,
    )


def test_linalg_errors():
    sing = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    with pytest.raises(errors.InvalidArgumentError, match="Input is not invertible."):
        run(tf.matrix_inverse, [sing])
    with pytest.raises(
        errors.InvalidArgumentError, match="Cholesky decomposition was not successful"
    ):
        run(tf.cholesky, [np.array([[1.0, 2.0], [2.0, 1.0]], np.float64)])
    with pytest.raises(errors.InvalidArgumentError, match="not invertible"):
        run(tf.matrix_solve, [sing, np.ones((2, 1), np.float32)])
    with pytest.raises(errors.InvalidArgumentError, match="not invertible"):
        run(
            tf.matrix_triangular_solve,
            [np.array([[0.0, 0], [1, 1]], np.float32), np.ones((2, 1), np.float32)],
        )
    with pytest.raises(ValueError, match="Dimensions must be equal"):
        tf.matrix_inverse(tf.placeholder(tf.float32, [2, 3]))
    with pytest.raises(TypeError):
        tf.matrix_inverse(tf.constant([[1]]))
    p = tf.placeholder(tf.float32)
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="square"):
        sess.run(tf.matrix_determinant(p), {p: np.ones((2, 3))})


@pytest.mark.parametrize("dtype", LINALG_TYPES)
def test_solves(dtype):
    t = tol(dtype) * 10
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    m, rhs = well_conditioned((2, 3, 3), dtype), rand((2, 3, 2), dtype, 5)
    check_op(
        tf.matrix_solve,
        [m, rhs],
        lambda a, b: np.linalg.solve(a.astype(wide), b.astype(wide)).astype(dtype),
        rtol=t,
        atol=t,
    )
    check_op(
        lambda a, b: tf.matrix_solve(a, b, adjoint=True),
        [m, rhs],
        lambda a, b: np.linalg.solve(adj(a.astype(wide)), b.astype(wide)).astype(dtype),
        rtol=t,
        atol=t,
    )
    for lower in (True, False):
        for adjoint in (False, True):

            def ref(a, b, lower=lower, adjoint=adjoint):
                tri = np.tril(a) if lower else np.triu(a)
                tri = adj(tri) if adjoint else tri
                return np.linalg.solve(tri.astype(wide), b.astype(wide)).astype(dtype)

            check_op(
                lambda a, b: tf.matrix_triangular_solve(a, b, lower=lower, adjoint=adjoint),
                [m, rhs],
                ref,
                rtol=t,
                atol=t,
            )
    s = tf.matrix_solve(tf.placeholder(dtype, [None, 3, 3]), tf.placeholder(dtype, [None, 3, 7]))
    assert s.shape.as_list() == [None, 3, 7]


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int32, np.int64, np.complex64, np.bool_]
)
def test_diagonals(dtype):
    d = rand((2, 3), np.float32, 3).astype(dtype)
    check_op(tf.diag, [d], lambda v: np.diag(v.ravel()).reshape(2, 3, 2, 3))
    check_op(tf.diag_part, [np.diag(d.ravel()).reshape(2, 3, 2, 3)], lambda v: d)
    check_op(tf.matrix_diag, [d], lambda v: np.stack([np.diag(r) for r in v]))
    check_op(tf.linalg.diag, [d], lambda v: np.stack([np.diag(r) for r in v]))
    m = rand((2, 3, 4), np.float32, 4).astype(dtype)
    check_op(tf.matrix_diag_part, [m], lambda v: np.diagonal(v, axis1=-2, axis2=-1))
    check_op(tf.matrix_set_diag, [m, d], lambda v, w: _set_diag(v, w))
    for lo, hi in ((-1, 0), (0, -1), (1, 1), (0, 0), (-1, -1)):
        check_op(lambda v: tf.matrix_band_part(v, lo, hi), [m], lambda v: _band(v, lo, hi))


def _set_diag(m, d):
    out = m.copy()
    for i in range(d.shape[-1]):
        out[..., i, i] = d[..., i]
    return out


def _band(m, lo, hi):
    i, j = np.indices(m.shape[-2:])
    keep = ((lo < 0) | (i - j <= lo)) & ((hi < 0) | (j - i <= hi))
    return np.where(keep, m, np.zeros((), m.dtype))


def test_diagonal_errors_and_shapes():
    assert tf.diag(tf.placeholder(tf.float32, [2, None])).shape.as_list() == [2, None, 2, None]
    assert tf.matrix_diag_part(tf.placeholder(tf.float32, [5, 3, 4])).shape.as_list() == [5, 3]
    with pytest.raises(ValueError):
        tf.diag_part(tf.placeholder(tf.float32, [2, 3, 4]))
    with pytest.raises(errors.UnimplementedError, match="k=1"):
        tf.matrix_diag(tf.constant([1.0]), k=1)
    with pytest.raises(errors.InvalidArgumentError, match="num_lower"):
        run(lambda v: tf.matrix_band_part(v, 5, 0), [np.ones((2, 2), np.float32)])


def test_trace_and_eye():
    m = rand((2, 3, 3), np.float64)
    check_op(tf.trace, [m], lambda v: np.trace(v, axis1=-2, axis2=-1))
    with tf.Session() as sess:
        assert np.array_equal(sess.run(tf.eye(3)), np.eye(3, dtype=np.float32))
        assert np.array_equal(sess.run(tf.eye(2, 3, dtype=tf.int32)), np.eye(2, 3, dtype=np.int32))
        batch = sess.run(tf.eye(2, batch_shape=[4], dtype=tf.float64))
        assert batch.shape == (4, 2, 2) and np.array_equal(batch[3], np.eye(2))
        n = tf.placeholder(tf.int32, [])
        assert np.array_equal(sess.run(tf.eye(n, 3), {n: 4}), np.eye(4, 3, dtype=np.float32))
    assert tf.linalg.eye is tf.eye and tf.linalg.inv is tf.matrix_inverse


def test_matrix_transpose_and_tensordot():
    m = rand((2, 3, 4), np.complex64)
    check_op(tf.matrix_transpose, [m], lambda v: np.swapaxes(v, -1, -2))
    check_op(lambda v: tf.linalg.adjoint(v), [m], lambda v: adj(v))
    with pytest.raises(ValueError, match="rank >= 2"):
        tf.matrix_transpose(tf.constant([1.0]))
    a, b = rand((2, 3, 4), np.float32, 1), rand((4, 3, 5), np.float32, 2)
    check_op(
        lambda x, y: tf.tensordot(x, y, 1), [a, b], lambda x, y: np.tensordot(x, y, 1), rtol=1e-5
    )
    check_op(
        lambda x, y: tf.tensordot(x, y, [[1, 2], [1, 0]]),
        [a, b],
        lambda x, y: np.tensordot(x, y, [[1, 2], [1, 0]]),
        rtol=1e-5,
    )
    check_op(
        lambda x, y: tf.tensordot(x, y, 0),
        [a[0, 0], b[0, 0]],
        lambda x, y: np.tensordot(x, y, 0),
        rtol=1e-5,
    )
    x = tf.placeholder(tf.float32, [None, 3, 4])
    out = tf.tensordot(x, tf.constant(b), [[2], [0]])
    assert out.shape.as_list() == [None, 3, 3, 5]
    with tf.Session() as sess:
        got = sess.run(out, {x: a})
    np.testing.assert_allclose(got, np.tensordot(a, b, [[2], [0]]), rtol=1e-5)
    with pytest.raises(ValueError):
        tf.tensordot(tf.constant(a), tf.constant(b), 4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("shape,full", [((5, 3), False), ((3, 5), False), ((2, 4, 3), True)])
def test_qr(dtype, shape, full):
    rng = np.random.RandomState(0)
    a = rng.randn(*shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = (a + 1j * rng.randn(*shape)).astype(dtype)
    q_t, r_t = tf.linalg.qr(tf.constant(a), full_matrices=full)
    with tf.Session() as s:
        q, r = s.run([q_t, r_t])
    m, n = shape[-2:]
    k = m if full else min(m, n)
    assert q.shape == shape[:-2] + (m, k) and r.shape == shape[:-2] + (k, n)
    assert q_t.shape.as_list() == list(q.shape) and q.dtype == dtype
    np.testing.assert_allclose(q @ r, a, atol=1e-5)
    np.testing.assert_allclose(
        np.swapaxes(q.conj(), -1, -2) @ q,
        np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)),
        atol=1e-5,
    )
    np.testing.assert_allclose(np.tril(r, -1), 0, atol=1e-6)

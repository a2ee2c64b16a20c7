"""Cross, Svd, SelfAdjointEigV2, MatrixSolveLs and cholesky_solve against NumPy on every dtype
their kernels claim, with TF's shapes and errors, and their gradients against numeric
Jacobians. Singular and eigenvectors are compared through sign-invariant quantities."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.testing.gradient_checker import check_gradients
from flowgraph.testing.op_test import check_op, run
from tests.helpers import REAL_DTYPES

LINALG_TYPES = [np.float16, np.float32, np.float64, np.complex64, np.complex128]


def rand(shape, dtype, seed=0):
    rng = np.random.RandomState(seed)
    v = rng.uniform(-1, 1, size=shape)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.uniform(-1, 1, size=shape)
    return v.astype(dtype)


def tol(dtype):
    return {"e": 2e-2, "f": 1e-4, "F": 1e-4}.get(np.dtype(dtype).char, 1e-10)


def adj(m):
    return np.conj(np.swapaxes(m, -1, -2))


def wide(x):
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


@pytest.mark.parametrize("dtype", REAL_DTYPES)
def test_cross_every_dtype(dtype):
    rng = np.random.RandomState(1)
    a = rng.randint(0, 5, (2, 4, 3)).astype(dtype)
    b = rng.randint(0, 5, (2, 4, 3)).astype(dtype)

    def reference(x, y):  # integer results wrap as the kernel's arithmetic does
        return np.cross(x.astype(np.int64), y.astype(np.int64)).astype(dtype)

    check_op(tf.cross, [a, b], reference)
    check_op(tf.linalg.cross, [a[0, 0], b[0, 0]], reference)


def test_cross_shapes_and_errors():
    p = tf.placeholder(tf.float32, [None, 3])
    assert tf.cross(p, tf.placeholder(tf.float32, [5, None])).shape.as_list() == [5, 3]
    with pytest.raises(ValueError, match="must be 3"):
        tf.cross(tf.placeholder(tf.float32, [2, 4]), tf.placeholder(tf.float32, [2, 4]))
    with pytest.raises(ValueError):
        tf.cross(tf.placeholder(tf.float32, [2, 3]), tf.placeholder(tf.float32, [3, 3]))
    with pytest.raises(TypeError):
        tf.cross(tf.constant([True, False, True]), tf.constant([True, False, True]))
    with pytest.raises(errors.InvalidArgumentError, match="Trailing dimension"):
        _run_unknown(tf.cross, np.ones((2, 4), np.float32), np.ones((2, 4), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="same shape"):
        _run_unknown(tf.cross, np.ones((2, 3), np.float32), np.ones((3,), np.float32))


def _run_unknown(fn, *values):
    """Runs fn on placeholders of unknown shape, so only the kernel checks shapes."""
    g = tf.Graph()
    with g.as_default():
        phs = [tf.placeholder(tf.as_dtype(v.dtype)) for v in values]
        out = fn(*phs)
        with tf.Session() as sess:
            return sess.run(out, dict(zip(phs, values)))


@pytest.mark.parametrize("dtype", LINALG_TYPES)
@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 5), (3, 3)])
def test_svd(dtype, shape):
    a = rand(shape, dtype, 2)
    t = tol(dtype) * 10
    want_s = np.linalg.svd(wide(a), compute_uv=False)
    real = np.float32 if dtype == np.complex64 else np.float64 if dtype == np.complex128 else dtype
    check_op(
        lambda x: tf.svd(x, compute_uv=False), [a], lambda x: want_s.astype(real), rtol=t, atol=t
    )
    m, n = shape[-2:]
    for full in (False, True):
        s, u, v = run(lambda x: list(tf.linalg.svd(x, full_matrices=full)), [a])
        k = min(m, n)
        assert s.dtype == real and u.dtype == dtype and v.dtype == dtype
        assert u.shape == shape[:-2] + (m, m if full else k)
        assert v.shape == shape[:-2] + (n, n if full else k)
        np.testing.assert_allclose(s, want_s, rtol=t, atol=t)
        recon = wide(u[..., :k]) * s[..., None, :].astype(np.float64) @ adj(wide(v[..., :k]))
        np.testing.assert_allclose(recon, a, rtol=t, atol=t)
        for q in (u, v):
            eye = np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2)
            np.testing.assert_allclose(adj(wide(q)) @ wide(q), eye, atol=t)


def test_svd_shapes():
    s, u, v = tf.svd(tf.placeholder(tf.float32, [None, 5, 3]))
    assert [s.shape.as_list(), u.shape.as_list(), v.shape.as_list()] == [
        [None, 3],
        [None, 5, 3],
        [None, 3, 3],
    ]
    s, u, v = tf.svd(tf.placeholder(tf.complex64, [2, 3]), full_matrices=True)
    assert s.dtype == tf.float32 and u.shape.as_list() == [2, 2] and v.shape.as_list() == [3, 3]
    assert tf.svd(tf.placeholder(tf.float32, [4, None]))[0].shape.as_list() == [None]
    assert tf.svd(tf.placeholder(tf.float32), compute_uv=False).shape.ndims is None
    with pytest.raises(ValueError):
        tf.svd(tf.placeholder(tf.float32, [3]))
    with pytest.raises(TypeError):
        tf.svd(tf.constant([[1, 2], [3, 4]]))
    s, u, v = run(lambda x: list(tf.svd(x, full_matrices=True)), [np.zeros((2, 0, 3))])
    assert s.shape == (2, 0) and u.shape == (2, 0, 0) and v.shape == (2, 3, 3)


@pytest.mark.parametrize("dtype", LINALG_TYPES)
def test_self_adjoint_eig(dtype):
    m = rand((2, 4, 4), dtype, 3)
    herm = (m + adj(m)).astype(dtype)
    lower_only = np.tril(herm) + np.triu(rand((2, 4, 4), dtype, 4), 1)  # upper part unread
    t = tol(dtype) * 10
    real = np.float32 if dtype == np.complex64 else np.float64 if dtype == np.complex128 else dtype
    want = np.linalg.eigvalsh(wide(herm))
    check_op(tf.self_adjoint_eigvals, [lower_only], lambda x: want.astype(dtype), rtol=t, atol=t)
    e, v = run(lambda x: list(tf.linalg.eigh(x)), [lower_only])
    assert e.dtype == dtype and v.dtype == dtype
    np.testing.assert_allclose(e.real.astype(real), want, rtol=t, atol=t)
    np.testing.assert_allclose(wide(herm) @ wide(v), wide(v) * wide(e)[..., None, :], atol=t * 5)
    np.testing.assert_allclose(adj(wide(v)) @ wide(v), np.broadcast_to(np.eye(4), v.shape), atol=t)
    assert tf.linalg.eigvalsh is tf.self_adjoint_eigvals


def test_self_adjoint_eig_shapes_and_errors():
    e, v = tf.self_adjoint_eig(tf.placeholder(tf.float64, [7, None, 3]))
    assert e.shape.as_list() == [7, 3] and v.shape.as_list() == [7, 3, 3]
    e = tf.self_adjoint_eigvals(tf.placeholder(tf.float64, [3, 3]))
    assert e.op.outputs[1].shape.as_list() == [0]
    with pytest.raises(ValueError, match="Dimensions must be equal"):
        tf.self_adjoint_eig(tf.placeholder(tf.float64, [3, 4]))
    with pytest.raises(errors.InvalidArgumentError, match="square"):
        _run_unknown(tf.self_adjoint_eigvals, np.ones((3, 4)))


@pytest.mark.parametrize("dtype", LINALG_TYPES)
def test_matrix_solve_ls(dtype):
    t = tol(dtype) * 20
    for shape in ((2, 5, 3), (2, 3, 5)):
        a = rand(shape, dtype, 5)
        a[..., range(3), range(3)] += 2  # well conditioned
        b = rand(shape[:-1] + (2,), dtype, 6)
        check_op(
            tf.matrix_solve_ls,
            [a, b],
            lambda x, y: (np.linalg.pinv(wide(x)) @ wide(y)).astype(dtype),
            rtol=t,
            atol=t,
        )
        check_op(
            lambda x, y: tf.linalg.lstsq(x, y, fast=False),
            [a, b],
            lambda x, y: (np.linalg.pinv(wide(x)) @ wide(y)).astype(dtype),
            rtol=t,
            atol=t,
        )
    a, b = rand((4, 3), dtype, 7), rand((4, 2), dtype, 8)
    n = wide(a).shape[-1]
    ridge = np.linalg.solve(adj(wide(a)) @ wide(a) + 0.5 * np.eye(n), adj(wide(a)) @ wide(b))
    check_op(
        lambda x, y: tf.matrix_solve_ls(x, y, l2_regularizer=0.5),
        [a, b],
        lambda x, y: ridge.astype(dtype),
        rtol=t,
        atol=t,
    )


def test_matrix_solve_ls_rank_deficient_shapes_and_errors():
    a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    b = np.array([[1.0], [2.0], [3.1]])
    with pytest.raises(errors.InvalidArgumentError, match="rank deficient"):
        run(tf.matrix_solve_ls, [a, b])
    got = run(lambda x, y: tf.matrix_solve_ls(x, y, fast=False), [a, b])
    np.testing.assert_allclose(got, np.linalg.lstsq(a, b, rcond=None)[0], rtol=1e-10)
    with pytest.raises(errors.InvalidArgumentError, match=">= 0"):
        run(lambda x, y: tf.matrix_solve_ls(x, y, l2_regularizer=-1.0), [a, b])
    x = tf.matrix_solve_ls(tf.placeholder(tf.float32, [None, 6, 4]), tf.placeholder(tf.float32))
    assert x.shape.ndims is None
    x = tf.matrix_solve_ls(
        tf.placeholder(tf.float32, [None, 6, 4]), tf.placeholder(tf.float32, [2, None, 7])
    )
    assert x.shape.as_list() == [2, 4, 7]
    with pytest.raises(ValueError, match="Dimensions must be equal"):
        tf.matrix_solve_ls(tf.placeholder(tf.float32, [6, 4]), tf.placeholder(tf.float32, [5, 1]))
    with pytest.raises(ValueError):
        tf.matrix_solve_ls(
            tf.placeholder(tf.float32, [6, 4]), tf.placeholder(tf.float32, [6, 1]), [1.0]
        )
    assert run(tf.matrix_solve_ls, [np.zeros((0, 3)), np.zeros((0, 2))]).shape == (3, 2)


@pytest.mark.parametrize("dtype", LINALG_TYPES)
def test_cholesky_solve(dtype):
    m = rand((2, 3, 3), dtype, 9)
    spd = (m @ adj(m) + 3 * np.eye(3)).astype(dtype)
    rhs = rand((2, 3, 2), dtype, 10)
    t = tol(dtype) * 20
    check_op(
        lambda c, b: tf.cholesky_solve(tf.cholesky(c), b),
        [spd, rhs],
        lambda c, b: np.linalg.solve(wide(c), wide(b)).astype(dtype),
        rtol=t,
        atol=t,
    )
    assert tf.linalg.cholesky_solve is tf.cholesky_solve


# -- gradients ------------------------------------------------------------------------------
RNG = np.random.RandomState(0)


def _sym(n):
    m = RNG.uniform(-1, 1, (n, n))
    return m + m.T + np.diag(np.arange(n) * 1.5)  # well-separated eigenvalues


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_gradient(dtype):
    check_gradients(tf.cross, [RNG.uniform(-1, 1, (2, 3)).astype(dtype)] * 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_self_adjoint_eig_gradient(dtype):
    a = np.tril(_sym(4)).astype(dtype)  # the upper triangle is not read: its gradient is 0

    def eigh(x):
        e, v = tf.linalg.eigh(x)
        return [e, tf.square(v)]  # squares: the sign of each eigenvector is arbitrary

    check_gradients(eigh, [a])
    check_gradients(tf.self_adjoint_eigvals, [np.stack([a, np.tril(_sym(4)).astype(dtype)])])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,full", [((3, 3), False), ((4, 2), False), ((2, 4), False),
                                        ((2, 3, 2), True), ((2, 3), True)])  # fmt: skip
def test_svd_gradient(dtype, shape, full):
    a = RNG.uniform(-1, 1, shape).astype(dtype)

    def svd(x):
        s, u, v = tf.svd(x, full_matrices=full)
        if full:  # the extra columns of a full U or V are not unique: use s and the thin part
            k = min(shape[-2:])
            u, v = u[..., :k], v[..., :k]
        return [s, tf.square(u), tf.square(v)]

    check_gradients(svd, [a])
    check_gradients(lambda x: tf.svd(x, compute_uv=False), [a])


def test_svd_gradient_full_matrices_unsupported():
    x = tf.placeholder(tf.float64, [5, 2])
    _, u, _ = tf.svd(x, full_matrices=True)
    with pytest.raises(NotImplementedError, match="abs"):
        tf.gradients(tf.reduce_sum(u), x)
    y = tf.placeholder(tf.float64, [None, None])
    with pytest.raises(NotImplementedError, match="unknown inner"):
        tf.gradients(tf.reduce_sum(tf.svd(y)[1]), y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 3), (2, 4), (3, 3)])
@pytest.mark.parametrize("l2", [0.0, 0.3])
def test_matrix_solve_ls_gradient(dtype, shape, l2):
    # Its own seeded stream and a dominant diagonal: with the module's shared RNG the matrix
    # depended on test order, and a near-singular draw made float32's numeric Jacobian miss.
    rng = np.random.RandomState(17)
    a = rng.uniform(-0.5, 0.5, shape) + 2 * np.eye(*shape)
    b = rng.uniform(-1, 1, shape[:-1] + (2,))
    check_gradients(
        lambda x, y: tf.matrix_solve_ls(x, y, l2_regularizer=l2), [a.astype(dtype), b.astype(dtype)]
    )


def test_matrix_solve_ls_gradient_run_time_shapes():
    """Inner dims unknown at graph construction: a cond picks the case at run time."""
    a = tf.placeholder(tf.float64, [None, None])
    b = tf.placeholder(tf.float64, [None, 1])
    x = tf.matrix_solve_ls(a, b, l2_regularizer=0.1)
    grads = tf.gradients(tf.reduce_sum(tf.square(x)), [a, b])
    with tf.Session() as sess:
        for shape in ((4, 2), (2, 4)):
            av, bv = RNG.uniform(-1, 1, shape) + np.eye(*shape), RNG.uniform(-1, 1, (shape[0], 1))
            ga, gb = sess.run(grads, {a: av, b: bv})
            g2 = tf.Graph()
            with g2.as_default():
                a2, b2 = tf.constant(av), tf.constant(bv)
                x2 = tf.matrix_solve_ls(a2, b2, l2_regularizer=0.1)
                want = tf.gradients(tf.reduce_sum(tf.square(x2)), [a2, b2])
                with tf.Session() as s2:
                    wa, wb = s2.run(want)
            np.testing.assert_allclose(ga, wa, rtol=1e-10)
            np.testing.assert_allclose(gb, wb, rtol=1e-10)
    with pytest.raises(ValueError, match="fast=False"):
        tf.gradients(tf.matrix_solve_ls(a, b, fast=False), a)


def _complex_gradient_error(fn, a):
    """|tf.gradients - numeric| for a real loss of complex input; TF's convention is
    dL/dRe + i dL/dIm (checked on |x|^2 first)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.as_dtype(a.dtype), a.shape)
        loss = fn(x)
        (grad,) = tf.gradients(loss, x)
        with tf.Session() as sess:
            got = sess.run(grad, {x: a})
            num = np.zeros_like(a)
            for idx in np.ndindex(a.shape):
                for unit in (1, 1j):
                    d = np.zeros_like(a)
                    d[idx] = 1e-6 * unit
                    diff = sess.run(loss, {x: a + d}) - sess.run(loss, {x: a - d})
                    num[idx] += diff / 2e-6 * unit
    return np.max(np.abs(got - num))


def _weighted(t, seed):
    w = np.random.RandomState(seed).rand(*t.shape.as_list())
    return tf.reduce_sum(tf.square(tf.abs(t)) * w)


@pytest.mark.parametrize("shape", [(3, 2), (2, 3), (3, 3)])
def test_complex_svd_and_eigh_gradients(shape):
    a = RNG.randn(*shape) + 1j * RNG.randn(*shape)
    assert _complex_gradient_error(lambda x: _weighted(x, 0), a) < 1e-7

    def svd_loss(x):
        s, u, v = tf.svd(x)
        return tf.reduce_sum(s * np.arange(1.0, 1 + min(shape))) + _weighted(u, 1) + _weighted(v, 2)

    assert _complex_gradient_error(svd_loss, a) < 1e-7
    n = shape[0]
    herm = np.tril(a[:, :1] @ a[:, :1].conj().T + np.diag(np.arange(n) * 2.0) + 0j)

    def eigh_loss(x):
        e, v = tf.linalg.eigh(x)
        return tf.reduce_sum(tf.real(e) * np.arange(1.0, n + 1)) + _weighted(v, 3)

    assert _complex_gradient_error(eigh_loss, herm) < 1e-7

"""Every gradient function of the math, reduction, linalg and array rows against central
differences (testing/gradient_checker.py), on float32 and float64, with tiny shapes."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.testing.gradient_checker import check_gradients

RNG = np.random.RandomState(0)


def _u(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape)


POS = {"lo": 0.5, "hi": 1.5}
UNIT = {"lo": -0.6, "hi": 0.6}

# name -> (fn, inputs as float64 arrays)
CASES = {
    "add_broadcast": (lambda a, b: a + b, [_u(2, 3), _u(3)]),
    "sub_broadcast": (lambda a, b: a - b, [_u(2, 1), _u(1, 3)]),
    "mul_scalar": (lambda a, b: a * b, [_u(), _u(2, 2)]),
    "truediv": (lambda a, b: a / b, [_u(2, 2), _u(2, 1, **POS)]),
    "div": (lambda a, b: tf.div(a, b), [_u(3), _u(3, **POS)]),
    "floormod": (
        lambda a, b: tf.floormod(a, b),
        [_u(3, lo=0.1, hi=0.9) + 2.0, np.array([0.7, 0.9, 1.3])],
    ),
    "pow": (lambda a, b: tf.pow(a, b), [_u(2, 2, **POS), _u(2, 2)]),
    "maximum": (
        lambda a, b: tf.maximum(a, b),
        [np.array([0.1, 0.9, -0.3]), np.array([0.5, 0.2, 0.4])],
    ),
    "minimum": (
        lambda a, b: tf.minimum(a, b),
        [np.array([0.1, 0.9, -0.3]), np.array([[0.5], [0.2]])],
    ),
    "squared_difference": (lambda a, b: tf.squared_difference(a, b), [_u(2, 2), _u(2)]),
    "atan2": (lambda a, b: tf.atan2(a, b), [_u(3), _u(3, **POS)]),
    "add_n": (lambda a, b: tf.add_n([a, b, a]), [_u(2), _u(2)]),
    "neg": (tf.negative, [_u(3)]),
    "abs": (tf.abs, [np.array([0.5, -0.7, 0.3])]),
    "square": (tf.square, [_u(3)]),
    "sqrt": (tf.sqrt, [_u(3, **POS)]),
    "rsqrt": (tf.rsqrt, [_u(3, **POS)]),
    "reciprocal": (tf.reciprocal, [_u(3, **POS)]),
    "exp": (tf.exp, [_u(3)]),
    "expm1": (tf.expm1, [_u(3)]),
    "log": (tf.log, [_u(3, **POS)]),
    "log1p": (tf.log1p, [_u(3, **POS)]),
    "sin": (tf.sin, [_u(3)]),
    "cos": (tf.cos, [_u(3)]),
    "tan": (tf.tan, [_u(3)]),
    "asin": (tf.asin, [_u(3, **UNIT)]),
    "acos": (tf.acos, [_u(3, **UNIT)]),
    "atan": (tf.atan, [_u(3)]),
    "sinh": (tf.sinh, [_u(3)]),
    "cosh": (tf.cosh, [_u(3)]),
    "tanh": (tf.tanh, [_u(3)]),
    "asinh": (tf.asinh, [_u(3)]),
    "acosh": (tf.acosh, [_u(3, lo=1.5, hi=2.5)]),
    "atanh": (tf.atanh, [_u(3, **UNIT)]),
    "sigmoid": (tf.sigmoid, [_u(3)]),
    "erf": (tf.erf, [_u(3)]),
    "erfc": (tf.math.erfc, [_u(3)]),
    "lgamma": (tf.lgamma, [_u(3, **POS)]),
    "sign_is_zero": (lambda a: tf.sign(a) * a, [np.array([0.5, -0.7])]),
    "cast_roundtrip": (lambda a: tf.cast(tf.cast(a, tf.float64), a.dtype) * 2.0, [_u(3)]),
    "where": (lambda a, b: tf.where(tf.constant([True, False, True]), a, b), [_u(3), _u(3)]),
    "where_v2_broadcast": (
        lambda a, b: tf.where_v2(tf.constant([[True], [False]]), a, b),
        [_u(3), _u(2, 1)],
    ),
    "tanh_grad_2nd": (lambda a: tf.gradients(tf.tanh(a), a)[0], [_u(3)]),
    "sigmoid_grad_2nd": (lambda a: tf.gradients(tf.sigmoid(a), a)[0], [_u(3)]),
    "sqrt_grad_2nd": (lambda a: tf.gradients(tf.sqrt(a), a)[0], [_u(3, **POS)]),
    "rsqrt_grad_2nd": (lambda a: tf.gradients(tf.rsqrt(a), a)[0], [_u(3, **POS)]),
    "reciprocal_grad_2nd": (lambda a: tf.gradients(tf.reciprocal(a), a)[0], [_u(3, **POS)]),
    # reductions and scans
    "sum_axis": (lambda a: tf.reduce_sum(a, axis=1), [_u(2, 3)]),
    "sum_all_keep": (lambda a: tf.reduce_sum(a, keepdims=True), [_u(2, 3)]),
    "mean_neg_axis": (lambda a: tf.reduce_mean(a, axis=-1), [_u(2, 3)]),
    "prod_with_zero": (
        lambda a: tf.reduce_prod(a, axis=0),
        [np.array([[0.0, 2.0], [3.0, 0.5], [1.5, -1.0]])],
    ),
    "max_axis": (lambda a: tf.reduce_max(a, axis=0), [np.array([[0.1, 0.9], [0.5, -0.2]])]),
    "min_all": (lambda a: tf.reduce_min(a), [np.array([[0.1, 0.9], [0.5, -0.2]])]),
    "cumsum_rev_excl": (lambda a: tf.cumsum(a, axis=1, exclusive=True, reverse=True), [_u(2, 3)]),
    "cumprod": (lambda a: tf.cumprod(a, axis=0), [_u(3, 2, **POS)]),
    # matrices
    "matmul": (lambda a, b: tf.matmul(a, b), [_u(2, 3), _u(3, 2)]),
    "matmul_ta_tb": (
        lambda a, b: tf.matmul(a, b, transpose_a=True, transpose_b=True),
        [_u(3, 2), _u(2, 3)],
    ),
    "matmul_tb": (lambda a, b: tf.matmul(a, b, transpose_b=True), [_u(2, 3), _u(2, 3)]),
    "batch_matmul_bcast": (lambda a, b: tf.matmul(a, b), [_u(2, 2, 3), _u(3, 2)]),
    "batch_matmul_adj": (
        lambda a, b: tf.linalg.matmul(a, b, adjoint_a=True),
        [_u(2, 3, 2), _u(2, 3, 2)],
    ),
    "matrix_inverse": (tf.matrix_inverse, [np.eye(2) * 2 + _u(2, 2) * 0.3]),
    "matrix_determinant": (tf.matrix_determinant, [np.eye(2) * 2 + _u(2, 2) * 0.3]),
    "log_determinant": (lambda a: tf.linalg.slogdet(a)[1], [np.eye(2) * 2 + _u(2, 2) * 0.3]),
    "cholesky": (
        lambda a: tf.cholesky(tf.matmul(a, a, transpose_b=True) + 2.0 * tf.eye(2, dtype=a.dtype)),
        [_u(2, 2)],
    ),
    "matrix_solve": (
        lambda a, b: tf.matrix_solve(a, b),
        [np.eye(2) * 2 + _u(2, 2) * 0.3, _u(2, 1)],
    ),
    "triangular_solve": (
        lambda a, b: tf.matrix_triangular_solve(a, b, lower=True),
        [np.eye(2) * 2 + np.tril(_u(2, 2)) * 0.3, _u(2, 2)],
    ),
    "diag": (tf.diag, [_u(2)]),
    "diag_part": (tf.diag_part, [_u(2, 2)]),
    "matrix_diag": (tf.matrix_diag, [_u(2, 2)]),
    "matrix_diag_part": (tf.matrix_diag_part, [_u(2, 3)]),
    "matrix_set_diag": (tf.matrix_set_diag, [_u(2, 2), _u(2)]),
    "matrix_band_part": (lambda a: tf.matrix_band_part(a, 0, -1), [_u(3, 3)]),
    # array ops
    "identity": (tf.identity, [_u(2)]),
    "reshape": (lambda a: tf.reshape(a, [3, 2]), [_u(2, 3)]),
    "expand_dims": (lambda a: tf.expand_dims(a, 1), [_u(3)]),
    "squeeze": (lambda a: tf.squeeze(a), [_u(1, 3)]),
    "transpose": (lambda a: tf.transpose(a, [1, 2, 0]), [_u(2, 1, 3)]),
    "concat": (lambda a, b: tf.concat([a, b], axis=-1), [_u(2, 1), _u(2, 2)]),
    "stack": (lambda a, b: tf.stack([a, b], axis=1), [_u(2), _u(2)]),
    "unstack": (lambda a: tf.unstack(a, axis=1), [_u(2, 2)]),
    "split": (lambda a: tf.split(a, 2, axis=1), [_u(2, 2)]),
    "split_v": (lambda a: tf.split(a, [1, 2], axis=0), [_u(3, 1)]),
    "slice": (lambda a: tf.slice(a, [1, 0], [1, 2]), [_u(3, 2)]),
    "strided_slice": (lambda a: a[::-2, 1], [_u(3, 2)]),
    "gather_axis0": (lambda a: tf.gather(a, [2, 0, 2]), [_u(3, 2)]),
    "gather_axis1": (lambda a: tf.gather(a, [[1, 0]], axis=1), [_u(2, 3)]),
    "gather_nd": (lambda a: tf.gather_nd(a, [[0, 1], [1, 0]]), [_u(2, 2)]),
    "scatter_nd": (lambda a: tf.scatter_nd([[1], [0]], a, [3, 2]), [_u(2, 2)]),
    "tile": (lambda a: tf.tile(a, [2, 1]), [_u(1, 2)]),
    "pad": (lambda a: tf.pad(a, [[1, 0], [0, 2]]), [_u(2, 2)]),
    "pad_v2": (lambda a: tf.pad(a, [[0, 1]], constant_values=3.0), [_u(2)]),
    "reverse": (lambda a: tf.reverse(a, [0]), [_u(3)]),
    "broadcast_to": (lambda a: tf.broadcast_to(a, [2, 3]), [_u(1, 3)]),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_matches_numeric_jacobian(name, dtype):
    fn, inputs = CASES[name]
    check_gradients(fn, [np.asarray(a, dtype) for a in inputs])


def test_dynamic_shapes_reduction_and_broadcast():
    """Unknown dims take the run-time path (Shape, BroadcastGradientArgs, DynamicStitch)."""
    x = tf.placeholder(tf.float64, [None, 3])
    b = tf.placeholder(tf.float64, [None, 1])
    y = tf.reduce_mean(tf.reduce_sum(x * b, axis=1)) + tf.reduce_max(x, axis=0)[1]
    dx, db = tf.gradients(y, [x, b])
    xv, bv = _u(2, 3), _u(2, 1)
    with tf.Session() as sess:
        gx, gb = sess.run([dx, db], {x: xv, b: bv})
    want_x = np.broadcast_to(bv, (2, 3)) / 2.0
    want_x = want_x + np.eye(2)[np.argmax(xv[:, 1])][:, None] * np.array([0, 1, 0])
    np.testing.assert_allclose(gx, want_x)
    np.testing.assert_allclose(gb, xv.sum(1, keepdims=True) / 2.0)


def test_checker_catches_a_wrong_gradient():
    @tf.RegisterGradient("TestWrongSin")
    def _wrong(op, grad):
        return grad * tf.sin(op.inputs[0])  # should be cos

    def fn(a):
        with tf.get_default_graph().gradient_override_map({"Sin": "TestWrongSin"}):
            return tf.sin(a)

    with pytest.raises(AssertionError, match="gradient of output 0"):
        check_gradients(fn, [np.array([0.3, 1.0])])


def test_dynamic_stitch_gradient_and_sharded_embedding():
    import flowgraph as tf
    from flowgraph.testing.gradient_checker import compute_gradient_error

    a = tf.constant(np.array([[1.0, 2.0], [3.0, 4.0]]))
    b = tf.constant(np.array([[5.0, 6.0]]))
    y = tf.dynamic_stitch([tf.constant([0, 2]), tf.constant([1])], [a, b])
    assert compute_gradient_error([a, b], [[2, 2], [1, 2]], y, [3, 2]) < 1e-6
    # "mod" sharding: ids 0, 2, 4 live in shard 0 (rows 0-2), ids 1, 3 in shard 1 (rows 0-1).
    shards = [
        tf.Variable(np.arange(6.0).reshape(3, 2)),
        tf.Variable(np.arange(6.0, 10.0).reshape(2, 2)),
    ]
    emb = tf.nn.embedding_lookup(shards, tf.constant([0, 3, 4, 1]), partition_strategy="mod")
    grads = tf.gradients(tf.reduce_sum(emb * emb), shards)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        got = [s.run(tf.convert_to_tensor(g)) for g in grads]
    want0 = np.zeros((3, 2))
    want1 = np.zeros((2, 2))
    want0[0] = 2 * np.array([0.0, 1.0])  # id 0
    want0[2] = 2 * np.array([4.0, 5.0])  # id 4
    want1[0] = 2 * np.array([6.0, 7.0])  # id 1
    want1[1] = 2 * np.array([8.0, 9.0])  # id 3
    np.testing.assert_allclose(got[0], want0)
    np.testing.assert_allclose(got[1], want1)


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_mirror_pad_gradient(mode):
    import flowgraph as tf
    from flowgraph.testing.gradient_checker import compute_gradient_error

    x = tf.constant(np.arange(12.0).reshape(3, 4))
    y = tf.pad(x, [[1, 2], [2, 1]] if mode == "REFLECT" else [[2, 3], [1, 4]], mode=mode)
    assert compute_gradient_error(x, [3, 4], y, y.shape.as_list()) < 1e-6

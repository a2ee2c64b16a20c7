"""Element-wise math ops against NumPy on every dtype each op claims, plus TF1's special rules
(truediv casts, Python-2 div, floor/trunc division, casts) and error classes."""

import numpy as np
import pytest
import scipy.special

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.testing.op_test import assert_close, check_op, run

F16, F32, F64 = np.float16, np.float32, np.float64
C64, C128 = np.complex64, np.complex128
SIGNED_INTS = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [F16, F32, F64]
COMPLEX = [C64, C128]
FC = FLOATS + COMPLEX
SIGNED = FLOATS + SIGNED_INTS + COMPLEX
REAL = FLOATS + SIGNED_INTS + UNSIGNED
NUMERIC = REAL + COMPLEX


def data(dtype, domain="any", shape=(2, 3), seed=0):
    """Random test values of `dtype` inside the op's domain."""
    rng = np.random.RandomState(seed)
    dtype = np.dtype(dtype)
    lo, hi = {
        "any": (-3, 3),
        "pos": (0.5, 3),
        "unit": (-0.9, 0.9),
        "ge1": (1.1, 4),
        "small": (-2, 2),
        "nonzero": (1, 4),
        "exp": (0, 3),
    }[domain]
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" and domain != "nonzero" else lo
        v = rng.randint(int(np.floor(lo)), int(np.ceil(hi)) + 1, size=shape)
        if domain == "nonzero":
            v = v * rng.choice([-1, 1] if dtype.kind == "i" else [1], size=shape)
        return v.astype(dtype)
    v = rng.uniform(lo, hi, size=shape)
    if domain == "nonzero":
        v = v * rng.choice([-1, 1], size=shape)
    if dtype.kind == "c":
        v = v + 1j * rng.uniform(lo, hi, size=shape) * (0.5 if domain == "unit" else 1)
    return v.astype(dtype)


def tol(dtype):
    return {"e": 2e-3, "f": 2e-6, "F": 2e-6}.get(np.dtype(dtype).char, 1e-12)


def in_f64(fn):
    """A reference computed in float64 and rounded to the input's dtype."""
    return lambda x: fn(x.astype(F64 if x.dtype.kind == "f" else C128)).astype(x.dtype)


UNARY = [  # (wrapper, NumPy reference, dtypes, domain)
    (tf.negative, np.negative, SIGNED, "any"),
    (tf.abs, np.abs, FLOATS + SIGNED_INTS, "any"),
    (tf.sign, np.sign, SIGNED, "any"),
    (tf.square, np.square, SIGNED, "any"),
    (tf.sqrt, np.sqrt, FC, "pos"),
    (tf.rsqrt, lambda x: (1 / np.sqrt(x)).astype(x.dtype), FC, "pos"),
    (tf.reciprocal, np.reciprocal, FC, "pos"),
    (tf.exp, np.exp, FC, "small"),
    (tf.expm1, np.expm1, FC, "small"),
    (tf.log, np.log, FC, "pos"),
    (tf.log1p, np.log1p, FC, "pos"),
    (tf.sin, np.sin, FC, "any"),
    (tf.cos, np.cos, FC, "any"),
    (tf.tan, np.tan, FC, "unit"),
    (tf.asin, np.arcsin, FC, "unit"),
    (tf.acos, np.arccos, FC, "unit"),
    (tf.atan, np.arctan, FC, "any"),
    (tf.sinh, np.sinh, FC, "small"),
    (tf.cosh, np.cosh, FC, "small"),
    (tf.tanh, np.tanh, FC, "small"),
    (tf.asinh, np.arcsinh, FC, "any"),
    (tf.acosh, np.arccosh, FC, "ge1"),
    (tf.atanh, np.arctanh, FC, "unit"),
    (tf.sigmoid, in_f64(lambda x: 1 / (1 + np.exp(-x))), FC, "any"),
    (tf.erf, in_f64(scipy.special.erf), FLOATS, "any"),
    (tf.erfc, in_f64(scipy.special.erfc), FLOATS, "any"),
    (tf.lgamma, in_f64(scipy.special.gammaln), FLOATS, "pos"),
    (tf.digamma, in_f64(scipy.special.psi), FLOATS, "pos"),
    (tf.floor, np.floor, FLOATS, "any"),
    (tf.ceil, np.ceil, FLOATS, "any"),
    (tf.rint, np.rint, FLOATS, "any"),
    (tf.round, np.round, FLOATS, "any"),
]


@pytest.mark.parametrize(
    "fn,ref,dtype,domain",
    [
        pytest.param(f, r, d, dom, id=f"{f.__name__}-{np.dtype(d).name}")
        for f, r, ds, dom in UNARY
        for d in ds
    ],
)
def test_unary(fn, ref, dtype, domain):
    x = data(dtype, domain)
    check_op(fn, [x], ref, rtol=tol(dtype), atol=tol(dtype))


def _floor_div(x, y):
    return np.floor(x / y).astype(x.dtype) if x.dtype.kind == "f" else np.floor_divide(x, y)


def _trunc_div(x, y):
    return np.trunc(x.astype(F64) / y.astype(F64)).astype(x.dtype)


BINARY = [  # (wrapper, reference, dtypes, domain of y)
    (tf.add, np.add, NUMERIC, "any"),
    (tf.subtract, np.subtract, NUMERIC, "any"),
    (tf.multiply, np.multiply, NUMERIC, "any"),
    (tf.realdiv, np.true_divide, FC, "nonzero"),
    (tf.floordiv, _floor_div, REAL, "nonzero"),
    (tf.floormod, np.mod, REAL, "nonzero"),
    (tf.truncatediv, _trunc_div, SIGNED_INTS + UNSIGNED, "nonzero"),
    (tf.truncatemod, np.fmod, REAL, "nonzero"),
    (tf.pow, np.power, [F16, F32, F64, np.int32, np.int64, C64, C128], "exp"),
    (tf.maximum, np.maximum, REAL, "any"),
    (tf.minimum, np.minimum, REAL, "any"),
    (
        tf.squared_difference,
        lambda x, y: (x - y) * np.conj(x - y),
        [F16, F32, F64, np.int32, np.int64, C64, C128],
        "any",
    ),
    (tf.atan2, np.arctan2, FLOATS, "any"),
    (tf.less, np.less, REAL, "any"),
    (tf.less_equal, np.less_equal, REAL, "any"),
    (tf.greater, np.greater, REAL, "any"),
    (tf.greater_equal, np.greater_equal, REAL, "any"),
    (tf.equal, np.equal, NUMERIC, "any"),
    (tf.not_equal, np.not_equal, NUMERIC, "any"),
]


@pytest.mark.parametrize(
    "fn,ref,dtype,domain",
    [
        pytest.param(f, r, d, dom, id=f"{f.__name__}-{np.dtype(d).name}")
        for f, r, ds, dom in BINARY
        for d in ds
    ],
)
def test_binary_broadcasting(fn, ref, dtype, domain):
    x = data(dtype, "any", shape=(2, 3), seed=1)
    y = data(dtype, domain, shape=(3,), seed=2)
    x[0, 0] = y[0]  # an equal pair for the comparisons
    check_op(fn, [x, y], ref, rtol=tol(dtype), atol=tol(dtype))
    check_op(fn, [x[:, :1], y[None, :]], ref, rtol=tol(dtype), atol=tol(dtype))  # [2,1] x [1,3]


def test_floor_and_truncate_semantics():
    x, y = np.array([7, -7, 7, -7], np.int32), np.array([2, 2, -2, -2], np.int32)
    assert run(tf.floordiv, [x, y]).tolist() == [3, -4, -4, 3]
    assert run(tf.floormod, [x, y]).tolist() == [1, 1, -1, -1]
    assert run(tf.truncatediv, [x, y]).tolist() == [3, -3, -3, 3]
    assert run(tf.truncatemod, [x, y]).tolist() == [1, -1, 1, -1]
    assert run(tf.div, [x, y]).tolist() == [3, -4, -4, 3]  # Python 2: floor for ints
    f = np.array([7.5, -7.5], np.float32)
    assert run(tf.floordiv, [f, np.float32([2, 2])]).tolist() == [3.0, -4.0]
    assert run(tf.div, [f, np.float32([2, 2])]).tolist() == [3.75, -3.75]
    assert run(tf.floormod, [f, np.float32([-2, 2])]).tolist() == [-0.5, 0.5]


@pytest.mark.parametrize(
    "dtype,want",
    [
        (np.int8, F32),
        (np.uint8, F32),
        (np.int16, F32),
        (np.uint16, F32),
        (np.int32, F64),
        (np.int64, F64),
        (F16, F16),
        (F32, F32),
        (F64, F64),
        (C64, C64),
    ],
)
def test_truediv_casts_ints_to_floats(dtype, want):
    x, y = (
        np.array([7, 5 if np.dtype(dtype).kind == "u" else -7, 1], dtype),
        np.array([2, 2, 3], dtype),
    )
    check_op(tf.truediv, [x, y], lambda a, b: a.astype(want) / b.astype(want), rtol=tol(want))
    check_op(tf.divide, [x, y], lambda a, b: a.astype(want) / b.astype(want), rtol=tol(want))


def test_truediv_rejects_mixed_dtypes():
    with pytest.raises(TypeError):
        tf.truediv(tf.constant([1], tf.int32), tf.constant([1.0]))


def test_string_add_and_equal():
    a, b = np.array([b"ab", b"c"], object), np.array([b"x", b"c"], object)
    assert run(tf.add, [a, b]).tolist() == [b"abx", b"cc"]
    assert run(tf.equal, [a, b]).tolist() == [False, True]
    assert run(tf.not_equal, [a, b]).tolist() == [True, False]
    assert tf.add(tf.constant(["a"]), "b").op.type == "Add"
    assert tf.add(tf.constant([1.0]), 2.0).op.type == "AddV2"


def test_equal_incompatible_shape_error_attr():
    x, y = tf.placeholder(tf.int32), tf.placeholder(tf.int32)
    eq = tf.get_default_graph()  # build Equal with the attr switched off, as TF 2 writes it
    from flowgraph.framework.apply_op import apply_op

    lenient = apply_op("Equal", [x, y], incompatible_shape_error=False).outputs[0]
    strict = tf.equal(x, y)
    with tf.Session(graph=eq) as sess:
        assert sess.run(lenient, {x: [1, 2, 3], y: [1, 2]}) == np.False_
        with pytest.raises(
            errors.InvalidArgumentError, match=r"Incompatible shapes: \[3\] vs. \[2\]"
        ):
            sess.run(strict, {x: [1, 2, 3], y: [1, 2]})


def test_bool_equality_and_logic():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    check_op(tf.equal, [a, b], np.equal)
    check_op(tf.logical_and, [a, b], np.logical_and)
    check_op(tf.logical_or, [a, b], np.logical_or)
    check_op(tf.logical_xor, [a, b], np.logical_xor)
    check_op(tf.logical_not, [a], np.logical_not)


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_predicates(dtype):
    x = np.array([0, np.nan, np.inf, -np.inf, -1.5], dtype)
    check_op(tf.is_nan, [x], np.isnan)
    check_op(tf.is_inf, [x], np.isinf)
    check_op(tf.is_finite, [x], np.isfinite)


def test_round_half_to_even_and_int_passthrough():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4], np.float32)
    assert run(tf.round, [x]).tolist() == [0, 2, 2, -0, -2, 2]
    assert run(tf.rint, [x]).tolist() == [0, 2, 2, -0, -2, 2]
    i = tf.constant([1, 2])
    assert tf.round(i) is i


def test_pow_integers():
    check_op(tf.pow, [np.array([2, -3], np.int32), np.array([10, 3], np.int32)], np.power)
    with pytest.raises(errors.InvalidArgumentError, match="negative integer powers"):
        run(tf.pow, [np.array([2], np.int32), np.array([-1], np.int32)])


@pytest.mark.parametrize("fn", [tf.floordiv, tf.floormod, tf.truncatediv, tf.truncatemod, tf.div])
def test_integer_division_by_zero(fn):
    with pytest.raises(errors.InvalidArgumentError, match="Integer division by zero"):
        run(fn, [np.array([1, 2], np.int32), np.array([1, 0], np.int32)])


@pytest.mark.parametrize("dtype", FC)
def test_div_no_nan(dtype):
    x, y = np.array([1, 2, 3], dtype), np.array([2, 0, 4], dtype)
    check_op(
        tf.div_no_nan,
        [x, y],
        lambda a, b: np.where(b == 0, 0, a / np.where(b == 0, 1, b)).astype(dtype),
    )


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_parts(dtype):
    x = data(dtype, "any")
    real_t = np.float32 if dtype == C64 else np.float64
    check_op(tf.abs, [x], lambda v: np.abs(v).astype(real_t), rtol=1e-6)
    check_op(tf.real, [x], np.real)
    check_op(tf.imag, [x], np.imag)
    check_op(tf.conj, [x], np.conj)
    check_op(tf.complex, [x.real, x.imag], lambda a, b: (a + 1j * b).astype(dtype))
    assert tf.abs(tf.constant(x)).op.type == "ComplexAbs"


def test_complex_parts_of_real_tensors():
    x = tf.constant([1.0, -2.0])
    assert tf.conj(x) is x
    assert tf.real(x) is x
    with tf.Session() as sess:
        assert sess.run(tf.imag(x)).tolist() == [0.0, 0.0]
    with pytest.raises(TypeError, match="incorrect types"):
        tf.complex(tf.constant([1.0]), tf.constant([1.0], tf.float64))
    inf = run(lambda: tf.complex(tf.constant([0.0]), tf.constant([np.inf])), [])
    assert inf[0].real == 0 and inf[0].imag == np.inf


@pytest.mark.parametrize(
    "op_type,formula",
    [
        ("TanhGrad", lambda y, dy: dy * (1 - y * y)),
        ("SigmoidGrad", lambda y, dy: dy * y * (1 - y)),
        ("SqrtGrad", lambda y, dy: dy * 0.5 / y),
        ("RsqrtGrad", lambda y, dy: -0.5 * dy * y * y * y),
        ("ReciprocalGrad", lambda y, dy: -dy * y * y),
    ],
)
@pytest.mark.parametrize("dtype", FC)
def test_gradient_kernels(op_type, formula, dtype):
    from flowgraph.framework.apply_op import apply_op

    y, dy = data(dtype, "pos", seed=3), data(dtype, "any", seed=4)
    fn = lambda a, b: apply_op(op_type, [a, b]).outputs[0]
    check_op(
        fn,
        [y, dy],
        lambda a, b: formula(a, b).astype(dtype),
        rtol=tol(dtype) * 4,
        atol=tol(dtype) * 4,
    )


# -- add_n, where/select, casts ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F16, F32, F64, np.int8, np.int32, np.int64, np.uint8, C64])
def test_add_n(dtype):
    xs = [data(dtype, "any", seed=s) for s in range(3)]
    check_op(
        lambda *t: tf.add_n(list(t)),
        xs,
        lambda *a: (a[0] + a[1] + a[2]).astype(dtype),
        rtol=tol(dtype),
    )


def test_add_n_checks():
    a = tf.constant([1.0, 2.0])
    assert tf.add_n([a]) is a
    assert tf.add_n([a], name="s").op.type == "Identity"
    with pytest.raises(ValueError):
        tf.add_n([a, tf.constant([1.0, 2.0, 3.0])])
    with pytest.raises(TypeError):
        tf.add_n([a, tf.constant([1, 2])])
    with pytest.raises(ValueError):
        tf.add_n([])
    x, y = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    with (
        tf.Session() as sess,
        pytest.raises(errors.InvalidArgumentError, match="same size and shape"),
    ):
        sess.run(tf.add_n([x, y]), {x: [1.0], y: [1.0, 2.0]})


def test_where_one_argument_gives_int64_coordinates():
    c = np.array([[True, False], [False, True], [True, True]])
    out = run(tf.where, [c])
    assert out.dtype == np.int64 and out.tolist() == [[0, 0], [1, 1], [2, 0], [2, 1]]
    assert tf.where(tf.placeholder(tf.bool, [3, 2])).shape.as_list() == [None, 2]
    assert run(tf.where, [np.array([0, 3, 0, 1], np.int32)]).tolist() == [[1], [3]]
    with pytest.raises(ValueError, match="both be non-None"):
        tf.where(tf.constant([True]), x=tf.constant([1]))


def test_select_shapes():
    t, e = np.arange(6, dtype=np.float32).reshape(3, 2), -np.ones((3, 2), np.float32)
    same = np.array([[True, False]] * 3)
    check_op(tf.where, [same, t, e], np.where)
    vec = np.array([True, False, True])
    check_op(tf.where, [vec, t, e], lambda c, a, b: np.where(c[:, None], a, b))
    check_op(tf.where, [np.array(False), t, e], lambda c, a, b: b)
    with pytest.raises(ValueError):
        tf.where(tf.constant([True, False]), tf.constant(t), tf.constant(e))
    c, a, b = tf.placeholder(tf.bool), tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    with (
        tf.Session() as sess,
        pytest.raises(errors.InvalidArgumentError, match="'then' and 'else'"),
    ):
        sess.run(tf.where(c, a, b), {c: [True], a: [1.0], b: [1.0, 2.0]})


def test_where_v2_broadcasts():
    c = np.array([[True], [False]])
    check_op(tf.where_v2, [c, np.float32([1, 2, 3]), np.float32(0)], np.where)
    s = tf.where_v2(tf.placeholder(tf.bool, [2, 1]), tf.placeholder(tf.float32, [3]), 0.0)
    assert s.shape.as_list() == [2, 3] and s.op.type == "SelectV2"


def test_cast_semantics():
    f = np.array([1.7, -1.7, 2.5, -0.2, 0.0], np.float32)
    assert run(lambda x: tf.cast(x, tf.int32), [f]).tolist() == [1, -1, 2, 0, 0]
    assert run(lambda x: tf.cast(x, tf.bool), [f]).tolist() == [True, True, True, True, False]
    assert run(lambda x: tf.cast(x, tf.float32), [np.array([True, False])]).tolist() == [1.0, 0.0]
    c = np.array([1.5 + 2j, -3 - 1j], C64)
    assert run(lambda x: tf.cast(x, tf.float64), [c]).tolist() == [1.5, -3.0]
    assert run(lambda x: tf.cast(x, tf.int32), [c]).tolist() == [1, -3]
    check_op(tf.to_float, [np.array([1, -2], np.int64)], lambda x: x.astype(F32))
    check_op(tf.to_double, [np.array([1, -2], np.int32)], lambda x: x.astype(F64))
    check_op(tf.to_int32, [np.array([1.9, -2.9], F64)], lambda x: x.astype(np.int32))
    check_op(tf.to_int64, [np.array([1.9, -2.9], F32)], lambda x: x.astype(np.int64))
    x = tf.constant([1.0])
    assert tf.cast(x, tf.float32) is x
    assert tf.to_float(tf.constant([1])).op.name == "ToFloat"


@pytest.mark.parametrize(
    "src", [np.bool_, F16, F32, F64, np.int8, np.int32, np.int64, np.uint8, np.uint64, C64]
)
@pytest.mark.parametrize(
    "dst", [np.bool_, F16, F32, F64, np.int8, np.int32, np.int64, np.uint16, C128]
)
def test_cast_dtype_matrix(src, dst):
    x = np.array([0, 1, 3, 7], src)
    want = (x.real if np.dtype(src).kind == "c" and np.dtype(dst).kind != "c" else x).astype(dst)
    assert_close(run(lambda t: tf.cast(t, dst), [x]), want)


def test_cast_truncate_attr_rounds_toward_zero():
    from flowgraph.framework.apply_op import apply_op

    x = np.array([1.0009766, -1.0009766, 65000.0, 3.0], np.float32)  # halfway-ish and near max
    out = run(lambda t: apply_op("Cast", [t], DstT=tf.float16, Truncate=True).outputs[0], [x])
    assert out.dtype == F16
    assert np.all(np.abs(out.astype(F32)) <= np.abs(x)) and out[3] == 3.0
    assert np.all(np.abs(x - out.astype(F32)) < np.abs(np.spacing(out)) * 1.01)


def test_cast_string_is_unimplemented():
    with (
        tf.Session() as sess,
        pytest.raises(errors.UnimplementedError, match="Cast string to float"),
    ):
        sess.run(tf.cast(tf.constant(["1"]), tf.float32))


def test_saturate_cast():
    x = np.array([300.0, -5.0, 3.7, 255.0], np.float32)
    assert run(lambda t: tf.saturate_cast(t, tf.uint8), [x]).tolist() == [255, 0, 3, 255]
    i = np.array([1000, -1000, 5], np.int32)
    assert run(lambda t: tf.saturate_cast(t, tf.int8), [i]).tolist() == [127, -128, 5]
    assert run(lambda t: tf.saturate_cast(t, tf.int64), [i]).tolist() == [1000, -1000, 5]


def test_scalar_mul():
    check_op(lambda x: tf.scalar_mul(2.0, x), [np.float32([1, 2])], lambda x: 2 * x)
    with pytest.raises(ValueError, match="Only scalar multiply"):
        tf.scalar_mul([1.0, 2.0], tf.constant([1.0, 2.0]))


# -- errors and static shapes --------------------------------------------------------------------
@pytest.mark.parametrize(
    "build",
    [
        lambda: tf.sqrt(tf.constant([1, 2])),
        lambda: tf.logical_and(tf.constant([1.0]), tf.constant([1.0])),
        lambda: tf.add(tf.constant([1.0]), tf.constant([1])),
        lambda: tf.floormod(tf.constant([1 + 1j]), tf.constant([1 + 1j])),
        lambda: tf.atan2(tf.constant([1]), tf.constant([1])),
        lambda: tf.less(tf.constant([True]), tf.constant([False])),
        lambda: tf.erf(tf.constant([1 + 1j])),
    ],
)
def test_bad_dtype_is_type_error(build):
    with pytest.raises(TypeError):
        build()


def test_static_shapes():
    a, b = tf.placeholder(tf.float32, [None, 4]), tf.placeholder(tf.float32, [3, 1])
    assert (a + b).shape.as_list() == [3, 4]
    assert tf.less(a, 1.0).shape.as_list() == [None, 4]
    assert tf.exp(a).shape.as_list() == [None, 4]
    assert tf.add(tf.placeholder(tf.float32), a).shape.ndims is None
    with pytest.raises(ValueError):
        tf.add(tf.placeholder(tf.float32, [3]), tf.placeholder(tf.float32, [4]))


def test_runtime_shape_mismatch():
    x, y = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    with (
        tf.Session() as sess,
        pytest.raises(errors.InvalidArgumentError, match=r"Incompatible shapes: \[3\] vs. \[4\]"),
    ):
        sess.run(x * y, {x: np.ones(3), y: np.ones(4)})

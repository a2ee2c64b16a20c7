"""tf.py_func / tf.numpy_function: the PyFunc op calls a registered Python callable."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import py_funcs
from flowgraph.testing.op_test import check_op
from tests.helpers import FIXED_SIZE_DTYPES, dtype_id


@pytest.mark.parametrize("dtype", FIXED_SIZE_DTYPES, ids=dtype_id)
def test_identity_and_arithmetic_on_every_dtype(dtype):
    x = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    t = tf.as_dtype(dtype)
    check_op(lambda a: tf.py_func(lambda v: v, [a], t), [x], lambda v: v)
    if dtype is not np.bool_:
        check_op(lambda a: tf.py_func(lambda v: v * 2 + 1, [a], t), [x], lambda v: v * 2 + 1)


def test_strings_in_and_out():
    words = np.array([b"ab", b"c"], dtype=object)
    check_op(
        lambda a: tf.py_func(
            lambda v: np.array([w.upper() for w in v], dtype=object), [a], tf.string
        ),
        [words],
        lambda v: np.array([b"AB", b"C"], dtype=object),
    )
    seen = []
    name = tf.constant("file.txt")
    out = tf.py_func(lambda s: (seen.append(type(s)), s.decode() + "!")[1], [name], tf.string)
    with tf.Session() as sess:
        assert sess.run(out) == b"file.txt!"  # a str result is encoded as UTF-8
    assert seen == [bytes]  # a string scalar arrives as bytes, as in TF


def test_multiple_outputs_and_list_of_one():
    x = tf.constant([1.0, 2.0])
    a, b = tf.py_func(lambda v: (v + 1, np.int32(v.size)), [x], [tf.float32, tf.int32])
    (c,) = tf.py_func(lambda v: [v * 3], [x], [tf.float32])
    op = tf.py_func(lambda v: None, [x], [])
    assert isinstance(op, tf.Operation) and op.type == "PyFunc" and op.outputs == []
    assert a.shape.ndims is None and b.dtype == tf.int32
    with tf.Session() as sess:
        got = sess.run([a, b, c, op])
    np.testing.assert_array_equal(got[0], np.float32([2, 3]))
    assert got[1].dtype == np.int32 and got[1] == 2
    np.testing.assert_array_equal(got[2], np.float32([3, 6]))
    assert got[3] is None


def test_results_must_have_the_declared_dtypes_exactly():
    """Issue 7 defect 10: TF casts nothing; Python floats are float64 and ints int64."""
    x = tf.constant([1.0, 2.0], dtype=tf.float64)
    same = tf.py_func(lambda v: v, [x], tf.float64)
    half = tf.py_func(lambda v: np.float16(0.5), [x], tf.float16)
    py_int = tf.py_func(lambda v: 7, [x], tf.int64)  # a Python int is an int64
    with tf.Session() as sess:
        a, b, c = sess.run([same, half, py_int])
    assert a.dtype == np.float64 and b.dtype == np.float16 and c.dtype == np.int64
    for result, tout, got in [
        (lambda v: v, tf.float32, "float64"),  # float64 array -> float32: TF raises
        (lambda v: 0.5, tf.float32, "float64"),  # a Python float is a float64
        (lambda v: 7, tf.int32, "int64"),
        (lambda v: np.arange(3), tf.float32, "int64"),
        (lambda v: [np.float32(1), np.array([1, 2])], [tf.float32, tf.int32], "int64"),
    ]:
        y = tf.py_func(result, [x], tout)
        want = tout[-1] if isinstance(tout, list) else tout
        index = len(tout) - 1 if isinstance(tout, list) else 0
        message = f"{index}-th value returned by pyfunc_\\d+ is {got}, but expects {want.name}"
        with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match=message):
            sess.run(y)


@pytest.mark.parametrize(
    "result, tout, message",
    [
        (
            lambda: np.float32(1.5),
            tf.int32,
            "0-th value returned by pyfunc_\\d+ is float32, but expects int32",
        ),
        (lambda: "text", tf.float32, "is string, but expects float32"),
        (lambda: np.array([1, 300]), tf.int8, "is int64, but expects int8"),
        (lambda: [1.0, 2.0], [tf.float32], "returns 2 values, but expects to see 1 values"),
        (lambda: ([[1], [2, 3]],), [tf.float32], "not a rectangular array"),
        (lambda: np.array([1, 2]), tf.string, "is int64, but expects string"),
        (lambda: None, tf.float32, "is .*, but expects float32"),
    ],
)
def test_result_mismatch_is_an_error_naming_the_op(result, tout, message):
    y = tf.py_func(lambda: result(), [], tout, name="my_func")
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match=message) as info:
        sess.run(y)
    assert "my_func" in str(info.value) and "PyFunc" in str(info.value)


@pytest.mark.parametrize(
    "exc, cls",
    [
        (ValueError("bad value"), tf.errors.InvalidArgumentError),
        (TypeError("bad type"), tf.errors.InvalidArgumentError),
        (StopIteration(), tf.errors.OutOfRangeError),
        (NotImplementedError("later"), tf.errors.UnimplementedError),
        (RuntimeError("boom"), tf.errors.UnknownError),
        (tf.errors.NotFoundError(None, None, "no such thing"), tf.errors.NotFoundError),
    ],
)
def test_exceptions_map_to_tf_error_classes(exc, cls):
    def func(v):
        raise exc

    y = tf.py_func(func, [tf.constant(1.0)], tf.float32, name="raiser")
    with tf.Session() as sess, pytest.raises(cls) as info:
        sess.run(y)
    text = str(info.value)
    assert "raiser" in text and str(exc) in text
    if not isinstance(exc, tf.errors.OpError):
        assert type(exc).__name__ in text and "Traceback" in text


def test_inputs_are_private_writable_copies():
    x = tf.constant([1.0, 2.0])

    def scribble(v):
        v[0] = 100.0  # must not corrupt the shared Const value
        return v

    y = tf.py_func(scribble, [x], tf.float32)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(y), [100.0, 2.0])
        np.testing.assert_array_equal(sess.run(x), [1.0, 2.0])


def test_inside_a_while_loop():
    calls = []

    def step(i, acc):
        calls.append(int(i))
        return acc * 2

    def body(i, acc):
        acc = tf.py_func(step, [i, acc], tf.int64)
        acc.set_shape([])
        return i + 1, acc

    _, out = tf.while_loop(lambda i, acc: i < 5, body, [tf.constant(0), tf.constant(1, tf.int64)])
    with tf.Session() as sess:
        assert sess.run(out) == 32
    assert sorted(calls) == [0, 1, 2, 3, 4]


def test_stateful_runs_every_time_and_as_a_target():
    count = []
    x = tf.constant(1.0)
    op = tf.py_func(lambda v: count.append(v), [x], [])
    twin = tf.py_func(lambda v: count.append(v), [x], [])  # identical, but never merged
    y = tf.numpy_function(lambda v: np.float32(len(count)), [x], tf.float32)
    stateless = tf.py_func(lambda v: v, [x], tf.float32, stateful=False)
    assert y.op.type == "PyFunc" and stateless.op.type == "PyFuncStateless"
    with tf.Session() as sess:
        sess.run([op, twin])
        sess.run(op)
        assert len(count) == 3
        assert sess.run(y) == 3.0
        assert sess.run(stateless) == 1.0


def test_not_differentiable():
    x = tf.constant([1.0, 2.0])
    y = tf.py_func(lambda v: v * v, [x], tf.float32)
    assert tf.gradients(tf.reduce_sum(y), x) == [None]


def test_callables_are_released_with_their_graph():
    g = tf.Graph()
    with g.as_default():
        a = tf.py_func(lambda: np.float32(0), [], tf.float32)
        b = tf.py_func(lambda: np.float32(1), [], tf.float32)
    tokens = [a.op.get_attr("token"), b.op.get_attr("token")]
    assert all(callable(py_funcs.lookup(t)) for t in tokens)
    del g, a, b
    gc.collect()
    for t in tokens:
        with pytest.raises(KeyError, match=t):
            py_funcs.lookup(t)


def test_bad_arguments():
    with pytest.raises(TypeError):
        tf.py_func(lambda v: v, tf.constant(1.0), tf.float32)  # inp must be a list
    with pytest.raises(TypeError):
        tf.py_func(lambda v: v, [tf.constant(1.0)], "no_such_dtype")
    with pytest.raises(TypeError):
        tf.py_func("not callable", [tf.constant(1.0)], tf.float32)

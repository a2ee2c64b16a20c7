"""Tensor operator overloads: the ops they build, TF1's names, operand conversion, results."""

import numpy as np
import pytest

import flowgraph as tf


def _eval(t, feed=None):
    with tf.Session() as sess:
        return sess.run(t, feed)


def test_names_and_types_like_tf1():
    x = tf.placeholder(tf.float32, [2], name="x")
    y = tf.placeholder(tf.float32, [2], name="y")
    cases = [
        (x + y, "add", "AddV2"),
        (x + y, "add_1", "AddV2"),
        (x - y, "sub", "Sub"),
        (x * y, "mul", "Mul"),
        (x / y, "truediv", "RealDiv"),
        (x // y, "floordiv", "FloorDiv"),
        (x % y, "mod", "FloorMod"),
        (x**y, "pow", "Pow"),
        (x < y, "Less", "Less"),
        (x <= y, "LessEqual", "LessEqual"),
        (x > y, "Greater", "Greater"),
        (x >= y, "GreaterEqual", "GreaterEqual"),
        (-x, "Neg", "Neg"),
        (abs(x), "Abs", "Abs"),
    ]
    for t, name, op_type in cases:
        assert (t.op.name, t.op.type) == (name, op_type)


def test_python_operands_take_the_tensor_dtype():
    x = tf.placeholder(tf.float32, [2], name="x")
    s = x + 1
    assert s.dtype == tf.float32 and s.op.inputs[1].op.name == "add/y"
    r = 1 - x
    assert r.op.type == "Sub" and r.op.inputs[0].op.name == "sub/x" and r.dtype == tf.float32
    i = tf.constant([1, 2])
    with pytest.raises(TypeError):
        i + 1.5
    v = _eval([x + 1, 2 * x, 1 - x, 6 / x, 7 // x, 7 % x, 2**x, x**2], {x: [2.0, 4.0]})
    assert [a.tolist() for a in v] == [
        [3, 5],
        [4, 8],
        [-1, -3],
        [3, 1.5],
        [3, 1],
        [1, 3],
        [4, 16],
        [4, 16],
    ]


def test_numpy_array_on_the_left_defers_to_tensor():
    x = tf.constant([1.0, 2.0])
    out = np.array([10.0, 20.0], np.float32) + x
    assert out.op.type == "AddV2"
    assert _eval(out).tolist() == [11.0, 22.0]


def test_integer_division_operators():
    a, b = tf.constant([7, -7]), tf.constant([2, 2])
    q = a / b
    assert q.dtype == tf.float64 and q.op.type == "RealDiv"
    assert q.op.inputs[0].op.name == "truediv/Cast"
    got = _eval([q, a // b, a % b])
    assert [g.tolist() for g in got] == [[3.5, -3.5], [3, -4], [1, 1]]


def test_bool_operators():
    a, b = tf.constant([True, True, False]), tf.constant([True, False, False])
    got = _eval([a & b, a | b, a ^ b, ~a, True & b])
    assert [g.tolist() for g in got] == [
        [True, False, False],
        [True, True, False],
        [False, True, False],
        [False, False, True],
        [True, False, False],
    ]
    assert (a & b).op.name == "and_2" and (~a).op.type == "LogicalNot"  # "and", "and_1" above
    with pytest.raises(TypeError):
        ~tf.constant([1])


def test_matmul_operator():
    a = tf.constant([[1.0, 2.0]])
    b = tf.constant([[3.0], [4.0]])
    p = a @ b
    assert p.op.type == "MatMul" and p.op.name == "matmul"
    assert _eval(p).tolist() == [[11.0]]
    assert _eval([[1.0, 1.0]] @ b).tolist() == [[7.0]]


def test_string_concatenation_operator():
    s = tf.constant(["a", "b"]) + "c"
    assert s.op.type == "Add"
    assert _eval(s).tolist() == [b"ac", b"bc"]


def test_equality_is_identity():
    x = tf.constant(1.0)
    assert (x == x) is True and (x != tf.constant(1.0)) is True  # noqa: PLR0124
    assert {x: 1}[x] == 1

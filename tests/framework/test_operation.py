"""Operation and Tensor (whitepaper §2), and convert_to_tensor's TF1 dtype inference."""

from __future__ import annotations

import numpy as np
import pytest

import flowgraph as tf


def test_operation_properties():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([1.0, 2.0], name="a")
        b = tf.placeholder(tf.float32, [2], name="b")
        with tf.control_dependencies([b]), tf.device("/device:CPU:0"):
            c = tf.add(a, b, name="c")
    op = c.op
    assert (op.name, op.type, op.graph, op.device) == ("c", "AddV2", g, "/device:CPU:0")
    assert op.inputs == (a, b) and op.outputs == [c] and op.values() == (c,)
    assert op.control_inputs == []  # b is already a data input
    assert op.get_attr("T") == tf.float32
    with pytest.raises(ValueError, match="no attr named 'nope'"):
        op.get_attr("nope")
    nd = op.node_def
    assert (nd.name, nd.op, list(nd.input), nd.device) == (
        "c",
        "AddV2",
        ["a", "b"],
        "/device:CPU:0",
    )
    assert nd.attr["T"].type == tf.float32.as_datatype_enum
    assert a.op.get_attr("value").tolist() == [1.0, 2.0]
    assert b.op.get_attr("shape").as_list() == [2]
    assert repr(op) == "<tf.Operation 'c' type=AddV2>"


def test_creation_site_is_the_user_line():
    with tf.Graph().as_default():
        c = tf.constant(1.0)  # this line
    file, line, func = c.op.traceback[0]
    assert file == __file__ and func == "test_creation_site_is_the_user_line"
    assert c.op.creation_site() == f"{__file__}:{line} in test_creation_site_is_the_user_line"
    with open(__file__) as f:
        assert "# this line" in f.readlines()[line - 1]


def test_multi_output_op_tensor_names():
    with tf.Graph().as_default():
        x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        parts = tf.split(x, 2, axis=0, name="parts")
    assert [t.name for t in parts] == ["parts:0", "parts:1"]
    assert [t.value_index for t in parts] == [0, 1]
    assert parts[1].op.outputs[1] is parts[1]


def test_tensor_properties_and_set_shape():
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder(tf.float32, [None, 3], name="p")
        q = tf.identity(p, name="q")
        r = tf.identity(p, name="r")
    assert (p.name, p.dtype, p.graph, p.op.name) == ("p:0", tf.float32, g, "p")
    assert p.shape.as_list() == [None, 3] and p.get_shape() is p.shape
    assert p.consumers() == [q.op, r.op]
    q.set_shape([5, None])
    assert q.shape.as_list() == [5, 3]
    with pytest.raises(ValueError, match="not compatible"):
        q.set_shape([4, 3])
    with pytest.raises(ValueError):
        q.set_shape([5, 3, 1])
    assert repr(p) == f"<tf.Tensor 'p:0' shape={p.shape} dtype=float32>"
    assert str(p) == f'Tensor("p:0", shape={p.shape}, dtype=float32)'


def test_tensor_python_protocol_errors():
    with tf.Graph().as_default():
        p = tf.placeholder(tf.float32, [None, 3])
        k = tf.constant([1, 2, 3])
    with pytest.raises(TypeError, match="as a Python `bool`"):
        bool(p)
    with pytest.raises(TypeError, match="`if t is not None:`"):
        if k:
            pass
    with pytest.raises(TypeError, match="len is not well defined"):
        len(k)
    with pytest.raises(TypeError, match="first dimension is known"):
        iter(p)
    with pytest.raises(NotImplementedError, match="symbolic Tensor"):
        np.asarray(p)
    assert p != k and p == p and len({p, k, p}) == 2  # noqa: PLR0124 (identity semantics, hashable)


def test_operation_run_and_tensor_eval():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, name="x")
        y = tf.multiply(x, 3.0)
        with tf.Session() as sess:
            assert y.eval({x: 2.0}) == 6.0
            assert y.op.run({x: 1.0}) is None
            assert y.eval(feed_dict={x: 1.0}, session=sess) == 3.0
    with pytest.raises(ValueError, match="No default session"):
        y.eval({x: 1.0})
    with (
        tf.Session(graph=tf.Graph()) as other,
        pytest.raises(ValueError, match="graph is different"),
    ):
        y.eval({x: 1.0}, session=other)


@pytest.mark.parametrize(
    "value, dtype, shape",
    [
        (1, tf.int32, []),
        (2**31, tf.int64, []),
        (-(2**31) - 1, tf.int64, []),
        ([1, 2**40], tf.int64, [2]),
        (1.5, tf.float32, []),
        ([1, 2.5], tf.float32, [2]),
        (True, tf.bool, []),
        ("text", tf.string, []),
        ([b"a", b"bc"], tf.string, [2]),
        ([[1, 2, 3], [4, 5, 6]], tf.int32, [2, 3]),
        (np.float64(1.0), tf.float64, []),
        (np.arange(4, dtype=np.uint8), tf.uint8, [4]),
        (np.zeros((2, 0), np.float16), tf.float16, [2, 0]),
        (1 + 2j, tf.complex128, []),
    ],
)
def test_convert_to_tensor_infers_tf1_dtypes(value, dtype, shape):
    with tf.Graph().as_default():
        t = tf.convert_to_tensor(value)
        assert t.dtype == dtype and t.shape.as_list() == shape
        got = np.asarray(tf.Session().run(t))
    if dtype == tf.string:
        value = np.char.encode(np.asarray(value).astype(str))  # string tensors hold bytes
    np.testing.assert_array_equal(got, np.asarray(value, dtype=got.dtype))


def test_convert_to_tensor_with_explicit_dtype():
    with tf.Graph().as_default():
        assert tf.convert_to_tensor(1, dtype=tf.float64).dtype == tf.float64
        assert tf.convert_to_tensor([1, 2], dtype=tf.int64).dtype == tf.int64
        assert tf.convert_to_tensor(1, preferred_dtype=tf.int64).dtype == tf.int64
        assert (
            tf.convert_to_tensor(1.5, preferred_dtype=tf.int32).dtype == tf.float32
        )  # a hint only
        with pytest.raises(TypeError, match="Expected int32"):
            tf.convert_to_tensor(1.5, dtype=tf.int32)
        with pytest.raises(TypeError):
            tf.convert_to_tensor("s", dtype=tf.float32)
        x = tf.constant(1.0)
        assert tf.convert_to_tensor(x) is x
        with pytest.raises(ValueError, match="requested dtype int32 for Tensor with dtype float32"):
            tf.convert_to_tensor(x, dtype=tf.int32)
        with pytest.raises(TypeError, match="Operation"):
            tf.convert_to_tensor(x.op)
        with pytest.raises(TypeError):
            tf.convert_to_tensor(object())

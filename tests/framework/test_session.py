"""The client Session (whitepaper §2 "Sessions"): Extend and Run, fetch structures, feeds,
partial execution, pruning to the fetches, errors, default sessions, and Figure 1."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors

Pair = collections.namedtuple("Pair", "first second")


@pytest.fixture
def chain():
    """up -> mid = 2*up -> y = mid + 1, and an unrelated x -> total."""
    g = tf.Graph()
    with g.as_default():
        up = tf.placeholder(tf.float32, name="up")
        mid = tf.multiply(up, 2.0, name="mid")
        y = tf.add(mid, 1.0, name="y")
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        total = tf.reduce_sum(x, name="total")
    return g, up, mid, y, x, total


def test_fetch_structures(chain):
    g, up, _mid, y, x, total = chain
    with tf.Session(graph=g) as sess:
        feed = {up: 1.0, x: [[1, 2], [3, 4]]}
        out = sess.run({"a": [y, (total, y.op)], "b": Pair(y, "total:0"), "c": "y"}, feed)
        assert out == {"a": [3.0, (10.0, None)], "b": Pair(3.0, 10.0), "c": None}
        assert isinstance(out["a"], list) and isinstance(out["a"][1], tuple)
        value = sess.run(y, feed)
        assert isinstance(value, np.float32) and value == 3.0
        arr = sess.run(x, feed)
        assert arr.dtype == np.float32 and arr.flags.writeable
        assert sess.run([], feed) == []
        with pytest.raises(TypeError, match="None"):
            sess.run(None)
        with pytest.raises(ValueError, match="cannot be interpreted as a Tensor"):
            sess.run("nope:0")


def test_feeds_by_tensor_and_by_name_are_checked(chain):
    g, up, mid, y, x, total = chain
    with tf.Session(graph=g) as sess:
        assert sess.run(y, {"up:0": 2.0}) == 5.0
        assert sess.run(total, {"x:0": np.ones((3, 2), np.float64)}) == 6.0  # cast to float32
        with pytest.raises(errors.InvalidArgumentError, match=r"shape \(2, 3\) for Tensor 'x:0'"):
            sess.run(total, {x: np.zeros((2, 3))})
        with pytest.raises(errors.InvalidArgumentError, match="Tensor 'x:0' of dtype float32"):
            sess.run(total, {x: [["a", "b"]]})
        with pytest.raises(TypeError, match="cannot be a tf.Tensor"):
            sess.run(y, {up: mid})
        with pytest.raises(TypeError, match="Cannot interpret feed_dict key"):
            sess.run(y, {"nope:0": 1.0})


def test_feeding_an_intermediate_cuts_everything_upstream(chain):
    g, _up, mid, y, _x, _total = chain
    with tf.Session(graph=g) as sess:
        assert sess.run(y, {mid: 10.0}) == 11.0  # `up` is not fed and is never run
        assert sess.run(mid, {mid: 4.0}) == 4.0  # a fed tensor can be fetched
        with pytest.raises(errors.InvalidArgumentError, match="placeholder tensor 'up'"):
            sess.run(y)


def test_only_the_fetches_closure_runs():
    with tf.Graph().as_default() as g:
        ok = tf.constant(2.0, name="ok")
        unknown = tf.placeholder_with_default([1.0, 2.0, 3.0], shape=None)
        tf.reshape(unknown, [2], name="fails")  # its kernel raises if it runs
        side = tf.add(ok, 1.0, name="side")
    with tf.Session(graph=g) as sess:
        assert sess.run(side) == 3.0
        with pytest.raises(errors.InvalidArgumentError):
            sess.run("fails:0")


def test_extend_ships_only_new_nodes(chain, monkeypatch):
    g, up, _mid, y, _x, _total = chain
    with tf.Session(graph=g) as sess:
        shipped = []
        real = sess._master.extend_session
        monkeypatch.setattr(
            sess._master,
            "extend_session",
            lambda req: (shipped.append(req.graph_def), real(req))[1],
        )
        assert sess.run(y, {up: 1.0}) == 3.0
        assert len(shipped) == 1 and {n.name for n in shipped[0].node} == {
            op.name for op in g.get_operations()
        }
        assert sess.run(y, {up: 2.0}) == 5.0
        assert len(shipped) == 1  # nothing new: no Extend
        before = g.version
        with g.as_default():
            z = tf.multiply(y, 10.0, name="z")
        assert sess.run(z, {up: 1.0}) == 30.0  # an op added after the Session was created runs
        assert len(shipped) == 2
        new = [op.name for op in g.get_operations()[before:]]
        assert [n.name for n in shipped[1].node] == new and "z" in new and "y" not in new


def test_runtime_errors_name_the_node_device_and_line():
    with tf.Graph().as_default() as g:
        v = tf.placeholder(tf.float32, [None], name="v")
        bad = tf.reshape(v, [7], name="bad_reshape")  # the creating line
    with tf.Session(graph=g) as sess, pytest.raises(errors.InvalidArgumentError) as info:
        sess.run(bad, {v: [1.0, 2.0]})
    msg = str(info.value)
    assert "bad_reshape" in msg and "Reshape" in msg and "/device:CPU:0" in msg
    assert f"{__file__}:" in msg and "test_runtime_errors_name_the_node_device_and_line" in msg
    assert info.value.node_def is not None and info.value.node_def.name == "bad_reshape"
    with (
        tf.Session(graph=g) as sess,
        pytest.raises(
            errors.InvalidArgumentError, match="You must feed a value for placeholder tensor 'v'"
        ),
    ):
        sess.run(bad)


def test_default_sessions_context_manager_and_close(chain):
    g, up, _mid, y, _x, _total = chain
    assert tf.get_default_session() is None
    with tf.Session(graph=g) as sess:
        assert tf.get_default_session() is sess and tf.get_default_graph() is g
        assert y.eval({up: 1.0}) == 3.0
    assert tf.get_default_session() is None
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(y, {up: 1.0})
    other = tf.Session(graph=g)
    with other.as_default():
        assert tf.get_default_session() is other and y.eval({up: 0.0}) == 1.0
    other.close()
    other.close()  # closing twice is harmless


def test_interactive_session(chain):
    g, up, _mid, y, _x, _total = chain
    sess = tf.InteractiveSession(graph=g)
    try:
        assert tf.get_default_session() is sess
        assert y.eval({up: 4.0}) == 9.0
        assert y.op.run({up: 4.0}) is None
    finally:
        sess.close()
    assert tf.get_default_session() is None


def test_make_callable(chain):
    g, up, _mid, y, _x, total = chain
    with tf.Session(graph=g) as sess:
        f = sess.make_callable([y, total], feed_list=[up, "x:0"])
        assert f(1.0, [[1.0, 1.0]]) == [3.0, 2.0]
        assert f(2.0, [[0.0, 0.0]]) == [5.0, 0.0]
        with pytest.raises(TypeError, match="Expected 2 feed values"):
            f(1.0)
        g_op = sess.make_callable(y.op, [up])
        assert g_op(1.0) is None


def test_session_on_a_graph_that_is_not_the_default():
    g = tf.Graph()
    with g.as_default():
        c = tf.constant(3.0)
    with tf.Session(graph=g) as sess:
        assert sess.graph is g and sess.run(c) == 3.0
    with tf.Session() as sess, pytest.raises(ValueError, match="not an element of this graph"):
        sess.run(c)


def test_figure_1_of_the_whitepaper():
    """Figure 1: ReLU(Wx + b) on a fed input, then a cost computed from it, run for 10 steps.
    (The paper's W is 784x100 applied to a 100-d x; we keep its sizes with x as a 1x784 row.)"""
    b = tf.Variable(tf.zeros([100]))  # 100-d vector, init to zeroes
    W = tf.Variable(tf.random_uniform([784, 100], -1, 1))  # 784x100 matrix w/ rnd vals
    x = tf.placeholder(tf.float32, name="x")  # Placeholder for input
    relu = tf.nn.relu(tf.matmul(x, W) + b)  # Relu(Wx+b)
    C = tf.reduce_sum(tf.square(relu))  # Cost computed as a function of Relu
    s = tf.Session()
    s.run(tf.global_variables_initializer())
    w_value = s.run(W)
    assert w_value.shape == (784, 100) and -1 <= w_value.min() and w_value.max() < 1
    rng = np.random.RandomState(0)
    for step in range(10):
        inp = rng.rand(1, 784).astype(np.float32)  # construct 784-d input row
        result = s.run(C, feed_dict={x: inp})  # fetch cost, feeding x=input
        want = np.sum(np.maximum(inp @ w_value, 0) ** 2)
        np.testing.assert_allclose(result, want, rtol=1e-4)
    s.close()
    # Figure 2's graph: ReLU <- Add <- (MatMul <- (x, W), b).
    add = relu.op.inputs[0].op
    matmul = add.inputs[0].op
    assert relu.op.type == "Relu" and add.type in ("Add", "AddV2")
    assert matmul.type in (
        "MatMul",
        "BatchMatMulV2",
    )  # TF 1.15 picks BatchMatMulV2: x's rank is unknown
    assert matmul.inputs[0] is x and add.inputs[1].op.inputs[0].op.type == "VariableV2"


def test_fetch_indexed_slices_returns_indexed_slices_value():
    import flowgraph as tf

    p = tf.Variable([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    g = tf.gradients(tf.reduce_sum(tf.gather(p, [0, 2])), p)[0]
    with tf.Session() as s:
        s.run(p.initializer)
        got = s.run({"g": g})["g"]
    assert isinstance(got, tf.IndexedSlicesValue)
    assert got.indices.tolist() == [0, 2] and got.values.tolist() == [[1, 1], [1, 1]]
    assert got.dense_shape.tolist() == [3, 2]

"""Graph functions: Defun tracing into the GraphDef's function library, calls through
PartitionedCall, captured tensors, and the runtime instantiating FunctionDefs."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import FunctionDefLibrary
from flowgraph.framework.function import Defun
from flowgraph.runtime.function import FunctionLibrary


def test_defun_call_matches_numpy_and_captures_outer_tensors():
    a = tf.constant([1.0, 2.0])
    b = tf.constant([3.0, 4.0])
    c = tf.constant(10.0)

    @Defun(tf.float32, tf.float32)
    def add_mul(x, y):
        return x + y * c, x * y

    s, p = add_mul(a, b)
    assert s.op.type == "PartitionedCall"
    with tf.Session() as sess:
        got_s, got_p = sess.run([s, p])
    np.testing.assert_allclose(got_s, np.array([1, 2]) + np.array([3, 4]) * 10)
    np.testing.assert_allclose(got_p, [3.0, 8.0])


def test_library_is_exported_in_tensorflow_notation():
    @Defun(tf.float32)
    def split_sum(x):
        parts = tf.split(x, 2)
        return parts[1] + 1.0

    y = split_sum(tf.constant([1.0, 2.0, 3.0, 4.0]))
    gd = tf.get_default_graph().as_graph_def()
    (fdef,) = gd.library.function
    assert fdef.signature.name == y.op.get_attr("f").name
    inputs = {n.name: list(n.input) for n in fdef.node_def}
    add = next(n for n in fdef.node_def if n.op == "AddV2")
    # an op output is node:output_arg:index; the second piece of a Split is output:1
    assert inputs[add.name][0].endswith(":output:1")
    assert fdef.ret["output_0"] == f"{add.name}:z:0"
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(y), [4.0, 5.0])


def test_imported_graph_def_with_library_runs():
    @Defun(tf.int32)
    def double(x):
        return x * 2

    double(tf.constant([1, 2, 3]), name="call")
    gd = tf.get_default_graph().as_graph_def()
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
        assert len(g.as_graph_def().library.function) == 1
        with tf.Session() as sess:
            np.testing.assert_array_equal(sess.run("call:0"), [2, 4, 6])


def test_runtime_refuses_a_changed_function_under_the_same_name():
    @Defun(tf.float32)
    def f(x):
        return x + 1.0

    f(tf.constant(1.0))
    lib = tf.get_default_graph()._library()
    functions = FunctionLibrary()
    functions.add(lib)
    functions.add(lib)  # the same definition again is fine
    other = FunctionDefLibrary()
    other.CopyFrom(lib)
    other.function[0].node_def[0].op = "Sub"
    with pytest.raises(tf.errors.InvalidArgumentError, match="different function"):
        functions.add(other)


def test_calling_an_undefined_function_is_not_found():
    from flowgraph.core.protos import NameAttrList
    from flowgraph.framework.apply_op import apply_op

    out = apply_op(
        "PartitionedCall",
        [[tf.constant(1.0)]],
        Tin=[tf.float32],
        Tout=[tf.float32],
        f=NameAttrList(name="nope"),
    ).outputs[0]
    with tf.Session() as sess, pytest.raises(tf.errors.NotFoundError, match="nope"):
        sess.run(out)


def test_function_body_error_names_the_node():
    @Defun(tf.float32)
    def bad(x):
        return tf.reshape(x, [5])

    y = bad(tf.constant([1.0, 2.0]))
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match="Reshape"):
        sess.run(y)


def test_defun_gradients_match_numeric_jacobians():
    from flowgraph.testing import gradient_checker

    w = tf.constant([[0.5, -1.0], [2.0, 0.25]])

    @Defun(tf.float32, tf.float32)
    def f(x, y):
        return tf.tanh(tf.matmul(x, w)) * y, tf.reduce_sum(x * x)

    x = tf.placeholder(tf.float32, [3, 2])
    y = tf.placeholder(tf.float32, [3, 2])
    a, b = f(x, y)
    with tf.Session():
        rng = np.random.RandomState(0)
        xv, yv = rng.randn(3, 2).astype(np.float32), rng.randn(3, 2).astype(np.float32)
        err = gradient_checker.compute_gradient_error(
            [x, y], [[3, 2], [3, 2]], a, [3, 2], x_init_value=[xv, yv]
        )
        assert err < 2e-3
        err_b = gradient_checker.compute_gradient_error(
            x, [3, 2], b, [], x_init_value=xv, extra_feed_dict={y: yv}
        )
        assert err_b < 2e-2
    _gx, gw = tf.gradients(a, [x, w])
    assert gw is not None  # the captured tensor gets its gradient too
    with tf.Session() as sess:
        got = sess.run(gw, {x: xv, y: yv})
    h = np.tanh(xv @ np.array([[0.5, -1.0], [2.0, 0.25]]))
    np.testing.assert_allclose(got, xv.T @ ((1 - h * h) * yv), rtol=1e-5)


def test_defun_gradient_of_a_gather_is_dense():
    table = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])

    @Defun(tf.float32, tf.int32)
    def pick(t, i):
        return tf.reduce_sum(tf.gather(t, i))

    (g,) = tf.gradients(pick(table, tf.constant([0, 2, 2])), [table])
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(g), [[1, 1], [0, 0], [2, 2]])

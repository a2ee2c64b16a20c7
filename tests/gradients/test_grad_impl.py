"""tf.gradients itself (whitepaper §4.1): names, paths, aggregation, stopping, overrides."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.testing.gradient_checker import compute_gradient, compute_gradient_error


def _run(fetches, feed=None):
    with tf.Session() as sess:
        return sess.run(fetches, feed)


def test_matmul_add_names_follow_tf1():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.constant(np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
    b = tf.constant([1.0, 2.0], name="b")
    y = tf.matmul(x, w) + b
    dx, dw, db = tf.gradients(y, [x, w, b])
    assert dx.name == "gradients/MatMul_grad/MatMul:0"
    assert dw.name == "gradients/MatMul_grad/MatMul_1:0"
    assert db.name == "gradients/add_grad/Reshape:0"
    g = tf.get_default_graph()
    assert g.get_operation_by_name("gradients/Fill").type == "Fill"
    assert g.get_operation_by_name("gradients/grad_ys_0").type == "Const"
    assert g.get_operation_by_name("gradients/add_grad/Sum").type == "Sum"
    x_val = np.ones((4, 3), np.float32)
    got = _run([g.get_tensor_by_name("gradients/MatMul_grad/MatMul_1:0"), dx, db], {x: x_val})
    np.testing.assert_allclose(got[0], np.full((3, 2), 4.0))
    np.testing.assert_allclose(got[1], np.tile(np.arange(6).reshape(3, 2).sum(1), (4, 1)))
    np.testing.assert_allclose(got[2], [4.0, 4.0])
    again = tf.gradients(y, x)[0]
    assert again.name.startswith("gradients_1/")


def test_broadcast_dynamic_uses_broadcast_gradient_args():
    a = tf.placeholder(tf.float64, [None, 2])
    b = tf.placeholder(tf.float64, [None, 2])
    da, db = tf.gradients(a * b, [a, b])
    ops = {op.type for op in tf.get_default_graph().get_operations()}
    assert "BroadcastGradientArgs" in ops
    av, bv = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[5.0, 6.0]])
    ga, gb = _run([da, db], {a: av, b: bv})
    np.testing.assert_allclose(ga, np.broadcast_to(bv, (2, 2)))
    np.testing.assert_allclose(gb, av.sum(0, keepdims=True))


def test_several_paths_are_summed_with_add_n():
    x = tf.placeholder(tf.float32, [3])
    y = x * x + x
    (dx,) = tf.gradients(y, x)
    assert dx.op.type == "AddN"
    np.testing.assert_allclose(_run(dx, {x: [1.0, 2.0, 3.0]}), [3.0, 5.0, 7.0])


@pytest.mark.parametrize(
    "method",
    [tf.AggregationMethod.EXPERIMENTAL_TREE, tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N],
)
def test_other_aggregation_methods(method):
    x = tf.placeholder(tf.float64, [2])
    y = x * 2.0 + x * 3.0 + x
    (dx,) = tf.gradients(y, x, aggregation_method=method)
    np.testing.assert_allclose(_run(dx, {x: [1.0, 1.0]}), [6.0, 6.0])


def test_bad_aggregation_method():
    x = tf.placeholder(tf.float32, [2])
    with pytest.raises(ValueError, match="aggregation_method"):
        tf.gradients(x * 2.0, x, aggregation_method=7)


def test_unconnected_xs_give_none_or_zeros():
    x = tf.placeholder(tf.float32, [2])
    z = tf.placeholder(tf.float32, [2])
    y = x * 2.0
    assert tf.gradients(y, [x, z])[1] is None
    dz = tf.gradients(y, z, unconnected_gradients="zero")[0]
    np.testing.assert_allclose(_run(dz, {z: [1.0, 1.0]}), [0.0, 0.0])


def test_unconnected_outputs_get_zeros_like():
    x = tf.placeholder(tf.float32, [3, 2])
    parts = tf.unstack(x)
    (dx,) = tf.gradients(parts[1] * 3.0, x)
    names = [op.name for op in tf.get_default_graph().get_operations()]
    assert any(n.startswith("gradients/zeros_like") for n in names)
    np.testing.assert_allclose(_run(dx, {x: np.ones((3, 2), np.float32)}), [[0, 0], [3, 3], [0, 0]])


def test_stop_gradient_op_and_argument():
    x = tf.placeholder(tf.float32, [2])
    a = x * x
    y = tf.stop_gradient(a) + x
    (dx,) = tf.gradients(y, x)
    np.testing.assert_allclose(_run(dx, {x: [2.0, 3.0]}), [1.0, 1.0])
    b = x * x
    y2 = b * x
    (dx2,) = tf.gradients(y2, x, stop_gradients=[b])
    np.testing.assert_allclose(_run(dx2, {x: [2.0, 3.0]}), [4.0, 9.0])


def test_grad_ys_and_type_check():
    x = tf.placeholder(tf.float32, [2])
    y = x * 3.0
    (dx,) = tf.gradients(y, x, grad_ys=tf.constant([1.0, 10.0]))
    np.testing.assert_allclose(_run(dx, {x: [0.0, 0.0]}), [3.0, 30.0])
    (dx2,) = tf.gradients(y, x, grad_ys=np.array([2.0, 2.0], np.float32))
    np.testing.assert_allclose(_run(dx2, {x: [0.0, 0.0]}), [6.0, 6.0])
    with pytest.raises(TypeError, match="must be real"):
        tf.gradients(y, x, grad_ys=tf.constant([1, 2]))
    with pytest.raises(ValueError, match="grad_ys"):
        tf.gradients(y, x, grad_ys=[tf.constant([1.0, 1.0])] * 2)


def test_gather_gives_indexed_slices_and_densifies_on_sum():
    p = tf.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
    idx = tf.constant([3, 0, 3])
    y = tf.reduce_sum(tf.gather(p, idx) * 2.0)
    (g,) = tf.gradients(y, p)
    assert isinstance(g, tf.IndexedSlices)
    assert g.dtype == tf.float32 and g.graph is tf.get_default_graph()
    values, indices, shape = _run([g.values, g.indices, g.dense_shape])
    np.testing.assert_allclose(values, np.full((3, 2), 2.0))
    np.testing.assert_array_equal(indices, [3, 0, 3])
    np.testing.assert_array_equal(shape, [4, 2])
    dense = tf.convert_to_tensor(g)
    assert dense.op.type == "UnsortedSegmentSum"
    np.testing.assert_allclose(_run(dense), [[2, 2], [0, 0], [0, 0], [4, 4]])

    y2 = tf.reduce_sum(tf.gather(p, idx)) + tf.reduce_sum(tf.gather(p, [1]))
    (g2,) = tf.gradients(y2, p)
    assert isinstance(g2, tf.IndexedSlices)  # sparse + sparse stays sparse (concatenated)
    np.testing.assert_array_equal(_run(g2.indices), [3, 0, 3, 1])

    y3 = tf.reduce_sum(tf.gather(p, idx)) + tf.reduce_sum(p * p)
    (g3,) = tf.gradients(y3, p)
    assert isinstance(g3, tf.Tensor)  # sparse + dense densifies
    want = 2 * np.arange(8).reshape(4, 2) + np.array([[1, 1], [0, 0], [0, 0], [2, 2]])
    np.testing.assert_allclose(_run(g3), want)


@pytest.mark.parametrize("kind", ["Gather", "GatherV2", "ResourceGather"])
def test_gather_grads_share_tf_node_names_on_unknown_row_shape(kind):
    """TF's _GatherGrad/_GatherV2Grad/_ResourceGatherGrad node names, in TF's order; int64
    indices give int64 shapes."""
    idx = tf.placeholder(tf.int64)
    rows = np.arange(8, dtype=np.float32).reshape(4, 2)
    if kind == "ResourceGather":
        p = tf.Variable(rows, use_resource=True)
        y, scope, shape_op = p.sparse_read(idx), "gradients/Gather_grad/", "VariableShape"
    else:
        p = tf.placeholder(tf.float32, [None, None])
        y = tf.gather(p, idx) if kind == "Gather" else tf.gather(p, idx, axis=0)
        scope, shape_op = f"gradients/{y.op.name}_grad/", "Shape"
    (g,) = tf.gradients(y, p)
    made = [op.name[len(scope) :] for op in g.graph.get_operations() if op.name.startswith(scope)]
    want = [shape_op, "Size", "ExpandDims", "strided_slice", "concat", "Reshape", "Reshape_1"]
    assert [n for n in made if "/" not in n] == want
    assert g.dense_shape.dtype == tf.int64 and g.indices.dtype == tf.int64
    feed = {idx: [[3, 0], [3, 1]]}
    if kind != "ResourceGather":
        feed[p] = rows
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        values, indices, shape = sess.run([g.values, g.indices, g.dense_shape], feed)
    np.testing.assert_allclose(values, np.ones((4, 2)))
    np.testing.assert_array_equal(indices, [3, 0, 3, 1])
    np.testing.assert_array_equal(shape, [4, 2])


def test_gradient_override_map_and_register_gradient():
    @tf.RegisterGradient("TestOverrideSquare")
    def _custom(op, grad):
        return grad * 100.0

    g = tf.get_default_graph()
    x = tf.placeholder(tf.float32, [1])
    with g.gradient_override_map({"Square": "TestOverrideSquare"}):
        y = tf.square(x)
    plain = tf.square(x)
    assert y.op.get_attr("_gradient_op_type") == "TestOverrideSquare"
    d_override, d_plain = _run([tf.gradients(y, x)[0], tf.gradients(plain, x)[0]], {x: [3.0]})
    np.testing.assert_allclose(d_override, [100.0])
    np.testing.assert_allclose(d_plain, [6.0])


def test_register_gradient_duplicate_names_both_sites():
    tf.RegisterGradient("TestDuplicateOp")(lambda op, g: g)
    with pytest.raises(errors.AlreadyExistsError) as info:
        tf.RegisterGradient("TestDuplicateOp")(lambda op, g: g)
    assert str(info.value).count("test_grad_impl.py") == 2
    with pytest.raises(errors.AlreadyExistsError):
        tf.RegisterGradient("Mul")(lambda op, g: g)


def test_not_differentiable_and_missing_gradient():
    tf.NotDifferentiable("TestNoGradOp")
    x = tf.placeholder(tf.int32, [2])
    y = tf.cast(x, tf.float32)
    assert tf.gradients(y, x)[0] is None  # integer inputs receive no gradient
    from flowgraph.gradients import registry

    assert registry.get_gradient_function("TestNoGradOp") is None
    with pytest.raises(LookupError, match="No gradient defined"):
        registry.get_gradient_function("TestUnknownOp")


def test_second_derivative_of_cube():
    x = tf.placeholder(tf.float64, [3])
    y = x * x * x
    (d1,) = tf.gradients(y, x)
    (d2,) = tf.gradients(d1, x)
    xv = np.array([1.0, -2.0, 0.5])
    got1, got2 = _run([d1, d2], {x: xv})
    np.testing.assert_allclose(got1, 3 * xv**2)
    np.testing.assert_allclose(got2, 6 * xv)


def test_hessian_of_quadratic_form_and_hvp():
    a_val = np.array([[2.0, 1.0, 0.0], [0.5, 3.0, -1.0], [0.0, 2.0, 1.0]])
    a = tf.constant(a_val)
    x = tf.placeholder(tf.float64, [3])
    f = tf.reduce_sum(x * tf.reshape(tf.matmul(a, tf.reshape(x, [3, 1])), [3]))
    (h,) = tf.hessians(f, x)
    v = tf.constant([1.0, -1.0, 2.0], dtype=tf.float64)
    (grad,) = tf.gradients(f, x)
    (hvp,) = tf.gradients(tf.reduce_sum(grad * v), x)
    hv, hvpv = _run([h, hvp], {x: [0.3, -0.2, 0.7]})
    np.testing.assert_allclose(hv, a_val + a_val.T)
    np.testing.assert_allclose(hvpv, (a_val + a_val.T) @ [1.0, -1.0, 2.0])


def test_gate_gradients_groups_with_tuple():
    x = tf.placeholder(tf.float32, [2, 2])
    w = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    dx, dw = tf.gradients(tf.matmul(x, w), [x, w], gate_gradients=True)
    names = [op.name for op in tf.get_default_graph().get_operations()]
    assert "gradients/MatMul_grad/tuple/group_deps" in names
    assert dx.name == "gradients/MatMul_grad/tuple/control_dependency:0"
    got = _run([dx, dw], {x: np.ones((2, 2), np.float32)})
    np.testing.assert_allclose(got[0], [[3, 7], [3, 7]])
    np.testing.assert_allclose(got[1], [[2, 2], [2, 2]])


def test_colocate_gradients_with_ops():
    x = tf.placeholder(tf.float32, [2])
    with tf.device("/cpu:0"):
        y = tf.sin(x)
    (dx,) = tf.gradients(y, x, colocate_gradients_with_ops=True)
    assert dx.op.colocation_groups() == [f"loc:@{y.op.name}".encode()]


def test_gradient_checker_api_lists_and_error():
    x = tf.placeholder(tf.float64, [2, 2])
    w = tf.placeholder(tf.float64, [2])
    y = tf.tanh(x) * w
    init = [np.array([[0.1, 0.2], [0.3, -0.4]]), np.array([1.0, -2.0])]
    with tf.Session() as sess, sess.as_default():
        pairs = compute_gradient([x, w], [[2, 2], [2]], y, [2, 2], x_init_value=init, delta=1e-6)
        assert pairs[0][0].shape == (4, 4) and pairs[1][0].shape == (2, 4)
        for theo, num in pairs:
            np.testing.assert_allclose(theo, num, atol=1e-6)
        err = compute_gradient_error(
            x, [2, 2], y, [2, 2], x_init_value=init[0], delta=1e-6, extra_feed_dict={w: init[1]}
        )
    assert err < 1e-6
    bad = tf.placeholder(tf.int32, [2])
    with pytest.raises(ValueError, match="floating"):
        compute_gradient(bad, [2], tf.cast(bad, tf.float64), [2])


def test_gradients_with_respect_to_variables():
    w = tf.Variable([[1.0, 2.0], [3.0, 4.0]], name="w")
    x = tf.constant([[1.0, 1.0]])
    loss = tf.reduce_sum(tf.matmul(x, w) * 2.0)
    (dw,) = tf.gradients(loss, w)
    assert tf.gradients(loss, tf.assign(w, w * 2.0))[0] is None  # an update is not differentiable
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(dw), [[2.0, 2.0], [2.0, 2.0]])

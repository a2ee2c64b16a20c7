"""tf.Variable: graph structure, collections, initializers, updates, errors, sessions."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors


def _types(graph):
    return {op.name: op.type for op in graph.get_operations()}


def test_graph_structure_and_names():
    v = tf.Variable([1.0, 2.0], name="v")
    g = tf.get_default_graph()
    assert _types(g) == {
        "v/initial_value": "Const",
        "v": "VariableV2",
        "v/Assign": "Assign",
        "v/read": "Identity",
    }
    assert v.name == "v:0" and v.op.name == "v" and v.op.type == "VariableV2"
    assert v.dtype == tf.float32._as_ref and v.dtype.name == "float32_ref"
    assert v.shape.as_list() == [2] and v.get_shape().as_list() == [2]
    assert v.graph is g and v.initializer.name == "v/Assign" and v.value().name == "v/read:0"
    assert v.initial_value.name == "v/initial_value:0"
    assert v.initializer.get_attr("validate_shape") is True
    for name in ("v/Assign", "v/read"):
        assert g.get_operation_by_name(name).get_attr("_class") == ["loc:@v"]
    assert repr(v) == "<tf.Variable 'v:0' shape=(2,) dtype=float32_ref>"
    assert v._as_graph_element() is v.op.outputs[0]


def test_default_and_unique_names():
    a = tf.Variable(1.0)
    b = tf.Variable(2.0)
    c = tf.Variable(3.0, name="x")
    d = tf.Variable(4.0, name="x")
    assert [a.name, b.name, c.name, d.name] == ["Variable:0", "Variable_1:0", "x:0", "x_1:0"]
    assert d.initializer.name == "x_1/Assign"


def test_callable_initial_value_is_built_in_scope_and_colocated():
    v = tf.Variable(
        lambda: (
            tf.zeros([2, 3]) if hasattr(tf, "zeros") else tf.constant(np.zeros((2, 3), np.float32))
        ),
        name="w",
    )
    ops = [
        op for op in tf.get_default_graph().get_operations() if op.name.startswith("w/Initializer/")
    ]
    assert ops and all(op.get_attr("_class") == ["loc:@w"] for op in ops)
    assert v.initial_value.op in ops and v.shape.as_list() == [2, 3]


def test_dtype_argument_and_mismatch():
    v = tf.Variable([1, 2], dtype=tf.float64)
    assert v.dtype.base_dtype == tf.float64
    with pytest.raises((TypeError, ValueError)):
        tf.Variable(tf.constant([1, 2]), dtype=tf.float32)


def test_argument_errors():
    with pytest.raises(ValueError, match="initial_value must be specified"):
        tf.Variable()
    with pytest.raises(ValueError, match="collections argument"):
        tf.Variable(1.0, collections="bad")
    with pytest.raises(ValueError, match="constraint"):
        tf.Variable(1.0, constraint=3)
    with pytest.raises(ValueError, match="ON_READ"):
        tf.Variable(1.0, trainable=True, synchronization=tf.VariableSynchronization.ON_READ)
    with pytest.raises(ValueError, match="aggregation"):
        tf.Variable(1.0, aggregation="weird")
    with pytest.raises(ValueError, match="expected_shape"):
        tf.Variable([1.0, 2.0], expected_shape=[3])
    with pytest.raises(ValueError, match="shape"):
        tf.Variable([1.0, 2.0], shape=[3])


def test_on_read_defaults_to_not_trainable():
    v = tf.Variable(
        1.0,
        synchronization=tf.VariableSynchronization.ON_READ,
        aggregation=tf.VariableAggregation.SUM,
    )
    assert not v.trainable and v.aggregation == tf.VariableAggregation.SUM
    assert tf.trainable_variables() == []


def test_validate_shape_false_allows_reshaping_assign():
    v = tf.Variable([1.0, 2.0], validate_shape=False)
    assert v.shape.ndims is None
    grow = tf.assign(v, [1.0, 2.0, 3.0], validate_shape=False)
    with tf.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(grow), [1.0, 2.0, 3.0])


def test_collections():
    a = tf.Variable(1.0, name="a")
    b = tf.Variable(2.0, name="b", trainable=False)
    c = tf.Variable(3.0, name="c", collections=[tf.GraphKeys.LOCAL_VARIABLES])
    d = tf.Variable(4.0, name="d", collections=[tf.GraphKeys.MODEL_VARIABLES], trainable=False)
    assert tf.global_variables() == [a, b] == tf.all_variables()
    assert tf.trainable_variables() == [a, c]
    assert tf.local_variables() == [c]
    assert tf.model_variables() == [d]
    assert tf.moving_average_variables() == []
    assert tf.global_variables(scope="b") == [b]


def test_initializers_group_all_variables():
    a = tf.Variable(1.0, name="a")
    b = tf.Variable(2.0, name="b")
    loc = tf.Variable(3.0, name="loc", collections=[tf.GraphKeys.LOCAL_VARIABLES])
    init = tf.global_variables_initializer()
    assert init.name == "init" and init.type == "NoOp"
    assert set(init.control_inputs) == {a.initializer, b.initializer}
    local = tf.local_variables_initializer()
    assert local.name == "init_1" and local.control_inputs == [loc.initializer]
    empty = tf.variables_initializer([], name="nothing")
    assert empty.name == "nothing" and empty.control_inputs == []
    assert tf.initialize_all_variables().type == "NoOp"
    with tf.Session() as sess:
        sess.run([init, local])
        assert sess.run([a, b, loc]) == [1.0, 2.0, 3.0]


def test_uninitialized_read_fails_naming_variable():
    v = tf.Variable([1.0], name="weights")
    y = v * 2.0
    with tf.Session() as sess:
        with pytest.raises(errors.FailedPreconditionError, match="uninitialized value weights"):
            sess.run(y)
        with pytest.raises(errors.FailedPreconditionError, match="weights"):
            sess.run(v)


def test_state_persists_across_runs_and_new_session_is_uninitialized():
    v = tf.Variable(0, name="counter")
    inc = tf.assign_add(v, 1)
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert [sess.run(inc) for _ in range(3)] == [1, 2, 3]
        assert sess.run(v) == 3
    with tf.Session() as sess:
        assert not sess.run(tf.is_variable_initialized(v))
        with pytest.raises(errors.FailedPreconditionError):
            sess.run(v)


def test_assign_methods_and_read_value():
    v = tf.Variable([1.0, 2.0])
    a = v.assign([5.0, 6.0])
    add = v.assign_add([1.0, 1.0])
    sub = v.assign_sub([0.5, 0.5], read_value=False)
    assert a.dtype == tf.float32._as_ref and a.op.type == "Assign"
    assert sub.type == "AssignSub"
    r = v.read_value()
    assert r.op.type == "Identity" and r.dtype == tf.float32
    with tf.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(a), [5.0, 6.0])
        np.testing.assert_array_equal(sess.run(add), [6.0, 7.0])
        sess.run(sub)
        np.testing.assert_array_equal(sess.run(r), [5.5, 6.5])


def test_assign_shape_errors():
    v = tf.Variable([1.0, 2.0])
    with pytest.raises(errors.InvalidArgumentError):
        v.assign([1.0, 2.0, 3.0])  # static shapes disagree
    p = tf.placeholder(tf.float32)
    a = v.assign(p)
    add = v.assign_add(p)
    with tf.Session() as sess:
        sess.run(v.initializer)
        with pytest.raises(errors.InvalidArgumentError, match="shapes"):
            sess.run(a, {p: [1.0, 2.0, 3.0]})
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(add, {p: [1.0, 2.0, 3.0]})


@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, np.float64, np.int32, np.int64, np.complex64]
)
def test_assign_add_sub_dtypes(dtype):
    init = np.array([1, 2, 3], dtype)
    delta = np.array([4, 5, 6], dtype)
    v = tf.Variable(init)
    add, sub = tf.assign_add(v, delta), tf.assign_sub(v, delta)
    with tf.Session() as sess:
        sess.run(v.initializer)
        got = sess.run(add)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, init + delta)
        np.testing.assert_array_equal(sess.run(sub), init)


def test_assign_rejects_non_ref():
    with pytest.raises(TypeError, match="mutable"):
        tf.assign(tf.constant(1.0), 2.0)


def test_initialized_value_and_dependent_initial_value():
    """TF1: initialized_value is cond(is_variable_initialized(w), read w, w's initial value)."""
    w = tf.Variable([1.0, 2.0], name="w")
    w2 = tf.Variable(w.initialized_value() * 2.0, name="w2")
    with tf.Session() as sess:
        sess.run(w2.initializer)  # w is not initialized: its initial value is used
        np.testing.assert_array_equal(sess.run(w2), [2.0, 4.0])
        with pytest.raises(tf.errors.FailedPreconditionError, match="w"):
            sess.run(w)  # and w itself was left alone
        sess.run(w.initializer)
        sess.run(w.assign([5.0, 6.0]))
        sess.run(w2.initializer)  # now w's current value is used
        np.testing.assert_array_equal(sess.run(w2), [10.0, 12.0])


def test_eval_load_and_default_session():
    v = tf.Variable([1.0, 2.0])
    with tf.Session() as sess:
        sess.run(v.initializer)
        v.load([3.0, 4.0])
        np.testing.assert_array_equal(v.eval(), [3.0, 4.0])
        np.testing.assert_array_equal(v.eval(session=sess), [3.0, 4.0])
    with pytest.raises(ValueError, match="session"):
        v.load([1.0, 1.0])


def test_conversion_and_overloads():
    v = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    assert tf.convert_to_tensor(v) is v.value()
    from flowgraph.framework.convert import convert_to_tensor

    assert convert_to_tensor(v, as_ref=True) is v.op.outputs[0]
    with pytest.raises(ValueError, match="Incompatible type conversion"):
        convert_to_tensor(v, dtype=tf.int32)
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    exprs = [
        v + 1.0,
        1.0 + v,
        v - 1.0,
        2.0 * v,
        v * v,
        v @ v,
        tf.identity(v),
        -v,
        v[0],
        v / 2.0,
        v**2,
        v > 2.0,
    ]
    with tf.Session() as sess:
        sess.run(v.initializer)
        got = sess.run(exprs)
    wants = [x + 1, 1 + x, x - 1, 2 * x, x * x, x @ x, x, -x, x[0], x / 2, x**2, x > 2]
    for g, want in zip(got, wants):
        np.testing.assert_allclose(g, want)
    with pytest.raises(TypeError, match="not iterable"):
        iter(v)


def test_control_dependencies_on_variable():
    v = tf.Variable(1.0)
    with tf.get_default_graph().control_dependencies([v.initializer]):
        y = tf.identity(v.op.outputs[0])
    with tf.Session() as sess:
        assert sess.run(y) == 1.0


def test_count_up_to():
    v = tf.Variable(0, name="c")
    up = v.count_up_to(2)
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert [sess.run(up), sess.run(up)] == [0, 1]
        with pytest.raises(errors.OutOfRangeError, match="limit of 2"):
            sess.run(up)
        assert sess.run(v) == 2
    with pytest.raises(TypeError):
        tf.count_up_to(tf.Variable(0.0), 3)


def test_report_uninitialized_variables():
    a = tf.Variable(1.0, name="a")
    b = tf.Variable(2.0, name="b")
    report = tf.report_uninitialized_variables()
    assert report.dtype == tf.string
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(report), [b"a", b"b"])
        sess.run(a.initializer)
        np.testing.assert_array_equal(sess.run(report), [b"b"])
        sess.run(b.initializer)
        assert sess.run(report).shape == (0,)


def test_report_uninitialized_without_variables():
    with tf.Session() as sess:
        assert sess.run(tf.report_uninitialized_variables()).shape == (0,)
    assert tf.assert_variables_initialized() is None


def test_assert_variables_initialized():
    a = tf.Variable([1.0], name="a")
    b = tf.Variable([[2.0]], name="b")
    check = tf.assert_variables_initialized()
    with tf.Session() as sess:
        with pytest.raises(errors.FailedPreconditionError):
            sess.run(check)
        sess.run([a.initializer, b.initializer])
        np.testing.assert_array_equal(sess.run(check), [1, 2])


def test_caching_device_places_snapshot():
    v = tf.Variable(1.0, caching_device="/cpu:0")
    assert "CPU:0" in v.value().device.upper() or v.value().device.endswith("cpu:0")


def test_constraint_is_exposed():
    def clip(x):
        return x

    assert tf.Variable(1.0, constraint=clip).constraint is clip


def test_to_proto_and_from_proto_round_trip():
    v = tf.Variable([1.0, 2.0], name="scope/v", trainable=False)
    var_def = v.to_proto()
    assert var_def.variable_name == "scope/v:0"
    assert var_def.initializer_name == "scope/v/Assign"
    assert var_def.snapshot_name == "scope/v/read:0"
    assert var_def.initial_value_name == "scope/v/initial_value:0"
    assert not var_def.trainable and not var_def.is_resource
    same = tf.Variable.from_proto(var_def)
    assert same.name == v.name and same.initializer is v.initializer and same.value() is v.value()
    assert same.initial_value is v.initial_value and not same.trainable
    stripped = v.to_proto(export_scope="scope")
    assert stripped.variable_name == "v:0" and stripped.initializer_name == "v/Assign"
    assert v.to_proto(export_scope="other") is None
    again = tf.Variable(variable_def=stripped, import_scope="scope")
    with tf.Session() as sess:
        sess.run(again.initializer)
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])
    with pytest.raises(ValueError, match="mutually exclusive"):
        tf.Variable(1.0, variable_def=var_def)

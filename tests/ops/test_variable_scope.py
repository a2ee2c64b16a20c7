"""variable_scope / get_variable: TF1 names, reuse rules, inheritance, custom getters."""

import numpy as np
import pytest

import flowgraph as tf


def _init_and_run(fetches):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(fetches)


def test_names_and_collections():
    with tf.variable_scope("x"):
        w = tf.get_variable("w", [3, 4])
        c = tf.get_variable("c", [2], trainable=False)
    assert w.name == "x/w:0" and w.op.name == "x/w"
    assert w in tf.trainable_variables() and c not in tf.trainable_variables()
    assert c in tf.global_variables()


def test_reuse_true_returns_same_variable_and_missing_is_error():
    with tf.variable_scope("x"):
        w = tf.get_variable("w", [3, 4])
    with tf.variable_scope("x", reuse=True):
        assert tf.get_variable("w", [3, 4]) is w
        with pytest.raises(
            ValueError, match="Variable x/v does not exist, or was not created with tf.get_variable"
        ):
            tf.get_variable("v", [1])


def test_existing_without_reuse_is_error():
    with tf.variable_scope("x"):
        tf.get_variable("w", [3])
    with (
        pytest.raises(
            ValueError,
            match="Variable x/w already exists, disallowed. Did you mean to set reuse=True",
        ),
        tf.variable_scope("x"),
    ):
        tf.get_variable("w", [3])


def test_auto_reuse_and_reuse_variables():
    for _ in range(2):
        with tf.variable_scope("a", reuse=tf.AUTO_REUSE):
            w = tf.get_variable("w", [2])
    assert len(tf.global_variables()) == 1
    with tf.variable_scope("b") as scope:
        v = tf.get_variable("v", [2])
        scope.reuse_variables()
        assert tf.get_variable("v", [2]) is v
        assert tf.get_variable_scope().reuse is True
    assert w.name == "a/w:0"


def test_reuse_inherited_by_nested_scopes_and_false_does_not_override():
    with tf.variable_scope("o"), tf.variable_scope("i"):
        w = tf.get_variable("w", [1])
    with tf.variable_scope("o", reuse=True), tf.variable_scope("i", reuse=False):
        assert tf.get_variable("w", [1]) is w


def test_shape_and_dtype_mismatch_on_reuse():
    with tf.variable_scope("x"):
        tf.get_variable("w", [3, 4])
    with tf.variable_scope("x", reuse=True):
        with pytest.raises(ValueError, match="Trying to share variable x/w, but specified shape"):
            tf.get_variable("w", [4, 3])
        with pytest.raises(ValueError, match="specified dtype float64 and found dtype float32"):
            tf.get_variable("w", [3, 4], dtype=tf.float64)


def test_reenter_scope_object_opens_new_name_scope():
    with tf.variable_scope("x") as scope:
        a = tf.constant(1.0, name="c")
    with tf.variable_scope(scope):
        b = tf.constant(1.0, name="c")
        w = tf.get_variable("w", [1])
    assert a.op.name == "x/c" and b.op.name == "x_1/c" and w.op.name == "x/w"
    assert scope.original_name_scope == "x/"


def test_default_name_is_made_unique():
    names = []
    for _ in range(3):
        with tf.variable_scope(None, default_name="layer"):
            names.append(tf.get_variable("w", [1]).op.name)
    assert names == ["layer/w", "layer_1/w", "layer_2/w"]
    with (
        pytest.raises(ValueError, match="reuse=True cannot be used without a name_or_scope"),
        tf.variable_scope(None, default_name="z", reuse=True),
    ):
        pass
    with pytest.raises(TypeError):
        tf.variable_scope(None)


def test_variable_names_ignore_name_scope():
    with tf.name_scope("ns"), tf.variable_scope("vs"):
        w = tf.get_variable("w", [1])
        c = tf.constant(0.0, name="c")
    assert w.op.name == "vs/w" and c.op.name == "ns/vs/c"


def test_default_initializers_glorot_uniform_and_zeros():
    w = tf.get_variable("w", [30, 50])
    i = tf.get_variable("i", [4], dtype=tf.int32)
    b = tf.get_variable("b", [3], dtype=tf.bool)
    wv, iv, bv = _init_and_run([w, i, b])
    limit = np.sqrt(6.0 / 80)
    assert np.abs(wv).max() <= limit and np.abs(wv).max() > 0.8 * limit
    np.testing.assert_array_equal(iv, np.zeros(4, np.int32))
    np.testing.assert_array_equal(bv, np.zeros(3, bool))
    with pytest.raises(
        ValueError, match="An initializer for variable s of string is required|initializer"
    ):
        tf.get_variable("c", [2], dtype=tf.complex64)


def test_scope_initializer_dtype_and_regularizer_inherit():
    reg = lambda v: tf.multiply(2.0, tf.reduce_sum(v), name="reg")
    with (
        tf.variable_scope(
            "s", initializer=tf.constant_initializer(3.0), regularizer=reg, dtype=tf.float64
        ),
        tf.variable_scope("t"),
    ):
        w = tf.get_variable("w", [2])
        u = tf.get_variable("u", [2], initializer=tf.ones_initializer())
    assert w.dtype.base_dtype == tf.float64
    losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert len(losses) == 2 and losses[0].op.name == "s/t/w/Regularizer/reg"
    wv, uv, lv = _init_and_run([w, u, losses[0]])
    np.testing.assert_array_equal(wv, [3.0, 3.0])
    np.testing.assert_array_equal(uv, [1.0, 1.0])
    assert lv == 12.0


def test_constant_initializer_value_and_shape_rules():
    v = tf.get_variable("v", initializer=np.arange(4, dtype=np.float32).reshape(2, 2))
    assert v.get_shape().as_list() == [2, 2]
    with pytest.raises(ValueError, match="If initializer is a constant, do not specify shape"):
        tf.get_variable("v2", [2, 2], initializer=np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="don't match"):
        tf.get_variable("v3", dtype=tf.float64, initializer=np.zeros(2, np.float32))
    np.testing.assert_array_equal(_init_and_run(v), [[0, 1], [2, 3]])


def test_custom_getters_nest():
    calls = []

    def outer(getter, name, *args, **kwargs):
        calls.append(("outer", name))
        return getter(name, *args, **kwargs)

    def inner(getter, name, *args, **kwargs):
        calls.append(("inner", name))
        return getter(name, *args, **kwargs)

    with (
        tf.variable_scope("a", custom_getter=outer),
        tf.variable_scope("b", custom_getter=inner),
    ):
        w = tf.get_variable("w", [1])
    assert w.op.name == "a/b/w"
    assert calls == [("inner", "a/b/w"), ("outer", "a/b/w")]
    with pytest.raises(ValueError, match="custom_getter"):
        tf.variable_scope("c", custom_getter=3)


def test_partitioner_makes_a_partitioned_variable():
    p = tf.get_variable("p", [10, 2], partitioner=lambda shape, dtype: [2, 1])
    assert [v.op.name for v in p] == ["p/part_0", "p/part_1"]
    with pytest.raises(ValueError, match="one dimension"):
        tf.get_variable("q", [10, 2], partitioner=lambda shape, dtype: [2, 2])


def test_store_is_per_graph_and_local_variables():
    g1, g2 = tf.Graph(), tf.Graph()
    with g1.as_default():
        tf.get_variable("w", [1])
    with g2.as_default():
        tf.get_variable("w", [1])  # no clash: a different graph
        lv = tf.get_local_variable("l", [2])
        assert lv in tf.local_variables() and lv not in tf.global_variables()
        assert lv not in tf.trainable_variables()

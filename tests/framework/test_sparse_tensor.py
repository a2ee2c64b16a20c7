"""tf.SparseTensor / SparseTensorValue / sparse_placeholder, and SparseTensors through
Session.run (fetched as SparseTensorValue, fed from a value or an (indices, values, shape)
triple), with TF 1.15's names and static shapes."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.framework.sparse_tensor import is_sparse


def test_sparse_tensor_components_names_and_static_shape():
    st = tf.SparseTensor([[0, 1], [2, 3]], [1.0, 2.0], [3, 4])
    assert st.indices.name == "SparseTensor/indices:0"
    assert st.values.name == "SparseTensor/values:0"
    assert st.dense_shape.name == "SparseTensor/dense_shape:0"
    assert st.indices.dtype == tf.int64 and st.dense_shape.dtype == tf.int64
    assert st.dtype == tf.float32 and st.op is st.values.op
    assert st.shape.as_list() == [3, 4] and st.get_shape().as_list() == [3, 4]
    assert is_sparse(st) and is_sparse(tf.SparseTensorValue(1, 2, 3)) and not is_sparse(1)


def test_sparse_tensor_checks_component_ranks():
    with pytest.raises(ValueError):
        tf.SparseTensor([0, 1], [1.0, 2.0], [3, 4])  # indices must be a matrix
    with pytest.raises(ValueError):
        tf.SparseTensor([[0, 1]], [1.0, 2.0], [3, 4])  # 1 index row for 2 values


def test_fetch_returns_sparse_tensor_value():
    st = tf.SparseTensor([[0, 1], [2, 3]], np.array([1, 2], np.int32), [3, 4])
    with tf.Session() as sess:
        v = sess.run(st)
        nested = sess.run({"a": [st, st.values]})
        assert st.eval(session=sess).dense_shape.tolist() == [3, 4]
    assert isinstance(v, tf.SparseTensorValue)
    np.testing.assert_array_equal(v.indices, [[0, 1], [2, 3]])
    assert v.values.dtype == np.int32 and v.values.tolist() == [1, 2]
    assert v.dense_shape.tolist() == [3, 4]
    assert isinstance(nested["a"][0], tf.SparseTensorValue)


def test_sparse_placeholder_partial_shape_is_a_default():
    sp = tf.sparse_placeholder(tf.float32, shape=[3, None], name="sp")
    assert sp.shape.as_list() == [3, None]
    assert sp.indices.name == "sp/indices:0" and sp.values.name == "sp/values:0"
    assert sp.dense_shape.name == "sp/shape:0"
    assert sp.dense_shape.op.type == "PlaceholderWithDefault"
    assert sp.indices.shape.as_list() == [None, 2]
    free = tf.sparse_placeholder(tf.int32)
    assert free.shape.ndims is None and free.dense_shape.op.type == "Placeholder"


def test_sparse_placeholder_feeds():
    sp = tf.sparse_placeholder(tf.float32)
    dense = tf.sparse_tensor_to_dense(sp)
    want = np.zeros((3, 5), np.float32)
    want[0, 0], want[1, 2] = 1, 2
    with tf.Session() as sess:
        for value in (
            ([[0, 0], [1, 2]], [1.0, 2.0], [3, 5]),
            tf.SparseTensorValue(np.array([[0, 0], [1, 2]]), np.array([1.0, 2.0]), [3, 5]),
        ):
            np.testing.assert_array_equal(sess.run(dense, {sp: value}), want)
        back = sess.run(sp, {sp: ([[0, 0], [1, 2]], [1.0, 2.0], [3, 5])})
        empty = sess.run(dense, {sp: ([], [], [2, 2])})
        with pytest.raises(TypeError):
            sess.run(dense, {sp: np.zeros(3)})
    assert back.values.dtype == np.float32 and back.dense_shape.tolist() == [3, 5]
    np.testing.assert_array_equal(empty, np.zeros((2, 2), np.float32))


def test_sparse_tensor_is_not_silently_densified():
    st = tf.SparseTensor([[0, 0]], [1.0], [2, 2])
    with pytest.raises(TypeError, match="SparseTensor"):
        tf.add(st, 1.0)


def test_from_value_and_convert_to_tensor_or_sparse_tensor():
    value = tf.SparseTensorValue([[1]], [5], [3])
    st = tf.convert_to_tensor_or_sparse_tensor(value)
    assert isinstance(st, tf.SparseTensor) and st.shape.as_list() == [3]
    assert tf.SparseTensor.from_value(value).dtype == tf.int32
    with tf.Session() as sess:
        assert sess.run(tf.sparse.to_dense(st)).tolist() == [0, 5, 0]


def test_make_callable_feeds_a_sparse_placeholder():
    sp = tf.sparse_placeholder(tf.float32, shape=[2, 3])
    total = tf.sparse_reduce_sum(sp)
    with tf.Session() as sess:
        run = sess.make_callable(total, [sp])
        assert run(([[0, 0], [1, 2]], [1.5, 2.0], [2, 3])) == 3.5
        assert run(tf.SparseTensorValue([[1, 1]], [4.0], [2, 3])) == 4.0


def test_partial_run_feeds_a_sparse_placeholder():
    sp = tf.sparse_placeholder(tf.float32, shape=[2, 2])
    scale = tf.placeholder(tf.float32, [])
    total = tf.sparse_reduce_sum(sp) * scale
    with tf.Session() as sess:
        handle = sess.partial_run_setup([total], [sp, scale])
        got = sess.partial_run(handle, total, {sp: ([[0, 1]], [2.0], [2, 2]), scale: 3.0})
    assert got == 6.0

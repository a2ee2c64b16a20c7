"""tf.sets: values recorded from TensorFlow 2.21's tf.compat.v1, every dtype against Python's
set operations row by row, and TensorFlow's errors."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors

A = [[[1, 2, 2], [3, 4, 5]], [[5, 6, 7], [8, 8, 8]]]
B = [[[2, 9, 1], [5, 5, 0]], [[7, 5, 6], [1, 2, 3]]]


def _sparse_a():
    values = tf.constant([2, 7, 3, 5, 5], tf.int64)
    return tf.SparseTensor(
        [[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0], [1, 0, 2]], values, [2, 2, 3]
    )


def _run(sparse):
    with tf.Session() as sess:
        r = sess.run(sparse)
    return r.indices.tolist(), r.values.tolist(), r.dense_shape.tolist()


def test_dense_and_sparse_operations_match_tensorflow():
    a, b = tf.constant(A, tf.int64), tf.constant(B, tf.int64)
    inter = _run(tf.sets.set_intersection(a, b))
    assert inter[1] == [1, 2, 5, 5, 6, 7] and inter[2] == [2, 2, 3]
    assert inter[0] == [[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0], [1, 0, 1], [1, 0, 2]]
    union = _run(tf.sets.set_union(a, b))
    assert union[1] == [1, 2, 9, 0, 3, 4, 5, 5, 6, 7, 1, 2, 3, 8] and union[2] == [2, 2, 4]
    assert _run(tf.sets.set_difference(a, b)) == (
        [[0, 1, 0], [0, 1, 1], [1, 1, 0]],
        [3, 4, 8],
        [2, 2, 2],
    )
    assert _run(tf.sets.difference(a, b, aminusb=False))[1:] == ([9, 0, 1, 2, 3], [2, 2, 3])
    expected = ([[0, 0, 0], [0, 1, 0], [1, 0, 0]], [2, 3, 5], [2, 2, 1])
    assert _run(tf.sets.set_intersection(a, _sparse_a())) == expected
    assert _run(tf.sets.intersection(_sparse_a(), a)) == expected
    # sparse minus dense runs as dense "b-a" sparse
    assert _run(tf.sets.set_difference(_sparse_a(), a)) == ([[0, 0, 0]], [7], [2, 2, 1])
    assert _run(tf.sets.union(_sparse_a(), _sparse_a()))[1:] == ([2, 7, 3, 5], [2, 2, 2])
    empty = _run(tf.sets.set_intersection([[1], [2]], [[3], [4]]))
    assert empty == ([], [], [2, 0])


def test_strings_and_set_size():
    dense = tf.constant([[b"a", b"b"], [b"x", b"x"], [b"b", b"b"]])
    sparse = tf.SparseTensor(
        tf.constant([[0, 0], [0, 1], [2, 0]], tf.int64), tf.constant([b"a", b"c", b"b"]), [3, 2]
    )
    assert _run(tf.sets.set_union(dense, sparse)) == (
        [[0, 0], [0, 1], [0, 2], [1, 0], [2, 0]],
        [b"a", b"b", b"c", b"x", b"b"],
        [3, 3],
    )
    assert _run(tf.sets.set_difference(dense, sparse))[1:] == ([b"b", b"x"], [3, 1])
    sizes = [tf.sets.set_size(_sparse_a()), tf.sets.size(sparse)]
    assert sizes[0].dtype == tf.int32
    with tf.Session() as sess:
        got = sess.run(sizes)
    assert got[0].tolist() == [[2, 1], [1, 0]] and got[1].tolist() == [2, 0, 1]


@pytest.mark.parametrize(
    "dtype", [tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8, tf.uint16, tf.string]
)
def test_every_dtype_against_python_sets(dtype):
    rng = np.random.RandomState(7)
    x, y = rng.randint(0, 6, size=(2, 3, 5)), rng.randint(0, 6, size=(2, 3, 4))
    if dtype == tf.string:
        x, y = x.astype(str).astype(object), y.astype(str).astype(object)
        x, y = np.vectorize(str.encode)(x).astype(object), np.vectorize(str.encode)(y)
    ops = {
        "intersection": tf.sets.set_intersection(tf.constant(x, dtype), tf.constant(y, dtype)),
        "union": tf.sets.set_union(tf.constant(x, dtype), tf.constant(y, dtype)),
        "a-b": tf.sets.set_difference(tf.constant(x, dtype), tf.constant(y, dtype)),
    }
    python = {"intersection": set.intersection, "union": set.union, "a-b": set.difference}
    with tf.Session() as sess:
        results = sess.run(ops)
    for name, r in results.items():
        assert r.values.dtype == (object if dtype == tf.string else dtype.as_numpy_dtype)
        rows = {}
        for index, value in zip(r.indices.tolist(), r.values.tolist()):
            rows.setdefault(tuple(index[:-1]), []).append(value)
        for i in np.ndindex(2, 3):
            want = sorted(python[name](set(x[i].tolist()), set(y[i].tolist())))
            assert rows.get(i, []) == want, (name, i)
        widths = [len(v) for v in rows.values()]
        assert r.dense_shape.tolist() == [2, 3, max(widths, default=0)]


def test_errors_are_tensorflows():
    a = tf.constant(A, tf.int64)
    with pytest.raises(TypeError, match="Expected `SparseTensor`"):
        tf.sets.set_size(a)
    with pytest.raises(TypeError, match="invalid dtype"):
        tf.sets.set_union([1.0], [2.0])
    with pytest.raises(TypeError, match="Types don't match"):
        tf.sets.set_union(tf.constant([[1]]), tf.constant([[1]], tf.int64))
    with pytest.raises(ValueError, match="rank at least 2"):
        tf.sets.set_union(tf.constant([1, 2]), tf.constant([1, 2]))
    with pytest.raises(ValueError, match="not compatible"):
        tf.sets.set_union(tf.constant([[1, 2]]), tf.constant([[1, 2], [3, 4]]))
    unordered = tf.SparseTensor([[0, 1], [0, 0]], [1, 2], [1, 2])
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="out of order"):
        sess.run(tf.sets.set_size(unordered))
    with tf.Session() as sess:  # without validation the order does not matter
        assert sess.run(tf.sets.set_size(unordered, validate_indices=False)).tolist() == [2]

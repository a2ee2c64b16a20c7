"""SparseTensor components in datasets: slices, map, batch (TF's [batch, ...] SparseTensor),
unbatch, VarLenFeature parsing and reinitializable iterators with output_classes."""

import numpy as np
from dataset_helpers import drain

import flowgraph as tf

Dataset = tf.data.Dataset


def _dense(v):
    d = np.zeros(v.dense_shape, v.values.dtype)
    d[tuple(v.indices.T)] = v.values
    return d


def test_sparse_slices_map_and_batch_match_dense_reference():
    dense = np.array([[0, 1, 0], [2, 0, 3], [0, 0, 0], [0, 0, 4]], np.float32)
    idx = np.argwhere(dense)
    st = tf.SparseTensor(idx, dense[tuple(idx.T)], dense.shape)
    ds = Dataset.from_tensor_slices(st)
    assert ds.output_classes is tf.SparseTensor
    assert ds.output_shapes.as_list() == [3] and ds.output_types == tf.float32
    rows = drain(ds.map(lambda s: tf.SparseTensor(s.indices, s.values * 2.0, s.dense_shape)))
    for r, want in zip(rows, dense * 2):
        np.testing.assert_array_equal(_dense(r), want)
    batches = drain(ds.batch(3))
    np.testing.assert_array_equal(_dense(batches[0]), dense[:3])
    np.testing.assert_array_equal(_dense(batches[1]), dense[3:])
    again = drain(ds.batch(3).unbatch())
    for r, want in zip(again, dense):
        np.testing.assert_array_equal(_dense(r), want)


def test_var_len_feature_pipeline_batches_like_parse_example():
    records = []
    for tags in ([1, 2], [], [7, 8, 9]):
        ex = tf.train.Example()
        ex.features.feature["tags"].int64_list.value.extend(tags)
        records.append(ex.SerializeToString())
    spec = {"tags": tf.VarLenFeature(tf.int64)}
    ds = Dataset.from_tensor_slices(np.array(records, dtype=object))
    ds = ds.map(lambda r: tf.parse_single_example(r, spec)["tags"]).batch(3)
    (got,) = drain(ds)
    want = tf.parse_example(tf.constant(np.array(records, dtype=object)), spec)["tags"]
    with tf.Session() as sess:
        want = sess.run(want)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.values, want.values)
    np.testing.assert_array_equal(got.dense_shape, want.dense_shape)


def test_reinitializable_iterator_with_sparse_classes():
    a = Dataset.from_tensors((tf.SparseTensor([[0]], [5], [2]), 1))
    it = tf.data.Iterator.from_structure(
        a.output_types, a.output_shapes, output_classes=a.output_classes
    )
    assert it.output_classes == (tf.SparseTensor, tf.Tensor)
    sp, n = it.get_next()
    with tf.Session() as sess:
        sess.run(it.make_initializer(a))
        got, got_n = sess.run([sp, n])
    np.testing.assert_array_equal(_dense(got), [5, 0])
    assert got_n == 1

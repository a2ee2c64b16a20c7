"""Lookup tables as stateful resources: HashTable with tensor and text-file initializers,
MutableHashTable, id tables with OOV hash buckets (bucket ids recorded from TensorFlow 2.21),
index_to_string tables and tf.tables_initializer."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors

lookup = tf.contrib.lookup


def _init_and_run(fetch, feed=None):
    with tf.Session() as sess:
        sess.run(tf.tables_initializer())
        return sess.run(fetch, feed)


@pytest.mark.parametrize(
    "keys,values,default,query,want",
    [
        (["a", "b"], np.array([1, 2], np.int64), -1, ["a", "c", "b"], [1, -1, 2]),
        (np.array([3, 9], np.int64), ["x", "y"], "?", np.array([9, 4], np.int64), [b"y", b"?"]),
        (
            np.array([3, 9], np.int64),
            np.array([0.5, 1.5]),
            -1.0,
            np.array([[3], [7]], np.int64),
            [[0.5], [-1.0]],
        ),
        (["a", "b"], ["A", "B"], "", ["b", "b", "z"], [b"B", b"B", b""]),
        (
            np.array([1, 2], np.int32),
            np.array([5, 6], np.int32),
            0,
            np.array([2, 3], np.int32),
            [6, 0],
        ),
    ],
)
def test_hash_table_key_value_dtypes(keys, values, default, query, want):
    table = lookup.HashTable(lookup.KeyValueTensorInitializer(keys, values), default)
    out = table.lookup(tf.constant(query))
    assert out.shape.as_list() == list(np.shape(query))
    got, size = _init_and_run([out, table.size()])
    assert got.tolist() == want and size == 2


def test_hash_table_states_and_errors():
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2], value_dtype=tf.int64), -1
    )
    assert table.initializer in tf.get_collection(tf.GraphKeys.TABLE_INITIALIZERS)
    found = table.lookup(tf.constant(["b"]))
    with tf.Session() as sess:
        with pytest.raises(errors.FailedPreconditionError, match="not initialized"):
            sess.run(found)
        sess.run(tf.tables_initializer())
        sess.run(tf.initialize_all_tables())  # the same contents again: allowed, as in TF
        assert sess.run(found).tolist() == [2]
        keys, values = sess.run(table.export())
        assert keys.tolist() == [b"a", b"b"] and values.tolist() == [1, 2]
    with pytest.raises(TypeError, match="Keys must be dtype string"):
        table.lookup(tf.constant([1, 2], tf.int64))
    dup = lookup.HashTable(lookup.KeyValueTensorInitializer(["a", "a"], [1, 2]), -1)
    with tf.Session() as sess, pytest.raises(errors.FailedPreconditionError, match="different"):
        sess.run(dup.initializer)


def test_sparse_keys_keep_their_indices():
    table = lookup.index_table_from_tensor(["x", "y"])
    sp = tf.SparseTensor([[0, 1], [2, 0]], ["y", "q"], [3, 2])
    out = _init_and_run(table.lookup(sp))
    assert out.indices.tolist() == [[0, 1], [2, 0]] and out.values.tolist() == [1, -1]


def test_index_table_from_tensor_oov_buckets_match_tf():
    table = lookup.index_table_from_tensor(["x", "y", "z"], num_oov_buckets=3)
    ids = table.lookup(tf.constant(["x", "z", "q", "hello", "world"]))
    got, size = _init_and_run([ids, table.size()])
    assert got.tolist() == [0, 2, 5, 4, 4] and size == 6  # TensorFlow's ids
    ints = lookup.index_table_from_tensor(
        tf.constant([5, 7], tf.int64), num_oov_buckets=2, dtype=tf.int64
    )
    assert _init_and_run(ints.lookup(tf.constant([7, 9, 100], tf.int64))).tolist() == [1, 3, 3]


def test_index_table_from_file_and_index_to_string(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("emerson\nlake\npalmer\n")
    ids = lookup.index_table_from_file(str(vocab), num_oov_buckets=1)
    first_two = lookup.index_table_from_file(str(vocab), vocab_size=2)
    words = lookup.index_to_string_table_from_tensor(["x", "y", "z"])
    back = lookup.index_to_string_table_from_file(str(vocab), default_value="?")
    got = _init_and_run(
        [
            ids.lookup(tf.constant(["lake", "zzz"])),
            first_two.lookup(tf.constant(["palmer", "lake"])),
            words.lookup(tf.constant([2, 0, 5], tf.int64)),
            back.lookup(tf.constant([1, 3], tf.int64)),
        ]
    )
    assert [g.tolist() for g in got] == [[1, 3], [-1, 1], [b"z", b"x", b"UNK"], [b"lake", b"?"]]
    too_many = lookup.index_table_from_file(str(vocab), vocab_size=5)
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="vocab_size"):
        sess.run(too_many.initializer)


def test_text_file_initializer_columns(tmp_path):
    path = tmp_path / "table.tsv"
    path.write_text("a\t1\t0.5\nb\t2\t1.5\n")
    init = lookup.TextFileInitializer(str(path), tf.string, 0, tf.float32, 2)
    table = lookup.HashTable(init, -1.0)
    by_id = lookup.HashTable(
        lookup.TextFileInitializer(
            str(path), tf.int64, 1, tf.string, lookup.TextFileIndex.WHOLE_LINE
        ),
        "",
    )
    got = _init_and_run(
        [table.lookup(tf.constant(["b", "c"])), by_id.lookup(tf.constant([1], tf.int64))]
    )
    assert got[0].dtype == np.float32 and got[0].tolist() == [1.5, -1.0]
    assert got[1].tolist() == [b"a\t1\t0.5"]
    bad = lookup.HashTable(lookup.TextFileInitializer(str(path), tf.string, 5, tf.int64, 1), -1)
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="columns"):
        sess.run(bad.initializer)
    with pytest.raises(ValueError, match="Signature mismatch"):
        lookup.TextFileInitializer(str(path), tf.string, 0, tf.string, -1)


def test_mutable_hash_table():
    table = lookup.MutableHashTable(tf.string, tf.int64, default_value=-1)
    insert = table.insert(["a", "b"], np.array([1, 2], np.int64))
    replace = table.insert(["b"], np.array([20], np.int64))
    remove = table.remove(["a"])
    found = table.lookup(tf.constant(["a", "b", "c"]))
    with tf.Session() as sess:
        assert sess.run(found).tolist() == [-1, -1, -1]
        sess.run(insert)
        assert sess.run(found).tolist() == [1, 2, -1]
        sess.run(replace)
        sess.run(remove)
        assert sess.run(found).tolist() == [-1, 20, -1] and sess.run(table.size()) == 1


def test_tables_initializer_without_tables_is_a_no_op():
    op = tf.tables_initializer()
    assert op.type == "NoOp" and op.name == "init_all_tables"
    with tf.Session() as sess:
        sess.run(op)

"""Partitioned variables and the partitioners (TF1's partitioned_variables_test.py); their
checkpoints hold one full tensor with slice specs, as TensorFlow's do."""

from __future__ import annotations

import numpy as np
import pytest

import flowgraph as tf
from tests.interop.test_checkpoint_interop import _decode, _run_tf, needs_tf


def test_fixed_size_partitioner_slices_and_concat():
    full = np.arange(30, dtype=np.float32).reshape(10, 3)
    with tf.variable_scope("scope"):
        pv = tf.get_variable(
            "pv", initializer=tf.constant(full), partitioner=tf.fixed_size_partitioner(3)
        )
    parts = list(pv)
    assert len(pv) == 3 and [p.op.name for p in parts] == [f"scope/pv/part_{i}" for i in range(3)]
    assert [p.get_shape().as_list() for p in parts] == [[4, 3], [3, 3], [3, 3]]
    assert [list(p._save_slice_info.var_offset) for p in parts] == [[0, 0], [4, 0], [7, 0]]
    assert pv.get_shape().as_list() == [10, 3] and pv.name == "scope/pv"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(tf.convert_to_tensor(pv)), full)
        np.testing.assert_array_equal(sess.run(parts[1]), full[4:7])
        sess.run(pv.assign(full * 2))
        np.testing.assert_array_equal(sess.run(pv.as_tensor()), full * 2)
    with tf.variable_scope("scope", reuse=True):
        again = tf.get_variable("pv", shape=[10, 3], partitioner=tf.fixed_size_partitioner(3))
    assert again is pv
    with pytest.raises(ValueError, match="already exists"), tf.variable_scope("scope"):
        tf.get_variable("pv", shape=[10, 3], partitioner=tf.fixed_size_partitioner(3))


def test_initializer_gets_partition_info_and_axis_1():
    seen = []

    def init(shape, dtype=None, partition_info=None):
        seen.append((list(shape), partition_info.var_offset, partition_info.full_shape))
        return tf.fill(shape, float(partition_info.var_offset[1]))

    pv = tf.get_variable(
        "w", [2, 5], initializer=init, partitioner=tf.fixed_size_partitioner(2, axis=1)
    )
    assert seen == [([2, 3], [0, 0], [2, 5]), ([2, 2], [0, 3], [2, 5])]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(pv.as_tensor()), [[0, 0, 0, 3, 3]] * 2)


def test_partitioner_arithmetic():
    shape, f32 = tf.TensorShape([100, 16]), tf.float32
    assert tf.fixed_size_partitioner(8)(shape, f32) == [8, 1]
    assert tf.fixed_size_partitioner(500)(shape, f32) == [100, 1]
    # 64 bytes per row: 6 rows fit in 400 bytes -> ceil(100 / 6) = 17 shards
    assert tf.variable_axis_size_partitioner(400)(shape, f32) == [17, 1]
    assert tf.variable_axis_size_partitioner(400, max_shards=5)(shape, f32) == [5, 1]
    assert tf.variable_axis_size_partitioner(10, axis=1)(shape, tf.string) == [1, 16]
    # 6400 bytes in slices of at least 1000 -> 7, capped by max_partitions
    assert tf.min_max_variable_partitioner(10, min_slice_size=1000)(shape, f32) == [7, 1]
    assert tf.min_max_variable_partitioner(3, min_slice_size=1000)(shape, f32) == [3, 1]
    with pytest.raises(ValueError, match="must be positive"):
        tf.variable_axis_size_partitioner(0)
    with pytest.raises(ValueError, match="Cannot partition variable along axis 2"):
        tf.min_max_variable_partitioner(2, axis=2)(shape, f32)


def test_partitioned_saved_as_one_tensor_and_restored_repartitioned(tmp_path):
    full = np.arange(40, dtype=np.float32).reshape(10, 4)
    pv = tf.get_variable(
        "emb", initializer=tf.constant(full), partitioner=tf.fixed_size_partitioner(3)
    )
    x = tf.constant([[1.0, 0.0, 0.0, 0.0]])
    loss = tf.reduce_sum(tf.matmul(x, tf.transpose(pv.as_tensor())))
    train = tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        want = sess.run(pv.as_tensor())
        path = saver.save(sess, str(tmp_path / "p"))
    reader = tf.train.NewCheckpointReader(path)
    shapes = reader.get_variable_to_shape_map()
    assert shapes["emb"] == [10, 4] and shapes["emb/Momentum"] == [10, 4]
    np.testing.assert_array_equal(reader.get_tensor("emb"), want)
    # restored into a differently partitioned variable, and into an unpartitioned one
    for partitioner in (tf.fixed_size_partitioner(2), None):
        tf.reset_default_graph()
        v = tf.get_variable("emb", shape=[10, 4], partitioner=partitioner)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            tf.train.Saver([v] if partitioner is None else {"emb": v}).restore(sess, path)
            got = sess.run(v.as_tensor() if partitioner else v)
        np.testing.assert_array_equal(got, want)


@needs_tf
def test_tensorflow_reads_our_partitioned_checkpoint(tmp_path):
    full = np.arange(30, dtype=np.float32).reshape(10, 3)
    pv = tf.get_variable(
        "pv", initializer=tf.constant(full), partitioner=tf.fixed_size_partitioner(3)
    )
    del pv
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = tf.train.Saver().save(sess, str(tmp_path / "ours"))
    got = _run_tf(
        """
        reader = tf.train.load_checkpoint(sys.argv[1])
        with tf.Graph().as_default(), tf.Session() as sess:
            v = tf.get_variable("pv", shape=[10, 3], partitioner=tf.fixed_size_partitioner(2))
            tf.train.Saver().restore(sess, sys.argv[1])
            restored = sess.run(tf.concat(list(v), 0))
        print(json.dumps({"full": enc(reader.get_tensor("pv")), "restored": enc(restored)}))
        """,
        path,
    )
    np.testing.assert_array_equal(_decode(got["full"]), full)
    np.testing.assert_array_equal(_decode(got["restored"]), full)


@needs_tf
def test_partitioned_checkpoint_is_byte_identical_to_tensorflows(tmp_path):
    script = """
        full = np.arange(30, dtype=np.float32).reshape(10, 3)
        with tf.Graph().as_default():
            pv = tf.get_variable("pv", initializer=tf.constant(full),
                                 partitioner=tf.fixed_size_partitioner(3))
            w = tf.get_variable("w", initializer=tf.constant([1, 2, 3], tf.int64))
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                tf.train.Saver().save(sess, sys.argv[1], write_meta_graph=False)
        print(json.dumps({}))
    """
    _run_tf(script, tmp_path / "tf" / "ck")
    full = np.arange(30, dtype=np.float32).reshape(10, 3)
    tf.get_variable("pv", initializer=tf.constant(full), partitioner=tf.fixed_size_partitioner(3))
    tf.get_variable("w", initializer=tf.constant([1, 2, 3], tf.int64))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.train.Saver().save(sess, str(tmp_path / "ours" / "ck"), write_meta_graph=False)
    for suffix in (".index", ".data-00000-of-00001"):
        ours = (tmp_path / "ours" / ("ck" + suffix)).read_bytes()
        assert ours == (tmp_path / "tf" / ("ck" + suffix)).read_bytes(), suffix

"""Deprecated tf.* names TF 1.15 still exports: each behaves as the function it was renamed to."""

import numpy as np

import flowgraph as tf


def test_renamed_ops():
    x = tf.constant([[1.0, 5.0, 2.0], [7.0, 0.0, 1.0]])
    with tf.Session() as sess:
        am, an, fd, mm, bf = sess.run(
            [
                tf.arg_max(x, 1),
                tf.arg_min(x, 0),
                tf.floor_div(-7, 2),
                tf.sparse_matmul(x, x, transpose_b=True),
                tf.to_bfloat16(x),
            ]
        )
    assert am.tolist() == [1, 0] and am.dtype == np.int64 and an.tolist() == [0, 1, 1]
    assert fd == -4 and mm.tolist() == [[30.0, 9.0], [9.0, 50.0]]
    assert bf.dtype == tf.bfloat16.as_numpy_dtype
    assert tf.train.summary_iterator is tf.summary.summary_iterator


def test_old_scopes():
    with tf.op_scope([], "outer", "default") as scope:
        assert scope == "outer/"
    with tf.variable_op_scope([], None, "vs"):
        assert tf.get_variable("w", [1]).name == "vs/w:0"

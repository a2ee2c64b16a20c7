"""SaveV2 / RestoreV2 / MergeV2Checkpoints / ShardedFilename as graph ops (whitepaper §3.3)."""

from __future__ import annotations

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.ops import io_ops


def test_save_and_restore_ops_round_trip_with_slices(tmp_path):
    prefix = str(tmp_path / "ck")
    a = tf.constant(np.arange(8, dtype=np.float64).reshape(4, 2))
    s = tf.constant([b"x", b"\x00yz"])
    i = tf.constant(np.int64(2**40))
    save = io_ops.save_v2(prefix, ["a", "s", "i"], ["", "", ""], [a, s, i])
    got = io_ops.restore_v2(
        prefix,
        ["i", "a", "s", "a"],
        ["", "", "", "4 2 1,2:1,1"],
        [tf.int64, tf.float64, tf.string, tf.float64],
    )
    assert got[3].shape.as_list() == [2, 1]
    with tf.Session() as sess:
        sess.run(save)
        i_, a_, s_, part = sess.run(got)
    assert i_ == 2**40 and i_.dtype == np.int64
    np.testing.assert_array_equal(a_, np.arange(8.0).reshape(4, 2))
    assert s_.tolist() == [b"x", b"\x00yz"]
    np.testing.assert_array_equal(part, [[3.0], [5.0]])


def test_restore_errors_name_key_and_checkpoint(tmp_path):
    prefix = str(tmp_path / "ck")
    save = io_ops.save_v2(prefix, ["a"], [""], [tf.constant([1.0, 2.0])])
    missing = io_ops.restore_v2(prefix, ["b"], [""], [tf.float32])
    wrong = io_ops.restore_v2(prefix, ["a"], [""], [tf.int32])
    nofile = io_ops.restore_v2(prefix + "x", ["a"], [""], [tf.float32])
    with tf.Session() as sess:
        sess.run(save)
        with pytest.raises(errors.NotFoundError, match=f"Key b not found in checkpoint {prefix}"):
            sess.run(missing)
        with pytest.raises(
            errors.InvalidArgumentError, match="tensor_name = a; expected dtype int32"
        ):
            sess.run(wrong)
        with pytest.raises(errors.NotFoundError, match="Failed to find any matching files"):
            sess.run(nofile)


def test_sharded_save_then_merge(tmp_path):
    base = str(tmp_path / "model")
    tmp = base + "_temp_x/part"
    names = [io_ops.sharded_filename(tmp, k, 2) for k in range(2)]
    saves = [
        io_ops.save_v2(names[0], ["w"], [""], [tf.constant([1, 2])]),
        io_ops.save_v2(names[1], ["b"], [""], [tf.constant(3.5)]),
    ]
    with tf.control_dependencies(saves):
        merge = io_ops.merge_v2_checkpoints(tf.stack(names), base)
    restored = io_ops.restore_v2(base, ["w", "b"], ["", ""], [tf.int32, tf.float32])
    with tf.Session() as sess:
        assert sess.run(names[1]) == (tmp + "-00001-of-00002").encode()
        assert sess.run(io_ops.sharded_filespec("f", 3)) == b"f-?????-of-00003"
        sess.run(merge)
        w, b = sess.run(restored)
    np.testing.assert_array_equal(w, [1, 2])
    assert b == 3.5
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model.data-00000-of-00002",
        "model.data-00001-of-00002",
        "model.index",
    ]

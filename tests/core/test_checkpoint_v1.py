"""The V1 checkpoint format (TF1's Save/SaveSlices/Restore/RestoreSlice ops and
Saver(write_version=V1)); real TensorFlow reads ours and we read TensorFlow's."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import checkpoint_v1, errors
from flowgraph.core.tensor_slice import Slice
from flowgraph.ops import io_ops
from tests.interop.test_checkpoint_interop import _decode, _run_tf, needs_tf

VALUES = {
    "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
    "f64": np.array([-0.0, 1e300]),
    "i8": np.array([-128, 127], np.int8),
    "u16": np.array([0, 65535], np.uint16),
    "i64": np.array(2**40, np.int64),
    "half": np.array([65504.0, -2.5], np.float16),
    "bf16": np.array([1.5, -3.0], ml_dtypes.bfloat16),
    "c64": np.array([1 + 2j], np.complex64),
    "b": np.array([True, False]),
    "s": np.array([b"", b"x\x00y"], dtype=object),
    "empty": np.zeros((0, 2), np.float32),
}


def test_v1_round_trip_every_dtype_and_slices(tmp_path):
    path = str(tmp_path / "v1.ckpt")
    full = np.arange(12.0).reshape(6, 2)
    entries = [(k, None, None, v) for k, v in VALUES.items()]
    entries += [
        ("part", [6, 2], Slice.parse(s), full[Slice.parse(s).index((6, 2))])
        for s in ("0,4:-", "4,2:-")
    ]
    checkpoint_v1.write_v1(path, entries)
    with checkpoint_v1.open_checkpoint(path) as r:
        assert isinstance(r, checkpoint_v1.V1Reader)
        assert r.keys() == sorted([*VALUES, "part"])
        for k, v in VALUES.items():
            got = r.lookup(k)
            assert got.dtype == v.dtype and got.shape == v.shape, k
            assert got.tolist() == v.tolist() if v.dtype == object else got.tobytes() == v.tobytes()
        np.testing.assert_array_equal(r.lookup("part"), full)
        np.testing.assert_array_equal(r.lookup_slice("part", Slice.parse("3,2:1,1")), full[3:5, 1:])
        with pytest.raises(errors.NotFoundError, match="Key nope not found"):
            r.lookup("nope")
    with pytest.raises(errors.NotFoundError, match="Failed to find any matching files"):
        checkpoint_v1.V1Reader(str(tmp_path / "missing"))


def test_save_and_restore_ops(tmp_path):
    path = str(tmp_path / "ops.ckpt")
    a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    save = io_ops.save(path, ["a", "n"], [a, tf.constant(7)])
    sl = io_ops.save_slices(path + "2", ["a"], ["4 2 2,2:-"], [a])
    r = io_ops.restore(path, "a", tf.float32)
    n = io_ops.restore(path, "n", tf.int32)
    part = io_ops.restore_slice(path, "a", "2 2 1,1:-", tf.float32)
    v2_fallback = io_ops.restore_v2(path, ["n"], [""], [tf.int32])[0]
    wrong = io_ops.restore(path, "n", tf.float32)
    with tf.Session() as sess:
        sess.run([save, sl])
        got = sess.run([r, n, part, v2_fallback])
        with pytest.raises(errors.InvalidArgumentError, match="tensor_name = n"):
            sess.run(wrong)
        np.testing.assert_array_equal(
            sess.run(io_ops.restore(path + "2", "a", tf.float32)), [[0, 0], [0, 0], [1, 2], [3, 4]]
        )
    np.testing.assert_array_equal(got[0], [[1, 2], [3, 4]])
    assert got[1] == 7 and got[3] == 7
    np.testing.assert_array_equal(got[2], [[3, 4]])


@pytest.mark.parametrize("sharded", [False, True])
def test_saver_write_version_v1(tmp_path, sharded):
    v = tf.Variable([1.0, 2.0], name="v")
    with tf.device("/cpu:0"):
        w = tf.get_variable("w", [4, 2], partitioner=tf.fixed_size_partitioner(2))
    saver = tf.train.Saver(write_version=tf.train.SaverDef.V1, sharded=sharded)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run([v, w.as_tensor()])
        path = saver.save(sess, str(tmp_path / "m"), global_step=3)
        assert path.endswith("m-3-?????-of-00002" if sharded else "m-3")  # two device strings
        assert tf.train.latest_checkpoint(str(tmp_path)) == path
        sess.run(tf.global_variables_initializer())
        sess.run(v.assign([0.0, 0.0]))
        saver.restore(sess, path)
        got = sess.run([v, w.as_tensor()])
    for g, x in zip(got, want):
        np.testing.assert_array_equal(g, x)
    reader = tf.train.NewCheckpointReader(path)
    assert reader.get_variable_to_shape_map() == {"v": [2], "w": [4, 2]}
    assert (tmp_path / "m-3.meta").is_file()


@needs_tf
def test_tensorflow_reads_our_v1_and_we_read_its_v1(tmp_path):
    ours = str(tmp_path / "ours.ckpt")  # TF's V1 reader lacks uint16, half and complex64
    checkpoint_v1.write_v1(
        ours,
        [
            (k, None, None, v)
            for k, v in VALUES.items()
            if k not in ("bf16", "empty", "u16", "half", "c64")
        ],
    )
    got = _run_tf(
        """
        r = tf.train.NewCheckpointReader(sys.argv[1])
        out = {k: enc(r.get_tensor(k)) for k in r.get_variable_to_shape_map()}
        with tf.Graph().as_default(), tf.Session() as sess:
            v = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="tfv")
            p = tf.get_variable("tfp", initializer=tf.constant(np.arange(8.0).reshape(4, 2)),
                                partitioner=tf.fixed_size_partitioner(2))
            sess.run(tf.global_variables_initializer())
            tf.train.Saver(write_version=tf.train.SaverDef.V1).save(sess, sys.argv[2])
        print(json.dumps(out))
        """,
        ours,
        tmp_path / "theirs.ckpt",
    )
    for k, v in got.items():
        w = VALUES[k]
        d = _decode(v)
        assert d.tolist() == w.tolist() if w.dtype == object else d.tobytes() == w.tobytes(), k
    reader = tf.train.NewCheckpointReader(str(tmp_path / "theirs.ckpt"))
    np.testing.assert_array_equal(reader.get_tensor("tfv"), np.arange(6).reshape(3, 2))
    np.testing.assert_array_equal(reader.get_tensor("tfp"), np.arange(8.0).reshape(4, 2))

"""RestoreV2's fast paths (kernels/cpu/io.py, runtime/passes/borrowed_restores.py): tensors
read in parallel on the device pool, and views of the mapped data file handed to assigns that
copy them. A variable must never alias the checkpoint: changing one must not change the other."""

from __future__ import annotations

import os

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import crc32c, errors
from flowgraph.kernels.cpu.io import BORROW_ATTR
from flowgraph.ops import io_ops
from tests.helpers import local_plans

CONFIG = tf.ConfigProto(inter_op_parallelism_threads=2, intra_op_parallelism_threads=2)
SHAPE = (64, 512)  # 128 KiB of float32: large enough to shard and to take the no-GIL CRC


def _restore_flags(sess) -> dict[str, bool]:
    """RestoreV2 node name -> whether its kernel may borrow, in the plans the session ran."""
    return {
        item.ctx.name: bool(item.ctx.attrs.get(BORROW_ATTR))
        for plan in local_plans(sess)
        for item in plan.items
        if item.ctx.op_type == "RestoreV2"
    }


def _data_file(prefix: str) -> str:
    return prefix + ".data-00000-of-00001"


def _bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _mapped(path: str) -> bool:
    with open("/proc/self/maps") as f:
        return any(line.rstrip().endswith(os.path.realpath(path)) for line in f)


def _variables(n: int = 6):
    ref = [tf.Variable(np.full(SHAPE, i, np.float32), name=f"r{i}") for i in range(n)]
    res = tf.get_variable("res", initializer=np.full(SHAPE, -1.0, np.float32), use_resource=True)
    return ref + [res]


@pytest.mark.parametrize("reshape", [False, True])
def test_restore_into_variables_never_aliases_the_checkpoint(tmp_path, reshape):
    variables = _variables()
    saver = tf.train.Saver(variables, reshape=reshape)
    bump = [v.assign_add(tf.ones(SHAPE)) for v in variables]
    with tf.Session(config=CONFIG) as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(variables)
        prefix = saver.save(sess, str(tmp_path / "m"), write_meta_graph=False)
        saved = _bytes(_data_file(prefix))
        sess.run(bump)
        saver.restore(sess, prefix)  # into existing buffers
        assert list(_restore_flags(sess).values()) == [True]
        if os.path.exists("/proc/self/maps"):
            assert not _mapped(_data_file(prefix)), "a restored value outlived the step"
        for got, w in zip(sess.run(variables), want):
            np.testing.assert_array_equal(got, w)
        sess.run(bump)  # writes into the variables' buffers: the file must not change
        assert _bytes(_data_file(prefix)) == saved
        saver.restore(sess, prefix)
        for got, w in zip(sess.run(variables), want):
            np.testing.assert_array_equal(got, w)
        # the file rewritten in place (same inode) after a restore: the variables keep theirs
        with open(_data_file(prefix), "r+b") as f:
            f.write(b"\xff" * len(saved))
        for got, w in zip(sess.run(variables), want):
            np.testing.assert_array_equal(got, w)


def test_restore_into_uninitialized_variables_copies(tmp_path):
    variables = _variables(3)
    saver = tf.train.Saver(variables)
    with tf.Session(config=CONFIG) as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(variables)
        prefix = saver.save(sess, str(tmp_path / "m"), write_meta_graph=False)
    with tf.Session(config=CONFIG) as sess:  # a new session: no variable has a buffer yet
        saver.restore(sess, prefix)
        with open(_data_file(prefix), "r+b") as f:
            f.write(b"\x00" * os.path.getsize(_data_file(prefix)))
        for got, w in zip(sess.run(variables), want):
            np.testing.assert_array_equal(got, w)


def test_fetched_or_queued_outputs_are_not_borrowed(tmp_path):
    prefix = str(tmp_path / "ck")
    value = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
    save = io_ops.save_v2(prefix, ["a", "b"], ["", ""], [tf.constant(value), tf.constant(-value)])
    a, b = io_ops.restore_v2(prefix, ["a", "b"], ["", ""], [tf.float32, tf.float32])
    queue = tf.FIFOQueue(2, [tf.float32])
    enqueue = queue.enqueue([tf.identity(b)])
    with tf.Session(config=CONFIG) as sess:
        sess.run(save)
        got = sess.run(a)
        sess.run(enqueue)
        assert set(_restore_flags(sess).values()) == {False}
        os.remove(_data_file(prefix))
        with open(_data_file(prefix), "wb") as f:  # a new file under the same name
            f.write(b"\x00" * value.nbytes * 2)
        np.testing.assert_array_equal(got, value)
        np.testing.assert_array_equal(sess.run(queue.dequeue()), -value)


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damaged_data_file_is_data_loss_naming_tensor_and_file(tmp_path, damage):
    variables = _variables()
    saver = tf.train.Saver(variables)
    with tf.Session(config=CONFIG) as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(variables)
        prefix = saver.save(sess, str(tmp_path / "m"), write_meta_graph=False)
        path = _data_file(prefix)
        raw = bytearray(_bytes(path))
        if damage == "flip":  # inside the 4th of 7 tensors, read by whichever shard
            raw[3 * len(raw) // 7 + 100] ^= 0x10
            match = r"Checksum does not match.*tensor r3 in .*m\.data-00000-of-00001"
        else:
            del raw[-1000:]
            match = r"tensor res in .*m\.data-00000-of-00001: file is truncated"
        sess.run([v.assign_add(tf.ones(SHAPE)) for v in variables])
        moved = sess.run(variables)
        with open(path, "wb") as f:
            f.write(bytes(raw))
        with pytest.raises(errors.DataLossError, match=match):
            saver.restore(sess, prefix)
        for got, w in zip(sess.run(variables), moved):  # untouched by the failed restore
            np.testing.assert_array_equal(got, w)
        assert not np.array_equal(moved[0], want[0])


def test_parallel_restore_of_many_tensors_every_kind(tmp_path):
    prefix = str(tmp_path / "ck")
    rng = np.random.default_rng(0)
    values = {f"t{i:02d}": rng.standard_normal(SHAPE).astype(np.float32) * i for i in range(12)}
    values["i64"] = np.arange(5, dtype=np.int64)
    values["s"] = np.array([b"x", b"yz"], dtype=object)
    values["empty"] = np.zeros((0, 3), np.float64)
    names = sorted(values)
    kinds = [tf.as_dtype(values[n].dtype if n != "s" else tf.string) for n in names]
    consts = [tf.constant(values[n]) for n in names]
    save = io_ops.save_v2(prefix, names, [""] * len(names), consts)
    restored = io_ops.restore_v2(prefix, names, [""] * len(names), kinds)
    sliced = io_ops.restore_v2(prefix, ["t05", "t11"], ["64 512 0,2:-", ""], [tf.float32] * 2)
    with tf.Session(config=CONFIG) as sess:
        sess.run(save)
        for name, got in zip(names, sess.run(restored)):
            np.testing.assert_array_equal(got, values[name])
        part, whole = sess.run(sliced)
    np.testing.assert_array_equal(part, values["t05"][0:2])
    np.testing.assert_array_equal(whole, values["t11"])


def test_crc32c_without_the_gil_equals_google_crc32c():
    import google_crc32c

    rng = np.random.default_rng(1)
    for n in (0, 7, (1 << 16) - 1, 1 << 16, (1 << 20) + 3):
        data = rng.integers(0, 256, n, dtype=np.uint8)
        assert crc32c.value(data) == google_crc32c.value(data.tobytes())
        assert crc32c.value(data.tobytes()) == google_crc32c.value(data.tobytes())
    view = np.frombuffer(bytes(range(256)) * 1024, np.uint8)  # read-only, like a mapped file
    assert crc32c.value(view) == google_crc32c.value(view.tobytes())

"""tf.train.Saver and the checkpoint helpers (whitepaper §3.3; TF1's saver_test.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors


def _model():
    w = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
    b = tf.get_variable("b", shape=[3], initializer=tf.ones_initializer(), use_resource=True)
    s = tf.Variable([b"a", b"bc"], name="s")
    step = tf.train.get_or_create_global_step()
    return w, b, s, step


def test_save_restore_ref_resource_string_and_global_step(tmp_path):
    w, b, s, step = _model()
    bump = [
        tf.assign_add(w, tf.ones([2, 3])),
        b.assign_add([1.0, 2.0, 3.0]),
        tf.assign_add(step, 5),
    ]
    saver = tf.train.Saver()
    assert saver.saver_def.filename_tensor_name == "save/Const:0"
    assert saver.saver_def.save_tensor_name == "save/control_dependency:0"
    assert saver.saver_def.restore_op_name == "save/restore_all"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(bump)
        want = sess.run([w, b, s, step])
        path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=step)
        assert path == str(tmp_path / "model.ckpt-5")
        sess.run(tf.global_variables_initializer())
        saver.restore(sess, path)
        got = sess.run([w, b, s, step])
    for g, x in zip(got, want):
        np.testing.assert_array_equal(g, x)
    assert tf.train.latest_checkpoint(str(tmp_path)) == path
    assert sorted(os.listdir(tmp_path)) == [
        "checkpoint",
        "model.ckpt-5.data-00000-of-00001",
        "model.ckpt-5.index",
        "model.ckpt-5.meta",
    ]


@pytest.mark.parametrize("resource", [False, True], ids=["ref", "resource"])
@pytest.mark.parametrize("opt", ["adam", "momentum", "adagrad", "rmsprop", "ftrl", "adadelta"])
def test_optimizer_slots_round_trip(tmp_path, opt, resource):
    x = tf.constant([[1.0, 2.0], [3.0, -1.0]])
    w = tf.Variable([[0.5], [-0.5]], name="w", use_resource=resource)
    loss = tf.reduce_sum(tf.square(tf.matmul(x, w) - 1.0))
    make = {
        "adam": lambda: tf.train.AdamOptimizer(0.1),
        "momentum": lambda: tf.train.MomentumOptimizer(0.1, 0.9),
        "adagrad": lambda: tf.train.AdagradOptimizer(0.1),
        "rmsprop": lambda: tf.train.RMSPropOptimizer(0.1),
        "ftrl": lambda: tf.train.FtrlOptimizer(0.1),
        "adadelta": lambda: tf.train.AdadeltaOptimizer(0.1),
    }[opt]
    step = tf.train.get_or_create_global_step()
    train = make().minimize(loss, global_step=step)
    saver = tf.train.Saver()
    all_vars = tf.global_variables()
    assert len(all_vars) > 2  # slots are global variables
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        path = saver.save(sess, str(tmp_path / "m"))
        want = sess.run(all_vars)
        sess.run(train)
        after_two = sess.run(all_vars)
        saver.restore(sess, path)
        for g, x in zip(sess.run(all_vars), want):
            np.testing.assert_array_equal(g, x)
        sess.run(train)  # training resumes exactly where it was
        for g, x in zip(sess.run(all_vars), after_two):
            np.testing.assert_allclose(g, x, rtol=1e-6)


def test_var_list_dict_and_list_and_reshape(tmp_path):
    a = tf.Variable(np.arange(6.0).reshape(2, 3), name="a")
    b = tf.Variable([7.0], name="b")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.train.Saver({"renamed": a}).save(sess, str(tmp_path / "d"))
        tf.train.Saver([b]).save(sess, str(tmp_path / "l"))
    assert tf.train.list_variables(str(tmp_path / "d")) == [("renamed", [2, 3])]
    assert tf.train.list_variables(str(tmp_path / "l")) == [("b", [1])]
    c = tf.Variable(np.zeros((3, 2)), name="c")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(errors.InvalidArgumentError, match="variable renamed has shape"):
            tf.train.Saver({"renamed": c}).restore(sess, str(tmp_path / "d"))
        tf.train.Saver({"renamed": c}, reshape=True).restore(sess, str(tmp_path / "d"))
        np.testing.assert_array_equal(sess.run(c), np.arange(6.0).reshape(3, 2))


def test_max_to_keep_and_last_checkpoints(tmp_path):
    v = tf.Variable(1.0, name="v")
    saver = tf.train.Saver(max_to_keep=2, pad_step_number=True)
    prefix = str(tmp_path / "ck")
    with tf.Session() as sess:
        sess.run(v.initializer)
        paths = [saver.save(sess, prefix, global_step=i) for i in range(4)]
    assert paths[1] == prefix + "-00000001"
    assert saver.last_checkpoints == paths[2:]
    assert not tf.train.checkpoint_exists(paths[0]) and not tf.train.checkpoint_exists(paths[1])
    assert not os.path.exists(paths[1] + ".meta")
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == paths[3]
    assert list(state.all_model_checkpoint_paths) == paths[2:]
    again = tf.train.Saver(max_to_keep=2)
    again.recover_last_checkpoints(paths)
    assert again.last_checkpoints == paths[2:]  # the deleted ones have no mtime
    assert len(tf.train.get_checkpoint_mtimes(paths)) == 2
    again.set_last_checkpoints_with_time([(paths[3], 1.0)])
    assert again.last_checkpoints == [paths[3]]
    tf.train.remove_checkpoint(paths[2])
    assert not tf.train.checkpoint_exists(paths[2])


def test_keep_checkpoint_every_n_hours_keeps_old_ones(tmp_path):
    v = tf.Variable(1.0, name="v")
    saver = tf.train.Saver(max_to_keep=1, keep_checkpoint_every_n_hours=1e-9)
    with tf.Session() as sess:
        sess.run(v.initializer)
        paths = [saver.save(sess, str(tmp_path / "k"), global_step=i) for i in range(3)]
    assert saver.last_checkpoints == paths[2:]
    assert all(tf.train.checkpoint_exists(p) for p in paths)


def test_save_arguments(tmp_path):
    v = tf.Variable(3.0, name="v")
    saver = tf.train.Saver(save_relative_paths=True, filename=str(tmp_path / "default"))
    with tf.Session() as sess:
        sess.run(v.initializer)
        path = saver.save(
            sess,
            str(tmp_path / "m"),
            latest_filename="latest",
            meta_graph_suffix="mg",
            write_meta_graph=True,
        )
        assert (tmp_path / "latest").read_text().startswith('model_checkpoint_path: "m"')
        assert (tmp_path / "m.mg").is_file()
        saver.save(sess, str(tmp_path / "n"), write_meta_graph=False, write_state=False)
        assert not (tmp_path / "n.meta").exists() and not (tmp_path / "checkpoint").exists()
        assert tf.train.latest_checkpoint(str(tmp_path), "latest") == path
        # the default filename is the filename tensor's default value
        sess.run(saver.saver_def.save_tensor_name)
        assert tf.train.checkpoint_exists(str(tmp_path / "default"))
        with pytest.raises(ValueError, match="must not contain path components"):
            saver.save(sess, str(tmp_path / "m"), latest_filename="a/b")
        with pytest.raises(ValueError, match="collides with 'save_path'"):
            saver.save(sess, str(tmp_path / "checkpoint"))
        with pytest.raises(TypeError, match="must be a Session"):
            saver.save(None, str(tmp_path / "x"))


def test_empty_defer_build_versions_and_builder(tmp_path):
    with pytest.raises(ValueError, match="No variables to save"):
        tf.train.Saver()
    empty = tf.train.Saver(allow_empty=True)
    with tf.Session() as sess:
        assert empty.save(sess, str(tmp_path / "e")) is None
        empty.restore(sess, str(tmp_path / "e"))
    v = tf.Variable(1.0, name="v")
    with pytest.raises(ValueError, match="build cannot be deferred"):
        tf.train.Saver([v], defer_build=True)
    deferred = tf.train.Saver(defer_build=True)
    with tf.Session() as sess, pytest.raises(RuntimeError, match="build"):
        deferred.save(sess, str(tmp_path / "x"))
    deferred.build()
    assert deferred.as_saver_def().restore_op_name == "save/restore_all"
    with pytest.raises(ValueError, match="write_version must be"):
        tf.train.Saver(write_version=7)
    seq = tf.train.Saver(builder=tf.train.saver.BaseSaverBuilder(), restore_sequentially=True)
    restores = [
        op
        for op in tf.get_default_graph().get_operations()
        if op.type == "RestoreV2" and op.name.startswith("save_1/")
    ]
    assert len(restores) == 1 and seq.saver_def.restore_op_name == "save_1/restore_all"
    with tf.Session() as sess:
        sess.run(v.initializer)
        path = seq.save(sess, str(tmp_path / "seq"))
        sess.run(v.assign(5.0))
        seq.restore(sess, path)
        assert sess.run(v) == 1.0
    proto_saver = tf.train.Saver.from_proto(seq.to_proto())
    assert proto_saver.as_saver_def() == seq.saver_def
    assert seq.to_proto(export_scope="save_1").restore_op_name == "restore_all"


def test_sharded_saves_one_data_file_per_device(tmp_path):
    with tf.device("/cpu:0"):
        a = tf.Variable([1.0, 2.0], name="a")
    with tf.device("/job:localhost/replica:0/task:0/device:CPU:0"):
        b = tf.Variable([3, 4], name="b")
    saver = tf.train.Saver(sharded=True)
    assert saver.saver_def.sharded
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "sh"))
        sess.run([a.assign([0.0, 0.0]), b.assign([0, 0])])
        saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(a), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(b), [3, 4])
    files = sorted(os.listdir(tmp_path))
    assert "sh.index" in files and any(f.startswith("sh.data-00000-of-") for f in files)
    assert not [f for f in files if "_temp_" in f]


def test_failed_restore_leaves_variables_untouched(tmp_path):
    a = tf.Variable([1.0, 2.0], name="a")
    b = tf.Variable([1, 2], name="b")
    saver = tf.train.Saver()
    path = str(tmp_path / "m")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, path)
    tf.reset_default_graph()
    a = tf.Variable([5.0, 6.0], name="a")
    b = tf.Variable([7.0, 8.0], name="b")  # float, but the checkpoint holds int32
    c = tf.Variable(9.0, name="c")  # not in the checkpoint
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(errors.NotFoundError, match=f"Key c not found in checkpoint {path}"):
            tf.train.Saver([a, c]).restore(sess, path)
        with pytest.raises(errors.InvalidArgumentError, match="variable b has dtype float32"):
            tf.train.Saver([a, b]).restore(sess, path)
        np.testing.assert_array_equal(sess.run([a, b, c])[0], [5.0, 6.0])
        np.testing.assert_array_equal(sess.run(b), [7.0, 8.0])
        with pytest.raises(ValueError, match="not a valid checkpoint"):
            tf.train.Saver([a]).restore(sess, str(tmp_path / "nothing"))
        # a corrupted data file: DataLossError naming it, and `a` untouched
        data = tmp_path / "m.data-00000-of-00001"
        raw = bytearray(data.read_bytes())
        raw[0] ^= 1
        data.write_bytes(bytes(raw))
        with pytest.raises(errors.DataLossError, match="m.data-00000-of-00001"):
            tf.train.Saver([a]).restore(sess, path)
        np.testing.assert_array_equal(sess.run(a), [5.0, 6.0])


def test_checkpoint_reader(tmp_path):
    v = tf.Variable(np.arange(4, dtype=np.int64), name="scope/v")
    with tf.Session() as sess:
        sess.run(v.initializer)
        path = tf.train.Saver().save(sess, str(tmp_path / "r"))
    reader = tf.train.NewCheckpointReader(path)
    assert reader.has_tensor("scope/v") and not reader.has_tensor("w")
    np.testing.assert_array_equal(reader.get_tensor("scope/v"), np.arange(4))
    assert reader.get_variable_to_shape_map() == {"scope/v": [4]}
    assert reader.get_variable_to_dtype_map() == {"scope/v": tf.int64}
    with pytest.raises(errors.NotFoundError, match="Key w not found"):
        reader.get_tensor("w")
    np.testing.assert_array_equal(tf.train.load_variable(str(tmp_path), "scope/v:0"), np.arange(4))
    assert tf.train.load_checkpoint(str(tmp_path)).has_tensor("scope/v")
    with pytest.raises(errors.NotFoundError, match="Failed to find any matching files"):
        tf.train.NewCheckpointReader(str(tmp_path / "none"))
    with pytest.raises(ValueError, match="Couldn't find 'checkpoint' file"):
        tf.train.load_checkpoint(str(tmp_path / "empty_dir_missing") if False else _empty(tmp_path))


def _empty(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    return str(d)


def test_init_from_checkpoint(tmp_path):
    with tf.variable_scope("old"):
        tf.get_variable("w", initializer=tf.constant([1.0, 2.0]))
        tf.get_variable("b", initializer=tf.constant(3.0))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = tf.train.Saver().save(sess, str(tmp_path / "old"))
    tf.reset_default_graph()
    with tf.variable_scope("new"):
        w2 = tf.get_variable("w", shape=[2])
        b2 = tf.get_variable("b", shape=[], use_resource=True)
    other = tf.get_variable("other", shape=[2])
    tf.train.init_from_checkpoint(path, {"old/": "new/", "old/w": other})
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(w2), [1.0, 2.0])
        assert sess.run(b2) == 3.0
        np.testing.assert_array_equal(sess.run(other), [1.0, 2.0])
    with pytest.raises(ValueError, match="Tensor old/zz is not found"):
        tf.train.init_from_checkpoint(path, {"old/zz": other})


def test_checkpoint_state_helpers(tmp_path):
    d = str(tmp_path)
    tf.train.update_checkpoint_state(d, os.path.join(d, "a-2"), [os.path.join(d, "a-1")])
    state = tf.train.get_checkpoint_state(d)
    assert state.model_checkpoint_path == os.path.join(d, "a-2")
    assert list(state.all_model_checkpoint_paths) == [
        os.path.join(d, "a-1"),
        os.path.join(d, "a-2"),
    ]
    assert tf.train.latest_checkpoint(d) is None  # named, but not on disk
    proto = tf.train.generate_checkpoint_state_proto("rel", "rel/x-1")
    assert proto.model_checkpoint_path == "x-1"
    with pytest.raises(errors.InvalidArgumentError, match="conflicts with path used"):
        tf.train.update_checkpoint_state(d, os.path.join(d, "checkpoint"))


def test_imported_saver_checks_before_restoring(tmp_path):
    tf.Variable([1.0, 2.0], name="a")
    tf.Variable([3.0, 4.0, 5.0], name="b")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "m"))
    tf.reset_default_graph()
    tf.Variable([9.0, 9.0], name="a")
    tf.get_variable("b", initializer=tf.constant([9.0, 9.0]), use_resource=True)  # holds [3]
    meta = tf.train.export_meta_graph(saver_def=tf.train.Saver().as_saver_def())
    tf.reset_default_graph()
    imported = tf.train.import_meta_graph(meta)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(errors.InvalidArgumentError, match="variable b has shape"):
            imported.restore(sess, path)
        np.testing.assert_array_equal(sess.run("a:0"), [9.0, 9.0])  # untouched


class _TableSaveable(tf.train.saver.BaseSaverBuilder.SaveableObject):
    """A custom saveable: keys and values of a "table" held in two variables."""

    def __init__(self, keys, values, name):
        specs = [
            tf.train.saver.BaseSaverBuilder.SaveSpec(keys, "", name + "-keys"),
            tf.train.saver.BaseSaverBuilder.SaveSpec(values, "", name + "-values"),
        ]
        super().__init__(keys, specs, name)
        self.targets = (keys, values)

    def restore(self, restored_tensors, restored_shapes):
        return tf.group(*(tf.assign(v, t) for v, t in zip(self.targets, restored_tensors)))


def test_saveable_objects_in_var_list(tmp_path):
    keys = tf.Variable([b"a", b"b"], name="keys")
    values = tf.Variable([1, 2], name="values")
    table = _TableSaveable(keys, values, "table")
    saver = tf.train.Saver([table])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "t"))
        sess.run([keys.assign([b"x", b"y"]), values.assign([0, 0])])
        saver.restore(sess, path)
        assert sess.run(keys).tolist() == [b"a", b"b"]
        assert sess.run(values).tolist() == [1, 2]
    assert tf.train.list_variables(path) == [("table-keys", [2]), ("table-values", [2])]

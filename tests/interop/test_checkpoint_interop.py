"""Checkpoints and MetaGraphs cross between real TensorFlow and flowgraph (issue 10):
TensorFlow's fixture checkpoint restores here with identical values, and where TensorFlow is
installed (/opt/tfbench) it reads the checkpoints and MetaGraphs written here."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import flowgraph as tf
from tests.helpers import CHECKPOINTS, checkpoint_values, needs_tf, run_tf

CKPT = CHECKPOINTS
needs_fixture = pytest.mark.skipif(not (CKPT / "values.json").is_file(), reason="no fixtures")


def _check_equal(got, want, name):
    got = np.asarray(got)
    assert got.shape == want.shape, name
    if want.dtype == object:
        assert got.tolist() == want.tolist(), name
    else:
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name


@needs_fixture
def test_saver_restores_tensorflow_checkpoint_into_same_named_variables():
    want = checkpoint_values()
    variables = {
        name: tf.Variable(
            np.zeros_like(v) if v.dtype != object else np.full(v.shape, b"", object), name=name
        )
        for name, v in want.items()
    }
    assert tf.train.latest_checkpoint(str(CKPT)) == str(CKPT / "model.ckpt-7")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.train.Saver().restore(sess, tf.train.latest_checkpoint(str(CKPT)))
        for name, v in variables.items():
            _check_equal(sess.run(v), want[name], name)


@needs_fixture
def test_import_tensorflow_meta_graph_then_restore():
    want = checkpoint_values()
    saver = tf.train.import_meta_graph(str(CKPT / "model.ckpt-7.meta"))
    assert saver.saver_def.restore_op_name == "save/restore_all"
    names = sorted(v.op.name for v in tf.global_variables())
    assert names == sorted(want)
    with tf.Session() as sess:
        saver.restore(sess, str(CKPT / "model.ckpt-7"))
        for v in tf.global_variables():
            _check_equal(sess.run(v), want[v.op.name], v.op.name)
        assert len(tf.trainable_variables()) == len(want)


def _run_tf(script: str, *args) -> dict:
    prelude = textwrap.dedent("""
        import json, sys
        import numpy as np
        import tensorflow.compat.v1 as tf
        tf.disable_v2_behavior()
        def enc(a):
            a = np.asarray(a)
            if a.dtype.kind == "S":
                a = a.astype(object)
            if a.dtype == object:
                return {"dtype": "string", "hex": [x.hex() for x in a.reshape(-1)],
                        "shape": list(a.shape)}
            return {"dtype": a.dtype.name, "hex": a.tobytes().hex(), "shape": list(a.shape)}
    """)
    proc = run_tf("-c", prelude + textwrap.dedent(script), *args)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _decode(e):
    if e["dtype"] == "string":
        return np.array([bytes.fromhex(h) for h in e["hex"]], dtype=object).reshape(e["shape"])
    return np.frombuffer(bytes.fromhex(e["hex"]), dtype=e["dtype"]).reshape(e["shape"])


@needs_tf
@needs_fixture
@pytest.mark.parametrize("sharded", [False, True], ids=["one_shard", "sharded"])
def test_tensorflow_reads_our_checkpoint_and_meta_graph(tmp_path, sharded):
    want = checkpoint_values()
    for name, v in want.items():
        tf.Variable(v, name=name)
    r = tf.get_variable("res", initializer=tf.constant([1.5, -2.5]), use_resource=True)
    del r
    saver = tf.train.Saver(sharded=sharded)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "ours.ckpt"), global_step=3)
    got = _run_tf(
        """
        path = sys.argv[1]
        reader = tf.train.load_checkpoint(path)
        out = {k: enc(reader.get_tensor(k)) for k in reader.get_variable_to_shape_map()}
        # TF1: rebuild the graph from our MetaGraph and restore with its Saver
        with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
            saver = tf.train.import_meta_graph(path + ".meta")
            saver.restore(sess, tf.train.latest_checkpoint(sys.argv[2]))
            out["__restored__"] = {v.op.name: enc(sess.run(v)) for v in tf.global_variables()}
        print(json.dumps(out))
        """,
        path,
        tmp_path,
    )
    restored = got.pop("__restored__")
    assert sorted(got) == sorted([*want, "res"])
    for name, w in want.items():
        _check_equal(_decode(got[name]), w, name)
        _check_equal(_decode(restored[name]), w, name)
    np.testing.assert_array_equal(_decode(restored["res"]), [1.5, -2.5])


@needs_tf
def test_we_restore_tensorflow_partitioned_variable(tmp_path):
    prefix = tmp_path / "tf_part"
    _run_tf(
        """
        with tf.Graph().as_default():
            v = tf.get_variable("pv", shape=[10, 3], partitioner=tf.fixed_size_partitioner(3),
                                initializer=tf.ones_initializer())
            w = tf.get_variable("w", shape=[5], initializer=tf.ones_initializer())
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                full = np.arange(30, dtype=np.float32).reshape(10, 3)
                for p in v:
                    info = p._save_slice_info
                    sl = tuple(slice(o, o + n) for o, n in zip(info.var_offset, info.var_shape))
                    sess.run(p.assign(full[sl]))
                tf.train.Saver().save(sess, sys.argv[1])
        print(json.dumps({}))
        """,
        prefix,
    )
    full = tf.Variable(np.zeros((10, 3), np.float32), name="pv")
    with tf.Session() as sess:
        sess.run(full.initializer)
        tf.train.Saver([full]).restore(sess, str(prefix))
        np.testing.assert_array_equal(sess.run(full), np.arange(30).reshape(10, 3))
    reader = tf.train.NewCheckpointReader(str(prefix))
    assert reader.get_variable_to_shape_map() == {"pv": [10, 3], "w": [5]}

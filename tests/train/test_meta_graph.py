"""export_meta_graph / import_meta_graph: collections of every kind, the SaverDef, scopes and
devices; a model restored from its MetaGraph alone predicts what it predicted."""

from __future__ import annotations

import numpy as np
import pytest

import flowgraph as tf


def _build():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    with tf.device("/cpu:0"):
        w = tf.Variable([[1.0], [2.0]], name="w")
    b = tf.get_variable("b", initializer=tf.constant([0.5]), use_resource=True)
    y = tf.add(tf.matmul(x, w), b, name="y")
    loss = tf.reduce_sum(y, name="loss")
    step = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step, name="train")
    tf.add_to_collection("train_op", train)
    tf.add_to_collection("my_ints", 3)
    tf.add_to_collection("my_floats", 2.5)
    tf.add_to_collection("my_strings", "hello")
    tf.add_to_collection("outputs", y)
    tf.summary.scalar("loss", loss)
    return x, y, train


def test_round_trip_collections_saver_and_values(tmp_path):
    x, y, train = _build()
    saver = tf.train.Saver()
    feed = {x: [[1.0, 1.0]]}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, feed)
        want = sess.run(y, feed)
        path = saver.save(sess, str(tmp_path / "m"))
    tf.reset_default_graph()
    restored = tf.train.import_meta_graph(path + ".meta", clear_devices=True)
    g = tf.get_default_graph()
    assert sorted(v.op.name for v in tf.global_variables()) == ["b", "global_step", "w"]
    assert sorted(v.op.name for v in tf.trainable_variables()) == ["b", "w"]
    assert g.get_collection("my_ints") == [3] and g.get_collection("my_floats") == [2.5]
    assert g.get_collection("my_strings") == [b"hello"]
    assert g.get_collection("train_op")[0].name == "train"
    assert g.get_collection("outputs")[0].name == "y:0"
    assert [t.name for t in g.get_collection(tf.GraphKeys.SUMMARIES)] == ["loss_1:0"]
    assert all(op.device == "" for op in g.get_operations())
    with tf.Session() as sess:
        restored.restore(sess, path)
        got = sess.run("y:0", {"x:0": [[1.0, 1.0]]})
        sess.run(g.get_collection("train_op")[0], {"x:0": [[1.0, 1.0]]})  # training goes on
        assert sess.run(tf.train.get_global_step()) == 2
    np.testing.assert_array_equal(got, want)


def test_scopes_text_and_stripped_defaults(tmp_path):
    with tf.name_scope("model"):
        v = tf.Variable([1.0, 2.0], name="v")
        out = tf.identity(v * 2.0, name="out")
    del out
    meta = tf.train.export_meta_graph(
        str(tmp_path / "m.pbtxt"), as_text=True, export_scope="model", strip_default_attrs=True
    )
    assert all(not n.name.startswith("model/") for n in meta.graph_def.node)
    assert meta.meta_info_def.stripped_default_attrs
    assert 'name: "out"' in (tmp_path / "m.pbtxt").read_text()
    tf.reset_default_graph()
    tf.train.import_meta_graph(str(tmp_path / "m.pbtxt"), import_scope="again")
    (var,) = tf.global_variables()
    assert var.op.name == "again/v"
    with tf.Session() as sess:
        sess.run(var.initializer)
        np.testing.assert_array_equal(sess.run("again/out:0"), [2.0, 4.0])
    with pytest.raises(OSError, match="does not exist"):
        tf.train.import_meta_graph(str(tmp_path / "none.meta"))


def test_queue_runners_survive_the_meta_graph():
    q = tf.FIFOQueue(10, tf.float32, name="q")
    enq = q.enqueue([tf.constant(1.0)])
    tf.train.add_queue_runner(tf.train.QueueRunner(q, [enq]))
    meta = tf.train.export_meta_graph()
    assert "queue_runners" in meta.collection_def
    tf.reset_default_graph()
    tf.train.import_meta_graph(meta)
    (qr,) = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    assert qr.queue.name == "q"


def test_stripped_op_list_names_every_op_type_used():
    v = tf.Variable([1.0, 2.0], name="v")
    tf.identity(v * 2.0, name="out")
    meta = tf.train.export_meta_graph(saver_def=tf.train.Saver().as_saver_def())
    ops = {o.name: o for o in meta.meta_info_def.stripped_op_list.op}
    assert set(ops) == {n.op for n in meta.graph_def.node}
    assert ops["SaveV2"].is_stateful and ops["SaveV2"].input_arg[3].type_list_attr == "dtypes"
    assert ops["VariableV2"].output_arg[0].is_ref
    (shared,) = [a for a in ops["VariableV2"].attr if a.name == "shared_name"]
    assert shared.default_value.s == b""

"""SavedModels (builder, loader, simple_save, signatures), graph freezing and write_graph; the
fixture SavedModel written by TensorFlow loads here, and TensorFlow loads ours."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import flowgraph as tf
from tests.helpers import TF_FIXTURES, needs_tf, run_flowgraph
from tests.interop.test_checkpoint_interop import _decode, _run_tf

FIXTURE = TF_FIXTURES / "saved_model_v1"
IO = TF_FIXTURES / "saved_model_v1_io.npz"


def _model(seed=0):
    rng = np.random.RandomState(seed)
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    w = tf.Variable(rng.randn(4, 3).astype(np.float32), name="w")
    b = tf.get_variable(
        "b", initializer=tf.constant(rng.randn(3).astype(np.float32)), use_resource=True
    )
    probs = tf.nn.softmax(tf.matmul(x, w) + b, name="probs")
    return x, probs


@pytest.mark.skipif(not FIXTURE.is_dir(), reason="no TensorFlow fixtures")
def test_tensorflow_saved_model_loads_with_the_same_output():
    io = np.load(IO)
    with tf.Session(graph=tf.Graph()) as sess:
        mg = tf.saved_model.loader.load(sess, [tf.saved_model.tag_constants.SERVING], str(FIXTURE))
        sig = mg.signature_def[tf.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY]
        assert sig.method_name == "tensorflow/serving/predict"
        x = tf.saved_model.utils.get_tensor_from_tensor_info(sig.inputs["x"], sess.graph)
        probs = tf.saved_model.utils.get_tensor_from_tensor_info(sig.outputs["probs"], sess.graph)
        np.testing.assert_allclose(sess.run(probs, {x: io["x"]}), io["probs"], rtol=1e-5, atol=1e-6)


def test_simple_save_then_load_in_a_new_graph(tmp_path):
    export = tmp_path / "export"
    feed = np.random.RandomState(1).randn(5, 4).astype(np.float32)
    with tf.Session(graph=tf.Graph()) as sess:
        x, probs = _model()
        sess.run(tf.global_variables_initializer())
        want = sess.run(probs, {x: feed})
        tf.saved_model.simple_save(sess, str(export), {"x": x}, {"probs": probs})
    assert sorted(os.listdir(export)) == ["saved_model.pb", "variables"]
    assert "variables.index" in os.listdir(export / "variables")
    with tf.Session(graph=tf.Graph()) as sess:
        mg = tf.saved_model.load(sess, ["serve"], str(export))
        sig = mg.signature_def["serving_default"]
        got = sess.run(sig.outputs["probs"].name, {sig.inputs["x"].name: feed})
    np.testing.assert_array_equal(got, want)
    with pytest.raises(AssertionError, match="isn't empty"):
        tf.saved_model.builder.SavedModelBuilder(str(export))


def test_builder_tags_text_assets_and_main_op(tmp_path):
    asset = tmp_path / "vocab.txt"
    asset.write_text("a\nb\n")
    export = tmp_path / "m"
    with tf.Session(graph=tf.Graph()) as sess:
        x, probs = _model()
        path_t = tf.constant(str(asset), name="vocab_path")
        tf.add_to_collection(tf.GraphKeys.ASSET_FILEPATHS, path_t)
        seen = tf.Variable(b"", name="seen", trainable=False)
        main_op = tf.group(tf.assign(seen, path_t), name="main_op")
        sess.run(tf.global_variables_initializer())
        b = tf.saved_model.builder.SavedModelBuilder(str(export))
        with pytest.raises(AssertionError, match="add_meta_graph_and_variables"):
            b.add_meta_graph(["eval"])
        sig = tf.saved_model.signature_def_utils.predict_signature_def({"x": x}, {"p": probs})
        assert tf.saved_model.signature_def_utils.is_valid_signature(sig)
        b.add_meta_graph_and_variables(
            sess,
            ["serve"],
            signature_def_map={"serving_default": sig},
            assets_collection=tf.get_collection(tf.GraphKeys.ASSET_FILEPATHS),
            main_op=main_op,
        )
        b.add_meta_graph(["eval", "gpu"])
        with pytest.raises(KeyError, match="reserved"):
            b.add_meta_graph(["x"], signature_def_map={"__saved_model_init_op": sig})
        assert b.save(as_text=True).endswith("saved_model.pbtxt")
    assert (export / "assets" / "vocab.txt").read_text() == "a\nb\n"
    with tf.Session(graph=tf.Graph()) as sess:
        tf.saved_model.loader.load(sess, ["serve"], str(export), import_scope="imp")
        # the main op ran with the asset path fed: it points into the SavedModel
        got = sess.run("imp/seen:0")
        assert got.decode() == str(export / "assets" / "vocab.txt")
    with tf.Session(graph=tf.Graph()) as sess:
        tf.saved_model.loader.load(sess, ["gpu", "eval"], str(export))
        with pytest.raises(RuntimeError, match="could not be found"):
            tf.saved_model.loader.load(sess, ["train"], str(export))
    assert tf.saved_model.loader.maybe_saved_model_directory(str(export))
    with pytest.raises(OSError, match="SavedModel file does not exist"):
        tf.saved_model.loader.load(tf.Session(graph=tf.Graph()), ["serve"], str(tmp_path))


def test_signature_helpers():
    ex = tf.placeholder(tf.string, [None], name="ex")
    scores = tf.placeholder(tf.float32, [None, 2], name="scores")
    c = tf.saved_model.signature_def_utils.classification_signature_def(ex, None, scores)
    r = tf.saved_model.signature_def_utils.regression_signature_def(ex, scores)
    assert tf.saved_model.signature_def_utils.is_valid_signature(c)
    assert tf.saved_model.signature_def_utils.is_valid_signature(r)
    info = tf.saved_model.utils.build_tensor_info(scores)
    assert info.name == "scores:0" and info.dtype == tf.float32.as_datatype_enum
    assert [d.size for d in info.tensor_shape.dim] == [-1, 2]
    with pytest.raises(ValueError, match="cannot be None or empty"):
        tf.saved_model.signature_def_utils.predict_signature_def({}, {"s": scores})


def test_freeze_graph_and_write_graph(tmp_path):
    feed = np.random.RandomState(2).randn(3, 4).astype(np.float32)
    x, probs = _model()
    with tf.control_dependencies([tf.check_numerics(probs, "bad")]):
        out = tf.identity(probs, name="out")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(out, {x: feed})
        gd = sess.graph.as_graph_def()
        frozen = tf.graph_util.convert_variables_to_constants(sess, gd, ["out"])
    ops = {n.op for n in frozen.node}
    assert not ops & {"VariableV2", "VarHandleOp", "ReadVariableOp", "Assign"}
    sub = tf.graph_util.extract_sub_graph(gd, ["probs"])
    assert "out" not in {n.name for n in sub.node} and "x" in {n.name for n in sub.node}
    slim = tf.graph_util.remove_training_nodes(frozen, protected_nodes=["out"])
    assert "CheckNumerics" not in {n.op for n in slim.node}
    for g in (frozen, slim):
        with tf.Graph().as_default(), tf.Session() as sess:
            tf.import_graph_def(g, name="")
            np.testing.assert_allclose(sess.run("out:0", {"x:0": feed}), want, rtol=1e-6)
    path = tf.train.write_graph(frozen, str(tmp_path), "frozen.pb", as_text=False)
    assert tf.GraphDef.FromString(Path(path).read_bytes()) == frozen
    text = tf.io.write_graph(tf.get_default_graph(), str(tmp_path / "sub"), "g.pbtxt")
    assert 'op: "VariableV2"' in Path(text).read_text()
    with pytest.raises(AssertionError, match="nope is not in graph"):
        tf.graph_util.extract_sub_graph(gd, ["nope"])
    assert tf.compat.v1.graph_util.convert_variables_to_constants is not None


@needs_tf
def test_tensorflow_loads_our_saved_model_and_runs_our_frozen_graph(tmp_path):
    feed = np.random.RandomState(3).randn(6, 4).astype(np.float32)
    np.save(tmp_path / "feed.npy", feed)
    with tf.Session(graph=tf.Graph()) as sess:
        x, probs = _model(seed=4)
        sess.run(tf.global_variables_initializer())
        want = sess.run(probs, {x: feed})
        tf.saved_model.simple_save(sess, str(tmp_path / "sm"), {"x": x}, {"probs": probs})
        frozen = tf.graph_util.convert_variables_to_constants(sess, sess.graph_def, ["probs"])
        tf.train.write_graph(frozen, str(tmp_path), "frozen.pb", as_text=False)
    got = _run_tf(
        """
        d = sys.argv[1]
        feed = np.load(d + "/feed.npy")
        out = {}
        with tf.Graph().as_default(), tf.Session() as sess:
            mg = tf.saved_model.loader.load(sess, ["serve"], d + "/sm")
            sig = mg.signature_def["serving_default"]
            out["saved_model"] = enc(sess.run(sig.outputs["probs"].name,
                                              {sig.inputs["x"].name: feed}))
        gd = tf.GraphDef()
        gd.ParseFromString(open(d + "/frozen.pb", "rb").read())
        with tf.Graph().as_default(), tf.Session() as sess:
            tf.import_graph_def(gd, name="")
            out["frozen"] = enc(sess.run("probs:0", {"x:0": feed}))
        print(json.dumps(out))
        """,
        tmp_path,
    )
    np.testing.assert_allclose(_decode(got["saved_model"]), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_decode(got["frozen"]), want, rtol=1e-5, atol=1e-6)


def test_tensorflow_module_paths_of_checkpoint_code_resolve(tmp_path):
    """TF1 programs import these modules by path; `flowgraph run` maps them to ours."""
    script = tmp_path / "prog.py"
    script.write_text(
        "from tensorflow.python.framework import graph_util\n"
        "from tensorflow.python.training import saver as saver_lib\n"
        "from tensorflow.python.saved_model import builder, loader, signature_def_utils\n"
        "print(graph_util.convert_variables_to_constants.__module__, saver_lib.Saver.__name__,\n"
        "      builder.SavedModelBuilder.__name__, loader.load.__name__)\n"
    )
    out = run_flowgraph("run", script)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [
        "flowgraph.framework.graph_util",
        "Saver",
        "SavedModelBuilder",
        "load",
    ]

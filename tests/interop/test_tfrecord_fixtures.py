"""TFRecord interop: files written by real TensorFlow (plain, GZIP, ZLIB) read and parse here to
TensorFlow's values, and files written here are read by real TensorFlow's tf_record_iterator
(run as a subprocess of /opt/tfbench; skipped where it is absent)."""

import json

import numpy as np
import pytest

import flowgraph as tf
from tests.helpers import TF_FIXTURES, needs_tf, run_tf

FIXTURES = TF_FIXTURES / "tfrecord"

FEATURES = {
    "label": tf.FixedLenFeature([], tf.int64),
    "pixels": tf.FixedLenFeature([6], tf.float32),
    "name": tf.FixedLenFeature([], tf.string),
}


def _files():
    if not FIXTURES.exists():
        pytest.skip(f"TensorFlow fixtures not found under {FIXTURES}")
    return json.loads((FIXTURES / "expected.json").read_text())


@pytest.mark.parametrize(
    "name", ["examples.tfrecord", "examples.tfrecord.gz", "examples.tfrecord.zlib"]
)
def test_reader_pipeline_parses_tensorflow_files(name):
    expected = _files()
    compression = expected["files"][name] or ""
    queue = tf.train.string_input_producer([str(FIXTURES / name)], num_epochs=1, shuffle=False)
    reader = tf.TFRecordReader(options=tf.python_io.TFRecordOptions(compression))
    _, serialized = reader.read_up_to(queue, 10)
    parsed = tf.parse_example(serialized, FEATURES)
    tags = tf.parse_example(serialized, {"tags": tf.FixedLenSequenceFeature([], tf.int64, True)})
    want = np.load(FIXTURES / "parsed.npz", allow_pickle=True)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        got, got_tags = sess.run([parsed, tags])
        coord.request_stop()
        coord.join(threads)
    for key in ("label", "pixels", "name"):
        assert got[key].dtype == want[key].dtype
        np.testing.assert_array_equal(got[key], want[key])
    # The VarLenFeature `tags` as TF's sparse parts: rebuild the dense rows from both.
    dense = np.full(want["tags_dense_shape"], -7, np.int64)
    dense[tuple(want["tags_indices"].T)] = want["tags_values"]
    lengths = (dense != -7).sum(axis=1)
    for row, n in enumerate(lengths):
        np.testing.assert_array_equal(got_tags["tags"][row, :n], dense[row, :n])
        assert list(got_tags["tags"][row, :n]) == expected["records"][row]["tags"]


def test_var_len_feature_is_tensorflows_sparse_tensor():
    _files()
    records = list(tf.python_io.tf_record_iterator(str(FIXTURES / "examples.tfrecord")))
    parsed = tf.parse_example(records, dict(FEATURES, tags=tf.VarLenFeature(tf.int64)))
    assert isinstance(parsed["tags"], tf.SparseTensor)
    with tf.Session() as sess:
        tags = sess.run(parsed["tags"])
    want = np.load(FIXTURES / "parsed.npz", allow_pickle=True)
    np.testing.assert_array_equal(tags.indices, want["tags_indices"])
    np.testing.assert_array_equal(tags.values, want["tags_values"])
    np.testing.assert_array_equal(tags.dense_shape, want["tags_dense_shape"])


def test_parse_example_sparse_parts_equal_tensorflow():
    """The ParseExample kernel's sparse outputs for `tags` equal parse_example's in TF."""
    _files()
    from flowgraph.core import dtypes
    from flowgraph.kernels.cpu.parsing import _parse_examples

    records = list(tf.python_io.tf_record_iterator(str(FIXTURES / "examples.tfrecord")))
    indices, values, shape = _parse_examples(
        records, None, ["tags"], [dtypes.int64], [], [], [], [], True
    )
    want = np.load(FIXTURES / "parsed.npz", allow_pickle=True)
    np.testing.assert_array_equal(indices, want["tags_indices"])
    np.testing.assert_array_equal(values, want["tags_values"])
    np.testing.assert_array_equal(shape, want["tags_dense_shape"])


@needs_tf
@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_tensorflow_reads_our_files(tmp_path, compression):
    path = tmp_path / "ours.tfrecord"
    records = [b"", b"x" * 1000, tf.train.Example().SerializeToString(), bytes(range(256))]
    options = tf.python_io.TFRecordOptions(compression)
    with tf.python_io.TFRecordWriter(str(path), options) as writer:
        for r in records:
            writer.write(r)
    script = (
        "import sys, tensorflow as tf\n"
        "it = tf.compat.v1.io.tf_record_iterator(sys.argv[1], "
        "tf.compat.v1.io.TFRecordOptions(sys.argv[2] or None))\n"
        "print([r.hex() for r in it])\n"
    )
    out = run_tf("-c", script, path, compression)
    got = eval(out.stdout.strip().splitlines()[-1])
    assert [bytes.fromhex(h) for h in got] == records


_TF_GRAPH_SCRIPT = r"""
import sys, numpy as np
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
out_dir = sys.argv[1]
ex = []
for v, t in (([1.0, 2.0], [7]), ([3.0, 4.0], [8, 9])):
    e = tf.train.Example()
    e.features.feature["v"].float_list.value.extend(v)
    e.features.feature["t"].int64_list.value.extend(t)
    ex.append(e.SerializeToString())
g = tf.Graph()
with g.as_default():
    q = tf.FIFOQueue(10, [tf.float32, tf.int64], shapes=[[2], []], name="q")
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
    q.enqueue_many([x, y], name="enq")
    a, b = q.dequeue_many(2, name="deq")
    tf.identity(a, name="deq_a"); tf.identity(b, name="deq_b")
    ser = tf.placeholder(tf.string, [None], name="ser")
    p = tf.parse_example(ser, {"v": tf.FixedLenFeature([2], tf.float32),
                               "t": tf.VarLenFeature(tf.int64)})
    tf.identity(p["v"], name="pv"); tf.identity(p["t"].values, name="ptv")
    tf.identity(p["t"].indices, name="pti")
    ps = tf.parse_single_example(ser[0], {"v": tf.FixedLenFeature([2], tf.float32)})
    tf.identity(ps["v"], name="psv")
    tf.identity(tf.decode_raw(tf.constant([b"abcd", b"efgh"]), tf.int16), name="raw")
    c = tf.decode_csv(tf.constant(["1,2.5", "3,4"]), [[0], [0.0]])
    tf.identity(c[0], name="c0"); tf.identity(c[1], name="c1")
fetches = ["deq_a:0", "deq_b:0", "pv:0", "ptv:0", "pti:0", "psv:0", "raw:0", "c0:0", "c1:0"]
with tf.Session(graph=g) as sess:
    sess.run("enq", {"x:0": [[1, 2], [3, 4], [5, 6]], "y:0": [1, 2, 3]})
    vals = sess.run(fetches, {"ser:0": ex})
open(out_dir + "/graph.pb", "wb").write(g.as_graph_def().SerializeToString())
np.savez(out_dir + "/out.npz", ser=np.array(ex, dtype=object),
         **{f.split(":")[0]: v for f, v in zip(fetches, vals)})
"""


@needs_tf
def test_tensorflow_graph_with_queue_and_parsing_ops_runs_here(tmp_path):
    """A GraphDef built by real TF (FIFOQueueV2, QueueEnqueueManyV2, QueueDequeueManyV2,
    ParseExampleV2, DecodeRaw, DecodeCSV) imports and gives TF's values."""
    run_tf("-c", _TF_GRAPH_SCRIPT, tmp_path)
    want = np.load(tmp_path / "out.npz", allow_pickle=True)
    graph_def = tf.GraphDef()
    graph_def.ParseFromString((tmp_path / "graph.pb").read_bytes())
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(graph_def, name="")
    names = ["deq_a", "deq_b", "pv", "ptv", "pti", "psv", "raw", "c0", "c1"]
    with tf.Session(graph=g) as sess:
        sess.run("enq", {"x:0": [[1, 2], [3, 4], [5, 6]], "y:0": [1, 2, 3]})
        got = sess.run([n + ":0" for n in names], {"ser:0": want["ser"]})
    for name, value in zip(names, got):
        assert np.asarray(value).dtype == want[name].dtype, name
        np.testing.assert_array_equal(value, want[name], err_msg=name)

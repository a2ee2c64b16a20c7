"""TFRecord interop: files written by real TensorFlow (plain, GZIP, ZLIB) read and parse here to
TensorFlow's values, and files written here are read by real TensorFlow's tf_record_iterator
(run as a subprocess of /opt/tfbench; skipped where it is absent)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import flowgraph as tf

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
FIXTURES = SHARED / "fixtures" / "tensorflow" / "tfrecord"
TF_PYTHON = Path("/opt/tfbench/bin/python")

FEATURES = {
    "label": tf.FixedLenFeature([], tf.int64),
    "pixels": tf.FixedLenFeature([6], tf.float32),
    "name": tf.FixedLenFeature([], tf.string),
}


def _files():
    if not FIXTURES.exists():
        pytest.skip(f"TensorFlow fixtures not found under {FIXTURES}")
    return json.loads((FIXTURES / "expected.json").read_text())


@pytest.mark.parametrize("name", ["examples.tfrecord", "examples.tfrecord.gz",
                                  "examples.tfrecord.zlib"])  # fmt: skip
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


@pytest.mark.skipif(not TF_PYTHON.exists(), reason="real TensorFlow (/opt/tfbench) not installed")
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
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    out = subprocess.run(
        [str(TF_PYTHON), "-c", script, str(path), compression],
        capture_output=True, text=True, timeout=240, env=env, check=True,
    )  # fmt: skip
    got = eval(out.stdout.strip().splitlines()[-1])
    assert [bytes.fromhex(h) for h in got] == records
    assert sys.executable  # the test process itself never imports TensorFlow

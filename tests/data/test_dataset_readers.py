"""File datasets: TFRecordDataset over TensorFlow's own files (plain, GZIP, ZLIB) parsing to
TensorFlow's values, several files in order and interleaved, TextLineDataset and
FixedLengthRecordDataset against Python references."""

import gzip
import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from dataset_helpers import drain

import flowgraph as tf

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
FIXTURES = SHARED / "fixtures" / "tensorflow" / "tfrecord"
FEATURES = {
    "label": tf.FixedLenFeature([], tf.int64),
    "pixels": tf.FixedLenFeature([6], tf.float32),
    "name": tf.FixedLenFeature([], tf.string),
}


@pytest.mark.parametrize(
    "name", ["examples.tfrecord", "examples.tfrecord.gz", "examples.tfrecord.zlib"]
)
def test_tfrecord_dataset_parses_tensorflow_files(name):
    if not FIXTURES.exists():
        pytest.skip(f"TensorFlow fixtures not found under {FIXTURES}")
    compression = json.loads((FIXTURES / "expected.json").read_text())["files"][name] or ""
    ds = tf.data.TFRecordDataset(str(FIXTURES / name), compression_type=compression)
    ds = ds.map(lambda r: tf.parse_single_example(r, FEATURES)).batch(10)
    (got,) = drain(ds)
    want = np.load(FIXTURES / "parsed.npz", allow_pickle=True)
    for key in FEATURES:
        assert got[key].dtype == want[key].dtype
        np.testing.assert_array_equal(got[key], want[key])


def _write_shards(tmp_path, shards=3, per=4):
    paths, records = [], []
    for s in range(shards):
        path = str(tmp_path / f"shard-{s}.tfrecord")
        with tf.python_io.TFRecordWriter(path) as w:
            for i in range(per):
                rec = f"{s}:{i}".encode()
                w.write(rec)
                records.append(rec)
        paths.append(path)
    return paths, records


def test_tfrecord_files_in_order_and_interleaved(tmp_path):
    paths, records = _write_shards(tmp_path)
    assert drain(tf.data.TFRecordDataset(paths)) == records
    inter = drain(tf.data.TFRecordDataset(paths, num_parallel_reads=2))
    by_file = [records[:4], records[4:8], records[8:]]
    want = [
        by_file[0][0],
        by_file[1][0],
        by_file[0][1],
        by_file[1][1],
        by_file[0][2],
        by_file[1][2],
        by_file[0][3],
        by_file[1][3],
    ] + by_file[2]
    assert inter == want
    files = tf.data.Dataset.list_files(str(tmp_path / "*.tfrecord"), shuffle=False)
    assert drain(files.interleave(tf.data.TFRecordDataset, cycle_length=3)) == [
        r for trio in zip(*by_file) for r in trio
    ]
    with pytest.raises(tf.errors.NotFoundError):
        drain(tf.data.TFRecordDataset(str(tmp_path / "missing.tfrecord")))


def test_text_line_dataset_strips_line_endings(tmp_path):
    plain = tmp_path / "a.txt"
    plain.write_bytes(b"one\r\ntwo\nthree")
    gz = tmp_path / "b.txt.gz"
    gz.write_bytes(gzip.compress(b"x\ny\n"))
    zl = tmp_path / "c.txt.z"
    zl.write_bytes(zlib.compress(b"z\n"))
    assert drain(tf.data.TextLineDataset(str(plain))) == [b"one", b"two", b"three"]
    assert drain(tf.data.TextLineDataset([str(gz)], compression_type="GZIP")) == [b"x", b"y"]
    assert drain(tf.data.TextLineDataset(str(zl), compression_type="ZLIB")) == [b"z"]


def test_fixed_length_record_dataset_matches_slicing(tmp_path):
    body = bytes(range(40))
    path = tmp_path / "f.bin"
    path.write_bytes(b"HEAD" + body + b"FT")
    ds = tf.data.FixedLengthRecordDataset(str(path), 8, header_bytes=4, footer_bytes=2)
    got = drain(ds)
    assert got == [body[i : i + 8] for i in range(0, 40, 8)]
    decoded = drain(ds.map(lambda r: tf.decode_raw(r, tf.uint8)).batch(5))
    np.testing.assert_array_equal(decoded[0], np.arange(40, dtype=np.uint8).reshape(5, 8))

"""flowgraph.core.records: a corrupt record leaves the file at it, in every compression."""

import gzip
import zlib

import pytest

import flowgraph as tf
from flowgraph.core import errors, records

COMPRESS = {"": bytes, "GZIP": gzip.compress, "ZLIB": zlib.compress}


@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_a_read_that_fails_leaves_the_file_at_the_bad_record(tmp_path, compression):
    plain = tmp_path / "plain.tfrecord"
    with tf.python_io.TFRecordWriter(str(plain)) as w:
        for data in (b"first", b"second", b"third"):
            w.write(data)
    raw = bytearray(plain.read_bytes())
    raw[21 + 12] ^= 0xFF  # a byte of the second record's data (the first is 16 + 5 bytes)
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(COMPRESS[compression](bytes(raw)))
    f = records.RecordFile(str(path), compression)
    assert f.read() == b"first"
    for _ in range(2):  # TF's RecordReader keeps its offset at the bad record
        with pytest.raises(errors.DataLossError, match="corrupted record data at offset 21"):
            f.read()
        assert f.offset == 21
    f.close()

"""flowgraph.core.records: a corrupt record leaves the file at it, in every compression; read_many
cuts records across read-ahead blocks with their offsets; the compiled walk's CRCs are
google_crc32c's."""

import gzip
import zlib

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors, records, records_walk

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


def _write_records(path, payloads):
    with open(path, "wb") as f:
        f.writelines(records.encode_record(p) for p in payloads)


def test_read_many_cuts_records_across_blocks_with_their_offsets(tmp_path, monkeypatch):
    # Sizes around a 64 KiB read-ahead: records split across blocks and larger than one.
    monkeypatch.setattr(records, "_READ_AHEAD", 1 << 16)
    sizes = [0, 1, 300, 70_000, 5, 65_536, 131_072, *range(0, 4000, 37)]
    payloads = [bytes([i % 251]) * s for i, s in enumerate(sizes)]
    path = tmp_path / "r.tfrecord"
    _write_records(path, payloads)
    f = records.RecordFile(str(path))
    got, offsets = [], []
    while True:
        o, d = f.read_many(13)
        offsets += o
        got += d
        if len(d) < 13:
            break
    assert got == payloads
    want_offsets = [0]
    for p in payloads[:-1]:
        want_offsets.append(want_offsets[-1] + 16 + len(p))
    assert offsets == want_offsets
    assert f.read_many(5) == ([], [])


@pytest.mark.parametrize("block", [100, 4096])
def test_read_chunks_hold_the_records_in_place_across_blocks(tmp_path, monkeypatch, block):
    monkeypatch.setattr(records, "_READ_AHEAD", block)
    payloads = [bytes([i % 251]) * (i * 7 % 300) for i in range(200)]
    path = tmp_path / "r.tfrecord"
    _write_records(path, payloads)
    f = records.RecordFile(str(path))
    got, offsets, counts = [], [], []
    while chunks := f.read_chunks(20):
        counts.append(sum(len(c.starts) for c in chunks))
        for c in chunks:
            assert isinstance(c.buf, bytes)
            got += [c.buf[s : s + m] for s, m in zip(c.starts.tolist(), c.lengths.tolist())]
            offsets += c.offsets.tolist()
    assert got == payloads and counts == [20] * 10
    assert offsets == np.cumsum([0] + [16 + len(p) for p in payloads[:-1]]).tolist()


@pytest.mark.parametrize("where", [0, 8, 12, 16], ids=["length", "length CRC", "data", "data CRC"])
def test_read_many_returns_the_records_before_a_bad_one_then_fails_on_it(tmp_path, where):
    payloads = [b"r%03d" % i for i in range(40)]
    path = tmp_path / "bad.tfrecord"
    _write_records(path, payloads)
    raw = bytearray(path.read_bytes())
    raw[20 * 20 + where] ^= 0xFF  # record 20 (each is 16 + 4 bytes)
    path.write_bytes(bytes(raw))
    f = records.RecordFile(str(path))
    assert f.read_many(15)[1] == payloads[:15]
    with pytest.raises(errors.DataLossError, match="corrupted record .* at offset 400"):
        f.read_many(15)  # records 15..19 are read, then record 20 fails
    assert f.offset == 400
    with pytest.raises(errors.DataLossError, match="at offset 400"):
        f.read_many(3)


def test_the_compiled_walk_checks_crcs_as_google_crc32c_does():
    rng = np.random.RandomState(0)
    for size in [*range(40), 255, 256, 4097]:
        data = rng.randint(0, 256, size).astype(np.uint8).tobytes()
        assert records_walk.masked_crc(data) == records.masked_crc32c(data), size

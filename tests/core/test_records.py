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


def test_the_table_crc_and_the_sse42_crc_equal_google_crc32c():
    """Both compiled CRCs: the tables (any CPU) and SSE4.2's instruction (where it is)."""
    import numba

    from flowgraph.core import byte_intrinsics

    tables = records_walk.tables()
    variants = [numba.njit(records_walk._table_crc)]
    if byte_intrinsics.has_sse42():
        assert records_walk._compiled[0].py_func is records_walk._hw_crc
        variants.append(records_walk._compiled[0])
    rng = np.random.RandomState(1)
    data = rng.randint(0, 256, 5000).astype(np.uint8)
    for start, stop in [(0, 0), (3, 4), (1, 9), (5, 21), (7, 4096), (0, 5000)]:
        want = records.masked_crc32c(data[start:stop].tobytes())
        for crc in variants:
            assert crc(data, start, stop, tables) == want, (crc, start, stop)


def _take(buf, pos, count):
    """A read_parsed parser: the records' data framed by the compiled walk, as
    dataset_wire.Layout.records frames them (CUT where they run past the buffer, BAD where one
    fails its CRC)."""
    frames = np.empty((count, 2), np.int64)
    k = records_walk.walk(buf, pos, count, frames)
    stop = int(frames[k - 1, 0] + frames[k - 1, 1] + 16) if k else pos
    if k < count:
        cut_short = records_walk.compiled_walk()[1]
        return None, records_walk.CUT if cut_short(
            buf, stop, records_walk.tables()
        ) else records_walk.BAD
    return [buf[s + 12 : s + 12 + m].tobytes() for s, m in frames.tolist()], stop


@pytest.mark.parametrize("block", [64, 1000])
def test_read_parsed_refills_across_blocks_and_decodes_the_rest_at_the_end(
    tmp_path, monkeypatch, block
):
    monkeypatch.setattr(records, "_READ_AHEAD", block)
    payloads = [bytes([i]) * (i * 13 % 90) for i in range(50)]
    path = tmp_path / "r.tfrecord"
    _write_records(path, payloads)
    f = records.RecordFile(str(path))
    got, counts = [], []
    while True:
        count, out = f.read_parsed(8, _take)
        if not count:  # a block that holds fewer than 8 whole records: read_chunks reads on
            chunks = f.read_chunks(8)
            if not chunks:
                break
            out = [c.buf[s : s + m] for c in chunks for s, m in zip(c.starts, c.lengths)]
            count = len(out)
        counts.append(count)
        got += out
    assert got == payloads and f.offset == path.stat().st_size
    assert counts[-1] == 50 % 8  # the rest, decoded at the end of the file
    assert f.read_parsed(8, _take) == (0, None)


@pytest.mark.parametrize("where", [3, 14], ids=["length", "data"])
def test_read_parsed_consumes_nothing_where_a_record_fails(tmp_path, where):
    payloads = [b"r%03d" % i for i in range(40)]
    path = tmp_path / "bad.tfrecord"
    _write_records(path, payloads)
    raw = bytearray(path.read_bytes())
    raw[20 * 20 + where] ^= 0xFF  # record 20: a length past the file (its CRC fails), or data
    path.write_bytes(bytes(raw))
    f = records.RecordFile(str(path))
    assert f.read_parsed(16, _take) == (16, payloads[:16])
    assert f.read_parsed(16, _take) == (0, None) and f.offset == 16 * 20
    with pytest.raises(errors.DataLossError, match="at offset 400"):
        f.read_many(16)

"""Readers (§4.5) against Python references: TFRecord (plain/GZIP/ZLIB), text lines, fixed-length
records, whole files, identity; read/read_up_to, counters, reset, serialize/restore; a reader
waiting for work from an empty queue parks no thread and is released by closing the queue."""

import gzip
import threading
import zlib

import numpy as np
import pytest

import flowgraph as tf
from tests.helpers import in_thread


def _run_reader(reader, paths, fetch_fn, steps=None):
    queue = tf.FIFOQueue(10, [tf.string], shapes=[[]])
    fetch = fetch_fn(reader, queue)
    out = []
    with tf.Session() as sess:
        sess.run(queue.enqueue_many([paths]))
        sess.run(queue.close())
        try:
            while steps is None or len(out) < steps:
                out.append(sess.run(fetch))
        except tf.errors.OutOfRangeError:
            pass
    return out


@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_tfrecord_reader_reads_every_record_with_offsets(tmp_path, compression):
    paths = []
    for i in range(2):
        path = str(tmp_path / f"f{i}.tfrecord")
        with tf.python_io.TFRecordWriter(path, tf.python_io.TFRecordOptions(compression)) as w:
            for j in range(3):
                w.write(b"r%d%d" % (i, j) * (j + 1))
        paths.append(path)
    got = _run_reader(tf.TFRecordReader(options=compression or None), paths, lambda r, q: r.read(q))
    assert [v for _, v in got] == [b"r%d%d" % (i, j) * (j + 1) for i in range(2) for j in range(3)]
    offsets = [int(k.rsplit(b":", 1)[1]) for k, _ in got[:3]]
    assert offsets == [0, 19, 41]  # 16 bytes of framing + the data
    assert got[0][0] == paths[0].encode() + b":0"


def test_read_up_to_stops_at_the_end_of_a_work_item(tmp_path):
    paths = []
    for i, n in enumerate([5, 2]):
        path = str(tmp_path / f"f{i}.tfrecord")
        with tf.python_io.TFRecordWriter(path) as w:
            for j in range(n):
                w.write(b"%d" % j)
        paths.append(path)
    got = _run_reader(tf.TFRecordReader(), paths, lambda r, q: r.read_up_to(q, 3)[1])
    assert [list(v) for v in got] == [[b"0", b"1", b"2"], [b"3", b"4"], [b"0", b"1"]]


def test_read_up_to_keys_are_the_file_name_and_offset_even_with_percent_signs(tmp_path):
    path = str(tmp_path / "50%d %s.tfrecord")
    with tf.python_io.TFRecordWriter(path) as w:
        for j in range(20):
            w.write(b"%02d" % j)  # 18 bytes a record
    (keys, values), _ = _run_reader(tf.TFRecordReader(), [path], lambda r, q: r.read_up_to(q, 16))
    assert list(values) == [b"%02d" % j for j in range(16)]
    assert list(keys) == [path.encode() + b":%d" % (18 * j) for j in range(16)]


def test_text_line_reader_skips_headers_and_strips_endings(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes(b"header\nl1\r\nl2\n\nl4")
    got = _run_reader(tf.TextLineReader(skip_header_lines=1), [str(path)], lambda r, q: r.read(q))
    assert [v for _, v in got] == [b"l1", b"l2", b"", b"l4"]
    assert [k.rsplit(b":", 1)[1] for k, _ in got] == [b"2", b"3", b"4", b"5"]


@pytest.mark.parametrize("encoding", ["", "GZIP", "ZLIB"])
def test_fixed_length_reader_with_header_footer_and_hop(tmp_path, encoding):
    data = bytes(range(3)) + bytes(range(100, 120)) + b"FOOT"
    packed = {"": data, "GZIP": gzip.compress(data), "ZLIB": zlib.compress(data)}[encoding]
    path = tmp_path / "fixed.bin"
    path.write_bytes(packed)
    reader = tf.FixedLengthRecordReader(4, header_bytes=3, footer_bytes=4, encoding=encoding)
    got = _run_reader(reader, [str(path)], lambda r, q: r.read(q))
    body = bytes(range(100, 120))
    assert [v for _, v in got] == [body[i : i + 4] for i in range(0, 20, 4)]
    assert got[1][0].endswith(b":1")
    hop = tf.FixedLengthRecordReader(
        4, header_bytes=3, footer_bytes=4, hop_bytes=6, encoding=encoding
    )
    got = _run_reader(hop, [str(path)], lambda r, q: r.read(q))
    assert [v for _, v in got] == [body[i : i + 4] for i in (0, 6, 12)]


def test_whole_file_and_identity_readers(tmp_path):
    (tmp_path / "a").write_bytes(b"AAA")
    (tmp_path / "b").write_bytes(b"")
    paths = [str(tmp_path / "a"), str(tmp_path / "b")]
    got = _run_reader(tf.WholeFileReader(), paths, lambda r, q: r.read(q))
    assert got == [(p.encode(), c) for p, c in zip(paths, [b"AAA", b""])]
    got = _run_reader(tf.IdentityReader(), ["x", "y"], lambda r, q: r.read(q))
    assert got == [(b"x", b"x"), (b"y", b"y")]


def test_counters_reset_and_state_round_trip(tmp_path):
    path = str(tmp_path / "f.tfrecord")
    with tf.python_io.TFRecordWriter(path) as w:
        for j in range(4):
            w.write(b"%d" % j)
    queue = tf.FIFOQueue(10, [tf.string], shapes=[[]])
    reader = tf.TFRecordReader()
    _, value = reader.read(queue)
    with tf.Session() as sess:
        sess.run(queue.enqueue_many([[path, path]]))
        assert sess.run(value) == b"0"
        state = sess.run(reader.serialize_state())
        assert sess.run(value) == b"1"
        assert sess.run(reader.num_records_produced()) == 2
        sess.run(reader.restore_state(state))
        assert sess.run(value) == b"1"  # back to just after record 0
        assert sess.run(reader.num_records_produced()) == 2
        for want in (b"2", b"3", b"0"):
            assert sess.run(value) == want
        assert sess.run(reader.num_work_units_completed()) == 1
        sess.run(reader.reset())
        assert sess.run(reader.num_records_produced()) == 0
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(reader.restore_state(b"\xff\xff"))


def test_reader_of_missing_file_fails_with_not_found(tmp_path):
    queue = tf.FIFOQueue(10, [tf.string], shapes=[[]])
    _, value = tf.TFRecordReader().read(queue)
    with tf.Session() as sess:
        sess.run(queue.enqueue(str(tmp_path / "absent")))
        with pytest.raises(tf.errors.NotFoundError):
            sess.run(value)


def test_corrupt_record_is_data_loss(tmp_path):
    path = tmp_path / "bad.tfrecord"
    with tf.python_io.TFRecordWriter(str(path)) as w:
        w.write(b"hello")
    raw = bytearray(path.read_bytes())
    raw[13] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(tf.errors.DataLossError, match="corrupted record data"):
        list(tf.python_io.tf_record_iterator(str(path)))


def test_reader_waiting_for_work_is_released_by_close():
    queue = tf.FIFOQueue(10, [tf.string], shapes=[[]])
    _, value = tf.IdentityReader().read(queue)
    with tf.Session() as sess:
        join = in_thread(lambda: sess.run(value))
        sess.run(queue.enqueue("w"))  # served whether or not the read already waits
        assert join() == b"w"
        join = in_thread(lambda: sess.run(value))
        sess.run(queue.close())
        with pytest.raises(tf.errors.OutOfRangeError):
            join()


def test_read_file_and_write_file(tmp_path):
    path = str(tmp_path / "x.bin")
    with tf.Session() as sess:
        sess.run(tf.write_file(path, b"\x00abc"))
        assert sess.run(tf.read_file(path)) == b"\x00abc"


def test_record_options_reject_unsupported_arguments():
    with pytest.raises(NotImplementedError, match="window_bits"):
        tf.python_io.TFRecordOptions("ZLIB", window_bits=10)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.python_io.TFRecordOptions.get_compression_type_string("BZIP2")
    assert (
        tf.python_io.TFRecordOptions.get_compression_type_string(
            tf.python_io.TFRecordCompressionType.GZIP
        )
        == "GZIP"
    )
    np.testing.assert_equal(tf.LMDBReader is not None, True)
    with pytest.raises(NotImplementedError):
        tf.LMDBReader()


def test_reader_timeout_withdraws_its_wait_for_work():
    queue = tf.FIFOQueue(10, [tf.string], shapes=[[]])
    _, value = tf.IdentityReader().read(queue)
    with tf.Session() as sess:
        with pytest.raises(tf.errors.DeadlineExceededError):
            sess.run(value, options=tf.RunOptions(timeout_in_ms=30))
        sess.run(queue.enqueue("after"))
        assert sess.run(value) == b"after"  # the work item was not lost to the dead step


def test_a_corrupt_record_fails_each_read_of_it_and_the_reader_stays_usable(tmp_path):
    path = tmp_path / "bad.tfrecord"
    with tf.python_io.TFRecordWriter(str(path)) as w:
        w.write(b"good")
        w.write(b"hello")
    raw = bytearray(path.read_bytes())
    raw[20 + 13] ^= 0xFF  # a byte of the second record's data
    path.write_bytes(bytes(raw))
    queue = tf.FIFOQueue(10, [tf.string], shapes=[[]])
    _, value = tf.TFRecordReader().read(queue)
    bounded = tf.RunOptions(timeout_in_ms=20_000)  # a stuck reader fails, not hangs
    with tf.Session() as sess:
        sess.run(queue.enqueue(str(path)))
        assert sess.run(value, options=bounded) == b"good"
        for _ in range(2):  # as in TF, the reader stays at the bad record: each read fails
            with pytest.raises(tf.errors.DataLossError, match="corrupted record data"):
                sess.run(value, options=bounded)


def test_concurrent_reads_of_one_reader_get_every_record_once(tmp_path):
    paths = []
    for f in range(3):
        paths.append(str(tmp_path / f"r{f}.tfrecord"))
        with tf.python_io.TFRecordWriter(paths[-1]) as w:
            for i in range(200):
                w.write(f"{f}:{i}".encode())
    queue = tf.FIFOQueue(10, [tf.string], shapes=[[]])
    _, value = tf.TFRecordReader().read(queue)
    got = [[], [], []]
    with tf.Session() as sess:
        sess.run(queue.enqueue_many([paths]))
        sess.run(queue.close())

        def drain(out):
            try:
                while True:
                    out.append(sess.run(value, options=tf.RunOptions(timeout_in_ms=20_000)))
            except tf.errors.OutOfRangeError:
                pass

        threads = [threading.Thread(target=drain, args=(out,)) for out in got]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
    records = sorted(r for out in got for r in out)
    assert records == sorted(f"{f}:{i}".encode() for f in range(3) for i in range(200))
    for out in got:  # each thread saw its records in file order
        for f in range(3):
            mine = [int(r.split(b":")[1]) for r in out if r.startswith(f"{f}:".encode())]
            assert mine == sorted(mine)

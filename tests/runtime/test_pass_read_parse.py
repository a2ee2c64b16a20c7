"""ReaderReadUpToV2 -> ParseExample fused (runtime/passes/read_parse.py, kernels/cpu/read_parse.py):
the fused node shows in the partition graphs only where nothing else reads the records, and it
gives the unfused ops' values, partial reads, reader state and errors, with `remapping` OFF as
the reference."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import records
from flowgraph.core.protos import RewriterConfig
from flowgraph.kernels.cpu import read_parse

FUSED = "_ReaderReadUpToParseExample"
FEATURES = {
    "f": tf.FixedLenFeature([2, 3], tf.float32),
    "i": tf.FixedLenFeature([], tf.int64),
    "v": tf.FixedLenFeature([2], tf.int64),
}


def _example(rng, index: int, missing: str = "", wrong: str = "") -> bytes:
    ex = tf.train.Example()
    feats = ex.features.feature
    if missing != "f":
        feats["f"].float_list.value.extend(rng.uniform(-1e6, 1e6, 6).astype(np.float32).tolist())
    if missing != "i":
        feats["i"].int64_list.value.append(int(rng.randint(-(2**62), 2**62)) * (index % 3 - 1))
    if wrong == "v":
        feats["v"].float_list.value.extend([1.0, 2.0])
    else:
        feats["v"].int64_list.value.extend([index, -(2**63) + index])
    feats["s"].bytes_list.value.append(b"rec%d" % index)
    return ex.SerializeToString()


def _files(tmp_path, counts=(37, 20), compression="", special=None) -> list[str]:
    """TFRecord files of `counts` examples; special[(file, record)] = (missing, wrong)."""
    rng = np.random.RandomState(7)
    paths = []
    options = tf.python_io.TFRecordOptions(compression or None)
    for i, count in enumerate(counts):
        paths.append(str(tmp_path / f"part-{i}.tfrecord"))
        with tf.python_io.TFRecordWriter(paths[-1], options) as w:
            for j in range(count):
                w.write(_example(rng, j, *(special or {}).get((i, j), ("", ""))))
    return paths


def _read_all(paths, remapping, batch=16, features=FEATURES, compression="", keys=False):
    """Every batch of one reader over `paths` (one epoch), the partition graphs' op types, and
    the reader's num_records_produced and serialized state at the end (or the error)."""
    g = tf.Graph()
    with g.as_default():
        queue = tf.FIFOQueue(10, [tf.string], shapes=[[]])
        reader = tf.TFRecordReader(options=compression or None)
        key, records = reader.read_up_to(queue, batch)
        fetch = tf.parse_example(records, features, name="parse")
        if keys:
            fetch = (key, fetch)
        produced, state = reader.num_records_produced(), reader.serialize_state()
        fill = [queue.enqueue_many([paths]), queue.close()]
    config = tf.ConfigProto()
    if not remapping:
        config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
    batches, error = [], None
    md = tf.RunMetadata()
    opts = tf.RunOptions(output_partition_graphs=True)
    with tf.Session(graph=g, config=config) as sess:
        sess.run(fill)
        try:
            while True:
                batches.append(sess.run(fetch, options=opts, run_metadata=md))
        except tf.errors.OutOfRangeError:
            pass
        except tf.errors.OpError as e:
            error = e
        counters = sess.run([produced, state])
    ops = {n.op for gd in md.partition_graphs for n in gd.node}
    return batches, ops, counters, error


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, dict | tuple | list):
        items = a.items() if isinstance(a, dict) else enumerate(a)
        assert len(a) == len(b)
        for k, v in items:
            _same(v, b[k])
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_fused_gives_the_unfused_batches_partial_reads_and_reader_state(tmp_path, compression):
    paths = _files(tmp_path, compression=compression)
    fused = _read_all(paths, True, compression=compression)
    plain = _read_all(paths, False, compression=compression)
    assert FUSED in fused[1] and "ReaderReadUpToV2" not in fused[1]
    assert FUSED not in plain[1] and "ParseExample" in plain[1]
    # a read stops at the end of a file: 37 = 16 + 16 + 5, then 20 = 16 + 4
    assert [len(b["i"]) for b in fused[0]] == [16, 16, 5, 16, 4]
    _same(fused[0], plain[0])
    _same(fused[2], plain[2])
    assert fused[2][0] == 57
    assert fused[3] is None and plain[3] is None


def test_records_off_the_fast_path_parse_as_parse_example_does(tmp_path):
    # a missing key that the default fills: the batch takes protobuf's path, in place
    features = dict(FEATURES, i=tf.FixedLenFeature([], tf.int64, default_value=-5))
    paths = _files(tmp_path, special={(0, 3): ("i", ""), (1, 19): ("i", "")})
    fused, plain = (
        _read_all(paths, True, features=features),
        _read_all(paths, False, features=features),
    )
    assert FUSED in fused[1]
    _same(fused[0], plain[0])
    assert fused[0][0]["i"][3] == -5 and fused[0][-1]["i"][-1] == -5


def test_a_wrong_feature_type_fails_as_parse_example_does(tmp_path):
    paths = _files(tmp_path, special={(0, 20): ("", "v")})
    fused, plain = _read_all(paths, True), _read_all(paths, False)
    assert len(fused[0]) == len(plain[0]) == 1
    assert type(fused[3]) is type(plain[3]) is tf.errors.InvalidArgumentError
    assert "Data types don't match" in str(fused[3])
    assert fused[3].message.split("[[")[0] == plain[3].message.split("[[")[0]  # but the op type


def test_a_corrupt_record_fails_naming_the_file_and_keeps_the_state(tmp_path):
    paths = _files(tmp_path)
    path = pathlib.Path(paths[1])
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    fused, plain = _read_all(paths, True), _read_all(paths, False)
    assert type(fused[3]) is type(plain[3]) is tf.errors.DataLossError
    assert paths[1] in fused[3].message and paths[1] in plain[3].message
    _same(fused[0], plain[0])
    _same(fused[2], plain[2])


def test_string_features_sparse_features_and_fetched_keys_stay_unfused(tmp_path):
    paths = _files(tmp_path, counts=(9,))
    strings = dict(FEATURES, s=tf.FixedLenFeature([], tf.string))
    sparse = dict(FEATURES, s=tf.VarLenFeature(tf.string))
    for features, keys in ((strings, False), (sparse, False), (FEATURES, True)):
        got = _read_all(paths, True, features=features, keys=keys)
        assert FUSED not in got[1] and "ParseExample" in got[1]
        _same(got[0], _read_all(paths, False, features=features, keys=keys)[0])


def test_other_readers_feed_the_fused_kernel_their_records(tmp_path):
    """An IdentityReader's record is its work item: here serialized examples from the queue."""
    rng = np.random.RandomState(3)
    examples = [_example(rng, j) for j in range(5)]
    results = {}
    for remapping in (True, False):
        g = tf.Graph()
        with g.as_default():
            queue = tf.FIFOQueue(10, [tf.string], shapes=[[]])
            _, records = tf.IdentityReader().read_up_to(queue, 4)
            parsed = tf.parse_example(records, FEATURES)
            fill = [queue.enqueue_many([examples]), queue.close()]
        config = tf.ConfigProto()
        if not remapping:
            config.graph_options.rewrite_options.remapping = RewriterConfig.OFF
        with tf.Session(graph=g, config=config) as sess:
            sess.run(fill)
            results[remapping] = [sess.run(parsed) for _ in examples]
    _same(results[True], results[False])
    assert [int(r["v"][0, 0]) for r in results[True]] == list(range(5))


@pytest.mark.parametrize("block", [1000, 1 << 18], ids=["small blocks", "one block"])
def test_reads_decoded_in_the_buffer_give_the_unfused_batches(tmp_path, monkeypatch, block):
    """The steady state: a read whose records lie whole in the read-ahead buffer (refilled
    where they run past it; the rest of a file at its end) is decoded there in one call,
    without Chunks; the others take the chunked path. Both give the unfused values."""
    monkeypatch.setattr(records, "_READ_AHEAD", block)
    chunked = []
    parse_chunks = read_parse.parse_chunks
    monkeypatch.setattr(
        read_parse, "parse_chunks", lambda *a: chunked.append(len(a[2])) or parse_chunks(*a)
    )
    paths = _files(tmp_path, counts=(37, 20, 50))
    fused = _read_all(paths, True, batch=8)
    assert [len(b["i"]) for b in fused[0]] == [8] * 4 + [5] + [8] * 2 + [4] + [8] * 6 + [2]
    if block > 1 << 16:
        assert not chunked  # every read, the first of each file and the last included
    else:
        assert 0 < len(chunked) < len(fused[0])
    plain = _read_all(paths, False, batch=8)
    _same(fused[0], plain[0])
    _same(fused[2], plain[2])

"""Parsing ops against Python references: tf.Example / SequenceExample parsing, decode_csv,
decode_raw (every dtype, both byte orders) and decode_compressed."""

import gzip
import zlib

import numpy as np
import pytest

import flowgraph as tf


def _example(**features):
    ex = tf.train.Example()
    for key, value in features.items():
        f = ex.features.feature[key]
        if isinstance(value[0], float):
            f.float_list.value.extend(value)
        elif isinstance(value[0], bytes):
            f.bytes_list.value.extend(value)
        else:
            f.int64_list.value.extend(value)
    return ex.SerializeToString()


def _run(fetch, feed=None):
    with tf.Session() as sess:
        return sess.run(fetch, feed)


def test_parse_single_example_dense_defaults_and_sequences():
    record = _example(a=[1.0, 2.0], b=[7], c=[b"x", b"y"], s=[1, 2, 3, 4])
    out = tf.parse_single_example(
        record,
        {
            "a": tf.FixedLenFeature([2], tf.float32),
            "b": tf.FixedLenFeature([], tf.int64),
            "c": tf.FixedLenFeature([2], tf.string),
            "d": tf.FixedLenFeature([2], tf.int64, default_value=[5, 6]),
            "s": tf.FixedLenSequenceFeature([2], tf.int64, allow_missing=True),
        },
    )
    assert out["s"].shape.as_list() == [None, 2] and out["a"].shape.as_list() == [2]
    got = _run(out)
    np.testing.assert_array_equal(got["a"], [1.0, 2.0])
    assert got["a"].dtype == np.float32 and got["b"] == 7 and got["b"].dtype == np.int64
    assert got["c"].tolist() == [b"x", b"y"]
    np.testing.assert_array_equal(got["d"], [5, 6])
    np.testing.assert_array_equal(got["s"], [[1, 2], [3, 4]])


def test_parse_example_batch_pads_sequences():
    records = [_example(v=[1.0], s=[1]), _example(v=[2.0], s=[1, 2, 3]), _example(v=[3.0])]
    out = tf.parse_example(
        tf.constant(records),
        {
            "v": tf.FixedLenFeature([1], tf.float32),
            "s": tf.FixedLenSequenceFeature([], tf.int64, allow_missing=True, default_value=9),
        },
    )
    got = _run(out)
    np.testing.assert_array_equal(got["v"], [[1.0], [2.0], [3.0]])
    np.testing.assert_array_equal(got["s"], [[1, 9, 9], [1, 2, 3], [9, 9, 9]])


def test_parse_errors():
    record = tf.constant(_example(a=[1.0, 2.0], b=[3]))
    cases = [
        ({"a": tf.FixedLenFeature([3], tf.float32)}, "Number of float values != expected"),
        ({"b": tf.FixedLenFeature([], tf.float32)}, "Data types don't match"),
        ({"z": tf.FixedLenFeature([], tf.int64)}, "is required but could not be found"),
    ]
    for features, message in cases:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            _run(tf.parse_single_example(record, features))
    with pytest.raises(ValueError, match="allow_missing"):
        tf.parse_example(["x"], {"s": tf.FixedLenSequenceFeature([], tf.int64)})
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not parse"):
        bad = tf.constant(b"\xff\xff\xff")
        _run(tf.parse_single_example(bad, {"a": tf.FixedLenFeature([], tf.int64)}))


def test_var_len_feature_in_single_example():
    out = tf.parse_single_example(
        _example(t=[b"a", b"b", b"c"]), {"t": tf.VarLenFeature(tf.string)}
    )
    got = _run(out["t"])
    np.testing.assert_array_equal(got.indices, [[0], [1], [2]])
    assert got.values.tolist() == [b"a", b"b", b"c"] and got.dense_shape.tolist() == [3]


def test_var_len_feature_parts_from_the_kernel():
    from flowgraph.core import dtypes
    from flowgraph.kernels.cpu.parsing import _parse_examples

    records = [_example(t=[5]), _example(u=[1]), _example(t=[6, 7, 8])]
    indices, values, shape = _parse_examples(
        records, None, ["t"], [dtypes.int64], [], [], [], [], True
    )
    np.testing.assert_array_equal(indices, [[0, 0], [2, 0], [2, 1], [2, 2]])
    np.testing.assert_array_equal(values, [5, 6, 7, 8])
    np.testing.assert_array_equal(shape, [3, 3])


def test_parse_sequence_example():
    seq = tf.train.SequenceExample()
    seq.context.feature["len"].int64_list.value.append(2)
    steps = seq.feature_lists.feature_list["x"].feature
    steps.add().float_list.value.extend([1.0, 2.0])
    steps.add().float_list.value.extend([3.0, 4.0])
    empty = tf.train.SequenceExample()
    empty.context.feature["len"].int64_list.value.append(0)
    ctx, lists, lengths = tf.io.parse_sequence_example(
        [seq.SerializeToString(), empty.SerializeToString()],
        context_features={"len": tf.FixedLenFeature([], tf.int64)},
        sequence_features={"x": tf.FixedLenSequenceFeature([2], tf.float32, allow_missing=True)},
    )
    c, x, n = _run([ctx, lists, lengths])
    np.testing.assert_array_equal(c["len"], [2, 0])
    np.testing.assert_array_equal(x["x"], [[[1, 2], [3, 4]], [[0, 0], [0, 0]]])
    np.testing.assert_array_equal(n["x"], [2, 0])
    c1, x1 = tf.parse_single_sequence_example(
        seq.SerializeToString(),
        context_features={"len": tf.FixedLenFeature([], tf.int64)},
        sequence_features={"x": tf.FixedLenSequenceFeature([2], tf.float32)},
    )
    got_c, got_x = _run([c1, x1])
    assert got_c["len"] == 2
    np.testing.assert_array_equal(got_x["x"], [[1, 2], [3, 4]])


def test_decode_csv_defaults_quotes_na_and_select_cols():
    records = ['1,2.5,"a,""b"""', ",,c", "3,NA,d"]
    a, b, c = tf.decode_csv(records, [[7], [0.5], tf.constant([], tf.string)], na_value="NA")
    ga, gb, gc = _run([a, b, c])
    assert ga.tolist() == [1, 7, 3] and ga.dtype == np.int32
    np.testing.assert_array_equal(gb, np.array([2.5, 0.5, 0.5], np.float32))
    assert gc.tolist() == [b'a,"b"', b"c", b"d"]
    x, z = tf.decode_csv(
        ["1;2;3"], [[0], tf.constant([], tf.int64)], field_delim=";", select_cols=[0, 2]
    )
    gx, gz = _run([x, z])
    assert gx.tolist() == [1] and gz.tolist() == [3] and gz.dtype == np.int64
    raw = tf.decode_csv(['"q",1'], [[""], [0]], use_quote_delim=False)
    assert _run(raw)[0].tolist() == [b'"q"']


@pytest.mark.parametrize(
    "records, defaults, message",
    [
        (["1,2"], [[0]], "Expect 1 fields but have 2"),
        ([",1"], ["required", [0]], "Field 0 is required"),
        (["x"], [[0.0]], "not a valid float"),
        (["99999999999"], [[0]], "not a valid int32"),
    ],
)
def test_decode_csv_errors(records, defaults, message):
    defaults = [tf.constant([], tf.int32) if d == "required" else d for d in defaults]
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        _run(tf.decode_csv(records, defaults))


@pytest.mark.parametrize(
    "dtype",
    [
        np.float16,
        np.float32,
        np.float64,
        np.int8,
        np.uint8,
        np.int16,
        np.uint16,
        np.int32,
        np.int64,
        np.complex64,
        np.complex128,
        np.bool_,
    ],
)
@pytest.mark.parametrize("little_endian", [True, False])
def test_decode_raw_matches_numpy(dtype, little_endian):
    rng = np.random.RandomState(0)
    values = (rng.rand(2, 3, 4) * 100).astype(dtype)
    order = "<" if little_endian else ">"
    blobs = np.array(
        [[v.astype(np.dtype(dtype).newbyteorder(order)).tobytes() for v in row] for row in values],
        dtype=object,
    )
    out = tf.decode_raw(tf.constant(blobs), tf.as_dtype(dtype), little_endian=little_endian)
    assert out.shape.as_list() == [2, 3, None]
    got = _run(out)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, values)


def test_decode_raw_errors():
    with pytest.raises(tf.errors.InvalidArgumentError, match="same size"):
        _run(tf.decode_raw(tf.constant([b"abcd", b"ab"]), tf.uint8))
    with pytest.raises(tf.errors.InvalidArgumentError, match="not a multiple of 4"):
        _run(tf.decode_raw(tf.constant([b"abcde"]), tf.float32))


def test_decode_compressed():
    data = [b"hello" * 10, b""]
    for kind, fn in (("ZLIB", zlib.compress), ("GZIP", gzip.compress), ("", lambda b: b)):
        out = tf.io.decode_compressed(tf.constant([fn(d) for d in data]), compression_type=kind)
        assert _run(out).tolist() == data
    with pytest.raises(tf.errors.DataLossError):
        _run(tf.io.decode_compressed(tf.constant([b"not zlib"]), "ZLIB"))


def test_sparse_feature_and_single_sequence_var_len():
    records = [_example(ix=[3, 1], v=[1.5, 2.5]), _example(ix=[0], v=[9.0])]
    feature = {"sp": tf.SparseFeature("ix", "v", tf.float32, 5)}
    batch = _run(tf.parse_example(tf.constant(records), feature)["sp"])
    np.testing.assert_array_equal(batch.indices, [[0, 1], [0, 3], [1, 0]])  # reordered
    np.testing.assert_array_equal(batch.values, [2.5, 1.5, 9.0])
    np.testing.assert_array_equal(batch.dense_shape, [2, 5])
    one = _run(tf.parse_single_example(records[0], feature)["sp"])
    np.testing.assert_array_equal(one.indices, [[1], [3]])
    np.testing.assert_array_equal(one.values, [2.5, 1.5])
    np.testing.assert_array_equal(one.dense_shape, [5])
    seq = tf.train.SequenceExample()
    seq.context.feature["c"].int64_list.value.extend([4, 5])
    steps = seq.feature_lists.feature_list["s"].feature
    steps.add().int64_list.value.extend([1])
    steps.add().int64_list.value.extend([2, 3])
    ctx, lists = tf.parse_single_sequence_example(
        seq.SerializeToString(),
        context_features={"c": tf.VarLenFeature(tf.int64)},
        sequence_features={"s": tf.VarLenFeature(tf.int64)},
    )
    c, s = _run([ctx["c"], lists["s"]])
    np.testing.assert_array_equal(c.indices, [[0], [1]])
    np.testing.assert_array_equal(c.dense_shape, [2])
    np.testing.assert_array_equal(s.indices, [[0, 0], [1, 0], [1, 1]])
    np.testing.assert_array_equal(s.values, [1, 2, 3])
    np.testing.assert_array_equal(s.dense_shape, [2, 2])

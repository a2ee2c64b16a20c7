"""The wire-format fast path of ParseExample (kernels/cpu/example_wire.py): equal to protobuf's
decoding on the plain case, and None (protobuf decides) on everything else."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import Example
from flowgraph.kernels.cpu import example_wire

F32, I64 = np.float32, np.int64


def _example(**features) -> bytes:
    ex = Example()
    for key, values in features.items():
        values = np.asarray(values)
        if values.dtype.kind == "f":
            ex.features.feature[key].float_list.value.extend(values.tolist())
        else:
            ex.features.feature[key].int64_list.value.extend(values.tolist())
    return ex.SerializeToString()


def _spec(keys, types, sizes):
    return example_wire.spec(tuple(keys), tuple(types), tuple(sizes))


def _by_protobuf(records, keys, kinds):
    out = []
    for key, kind in zip(keys, kinds):
        rows = []
        for r in records:
            f = Example.FromString(r).features.feature[key]
            rows.append(np.array(getattr(f, kind).value, F32 if kind == "float_list" else I64))
        out.append(np.stack(rows))
    return out


def test_floats_and_int64s_of_a_batch_equal_protobufs_decoding():
    rng = np.random.RandomState(0)
    ints = [0, 1, 127, 128, 300, -1, -(2**63), 2**63 - 1, 2**35]
    records = [
        _example(x=rng.randn(5).astype(F32), y=rng.choice(ints, 3), z=np.array([i], I64))
        for i in range(9)
    ]
    got = example_wire.dense_batch(records, _spec(["x", "y", "z"], [F32, I64, I64], [5, 3, 1]))
    want = _by_protobuf(records, ["x", "y", "z"], ["float_list", "int64_list", "int64_list"])
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_special_floats_and_empty_lists():
    values = np.array([np.nan, -0.0, np.inf, -np.inf, 1e-45], F32)
    records = [_example(x=values, e=np.zeros(0, F32))]
    x, e = example_wire.dense_batch(records, _spec(["x", "e"], [F32, F32], [5, 0]))
    assert x.tobytes() == values.tobytes() and e.shape == (1, 0)


def _unpacked_float(key: bytes, value: float) -> bytes:
    """An Example whose FloatList is not packed (tag 0x0D per value): legal, not the fast path."""
    flist = b"\x0d" + np.float32(value).tobytes()  # FloatList.value, one 32-bit field
    feature = b"\x12" + bytes([len(flist)]) + flist
    entry = b"\x0a" + bytes([len(key)]) + key + b"\x12" + bytes([len(feature)]) + feature
    features = b"\x0a" + bytes([len(entry)]) + entry
    return b"\x0a" + bytes([len(features)]) + features


@pytest.mark.parametrize(
    "records, sizes",
    [
        ([_example(y=[1])], [2, 1]),  # key x missing
        ([_example(x=[1.0, 2.0], y=[1.5])], [2, 1]),  # y has the wrong kind
        ([_example(x=[1.0], y=[1])], [2, 1]),  # wrong count
        ([_example(x=[1.0, 2.0], y=[1])[:-2]], [2, 1]),  # truncated
        ([_example(x=[1.0, 2.0], y=[1]) + b"\x10\x01"], [2, 1]),  # unknown field
        ([_example(x=[1.0, 2.0], y=[1], é=[1])], [2, 1]),  # non-ASCII key elsewhere
    ],
)
def test_anything_but_the_plain_case_is_left_to_protobuf(records, sizes):
    assert example_wire.dense_batch(records, _spec(["x", "y"], [F32, I64], sizes)) is None


def test_unpacked_values_are_left_to_protobuf():
    record = _unpacked_float(b"x", 2.5)
    assert Example.FromString(record).features.feature["x"].float_list.value[0] == 2.5
    assert example_wire.dense_batch([record], _spec(["x"], [F32], [1])) is None


def test_parse_example_falls_back_with_protobufs_results_and_errors():
    serialized = tf.placeholder(tf.string, [None])
    features = {
        "x": tf.FixedLenFeature([2], tf.float32, default_value=[7.0, 8.0]),
        "y": tf.FixedLenFeature([], tf.int64),
    }
    parsed = tf.parse_example(serialized, features)
    plain = [_example(x=[1.0, 2.0], y=[3]), _example(x=[4.0, 5.0], y=[-6])]
    missing = [plain[0], _example(y=[9])]
    with tf.Session() as s:
        out = s.run(parsed, {serialized: plain})
        np.testing.assert_array_equal(out["x"], [[1, 2], [4, 5]])
        np.testing.assert_array_equal(out["y"], [3, -6])
        out = s.run(parsed, {serialized: missing})
        np.testing.assert_array_equal(out["x"], [[1, 2], [7, 8]])
        with pytest.raises(tf.errors.InvalidArgumentError, match="Could not parse example"):
            s.run(parsed, {serialized: [plain[0][:-3]]})


def test_one_record_equals_protobufs_decoding_and_owns_its_floats():
    ints = [0, 300, -1, -(2**63), 2**63 - 1]
    record = _example(x=np.linspace(-1, 1, 6).astype(F32), y=np.array(ints, I64))
    x, y = example_wire.dense_one(record, _spec(["x", "y"], [F32, I64], [6, 5]))
    want_x, want_y = _by_protobuf([record], ["x", "y"], ["float_list", "int64_list"])
    np.testing.assert_array_equal(x, want_x[0])
    np.testing.assert_array_equal(y, want_y[0])
    assert x.dtype == F32 and y.dtype == I64 and x.flags.writeable and x.base is None
    assert example_wire.dense_one(_example(x=[1.0]), _spec(["x"], [F32], [2])) is None


def _parse_single(monkeypatch, fast: bool, records: list, features: dict) -> list:
    """parse_single_example of each record, through the wire fast path or protobuf only."""
    calls = []
    dense_one = example_wire.dense_one
    monkeypatch.setattr(
        example_wire,
        "dense_one",
        lambda record, sp: calls.append(1) or (dense_one(record, sp) if fast else None),
    )
    g = tf.Graph()
    with g.as_default():
        serialized = tf.placeholder(tf.string, [])
        parsed = tf.parse_single_example(serialized, features)
    with tf.Session(graph=g) as sess:
        out = [sess.run(parsed, {serialized: r}) for r in records]
    assert len(calls) == len(records)
    return out


@pytest.mark.parametrize("default", [False, True])
def test_parse_single_example_on_the_wire_equals_protobuf(monkeypatch, default):
    rng = np.random.RandomState(1)
    features = {
        "m": tf.FixedLenFeature([2, 3], tf.float32),
        "y": tf.FixedLenFeature([], tf.int64),
        "v": tf.FixedLenFeature([2], tf.int64, default_value=[4, 5] if default else None),
    }
    records = [
        _example(m=rng.randn(6).astype(F32), y=[i - 2], v=np.array([i, 2**40], I64))
        for i in range(4)
    ]
    if default:
        records.append(_example(m=rng.randn(6).astype(F32), y=[7]))  # v missing: protobuf
    fast = _parse_single(monkeypatch, True, records, features)
    slow = _parse_single(monkeypatch, False, records, features)
    for got, want in zip(fast, slow):
        for key in features:
            assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape
            np.testing.assert_array_equal(got[key], want[key])
    assert fast[0]["m"].shape == (2, 3) and fast[1]["y"] == -1
    if default:
        np.testing.assert_array_equal(fast[-1]["v"], [4, 5])


def test_records_that_are_not_bytes_are_left_to_protobuf():
    sp = _spec(["x"], [F32], [2])
    good = _example(x=np.array([1.0, 2.0], F32))
    for batch in ([good, good.decode("latin-1")], [good.decode("latin-1")], [good, 3]):
        assert example_wire.dense_batch(batch, sp) is None
    wide = memoryview(good + b"\0" * (-len(good) % 4)).cast("I")  # len() counts 4-byte items
    assert example_wire.dense_batch([good, wide], sp) is None
    (got,) = example_wire.dense_batch([good, bytearray(good)], sp)
    np.testing.assert_array_equal(got, [[1.0, 2.0], [1.0, 2.0]])

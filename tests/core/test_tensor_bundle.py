"""The V2 tensor bundle and its SSTable, byte for byte against TensorFlow's own files
(FORMATS.md §4.2; fixtures/tensorflow/README.md §2)."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

from flowgraph.core import errors, sstable
from flowgraph.core import tensor_bundle as tb
from flowgraph.core.tensor_slice import Slice
from tests.helpers import CHECKPOINTS, FIXED_SIZE_DTYPES, checkpoint_values, dtype_id

CKPT = CHECKPOINTS
needs_fixture = pytest.mark.skipif(
    not (CKPT / "values.json").is_file(), reason=f"TensorFlow fixtures not found under {CKPT}"
)


@needs_fixture
def test_tensorflow_checkpoint_reads_with_identical_values():
    want = checkpoint_values()
    with tb.BundleReader(str(CKPT / "model.ckpt-7")) as r:
        assert r.keys() == sorted(want)
        for name, w in want.items():
            got = r.lookup(name)
            assert got.dtype == w.dtype and got.shape == w.shape, name
            if w.dtype == object:
                assert got.tolist() == w.tolist()
            else:
                # bitwise: -0.0 stays -0.0, int32 min/max and 65504 in float16 survive
                assert got.tobytes() == w.tobytes(), name


@needs_fixture
def test_writer_reproduces_tensorflow_files_byte_for_byte(tmp_path):
    values = checkpoint_values()
    w = tb.BundleWriter(str(tmp_path / "m"))
    for name in sorted(values):
        w.add(name, values[name])
    w.finish()
    assert sorted(os.listdir(tmp_path)) == ["m.data-00000-of-00001", "m.index"]
    for suffix in (".index", ".data-00000-of-00001"):
        ours = (tmp_path / ("m" + suffix)).read_bytes()
        assert ours == (CKPT / ("model.ckpt-7" + suffix)).read_bytes(), suffix


@needs_fixture
def test_sstable_rewrites_tensorflow_index_identically():
    raw = (CKPT / "model.ckpt-7.index").read_bytes()
    entries = sstable.read_table(raw)
    out = bytearray()
    sstable.write_table(entries, out.extend)
    assert bytes(out) == raw
    assert raw[-8:] == bytes.fromhex("57fb808b247547db")


def test_sstable_many_blocks_prefix_compression_and_restarts():
    entries = [(f"layer{i // 7:04d}/w{i:05d}".encode(), os.urandom(i % 300)) for i in range(2000)]
    out = bytearray()
    size = sstable.write_table(entries, out.extend)
    assert size == len(out) and size > 20 * sstable.BLOCK_SIZE
    assert sstable.read_table(bytes(out)) == entries
    with pytest.raises(ValueError, match="strictly increasing"):
        sstable.write_table([(b"b", b""), (b"a", b"")], out.extend)


def test_sstable_separators_are_short():
    assert sstable._shortest_separator(b"abcdef", b"abzz") == b"abd"
    assert sstable._shortest_separator(b"abc", b"abcd") == b"abc"
    assert sstable._short_successor(b"\xff\xffa") == b"\xff\xffb"


@pytest.mark.parametrize("dtype", FIXED_SIZE_DTYPES, ids=dtype_id)
def test_every_dtype_round_trips(tmp_path, dtype):
    rng = np.random.RandomState(0)
    values = {
        "m": (rng.randn(3, 5) * 10).astype(dtype),
        "scalar": np.asarray(rng.randn() * 10, order="C").astype(dtype),
        "empty": np.zeros((0, 4), dtype),
    }
    w = tb.BundleWriter(str(tmp_path / "c"))
    for k, v in values.items():
        w.add(k, v)
    w.finish()
    with tb.BundleReader(str(tmp_path / "c")) as r:
        for k, v in values.items():
            got = r.lookup(k)
            assert got.dtype == np.dtype(dtype) and got.shape == v.shape
            assert got.tobytes() == v.tobytes()
        assert r.dtype("m") == tb.datatype_of(values["m"])


def test_bfloat16_is_stored_as_two_byte_bits(tmp_path):
    v = np.array([1.0, -2.5, 3.0e38], dtype=ml_dtypes.bfloat16)
    w = tb.BundleWriter(str(tmp_path / "b"))
    w.add("b", v)
    w.finish()
    assert (tmp_path / "b.data-00000-of-00001").read_bytes() == v.view(np.uint16).tobytes()
    assert tb.BundleReader(str(tmp_path / "b")).entry("b").dtype == 14  # DT_BFLOAT16


def test_strings_layout_and_round_trip(tmp_path):
    v = np.array([b"ab", b"", b"xyz"], dtype=object)
    data, _ = tb.encode_tensor(v)
    # varint lengths, masked crc of the uint32 lengths, then the bytes (FORMATS.md §4.2)
    lengths_crc = sstable.masked_crc32c(np.array([2, 0, 3], "<u4").tobytes())
    assert data == b"\x02\x00\x03" + lengths_crc.to_bytes(4, "little") + b"abxyz"
    long = np.array([b"\x00nul" * 100, "grüße".encode(), b""] * 50, dtype=object).reshape(15, 10)
    w = tb.BundleWriter(str(tmp_path / "s"))
    w.add("long", long)
    w.add("scalar", np.array("héllo", dtype=object))
    w.finish()
    with tb.BundleReader(str(tmp_path / "s")) as r:
        assert r.lookup("long").tolist() == long.tolist()
        assert r.lookup("scalar").tolist() == "héllo".encode()


def _write(tmp_path, **values) -> str:
    prefix = str(tmp_path / "ck")
    w = tb.BundleWriter(prefix)
    for k, v in values.items():
        w.add(k, v)
    w.finish()
    return prefix


def test_corrupted_data_is_data_loss_naming_the_file(tmp_path):
    prefix = _write(tmp_path, a=np.arange(10, dtype=np.float32), s=np.array([b"q"], dtype=object))
    path = tmp_path / "ck.data-00000-of-00001"
    raw = bytearray(path.read_bytes())
    raw[5] ^= 0x40
    path.write_bytes(bytes(raw))
    with pytest.raises(errors.DataLossError, match="ck.data-00000-of-00001"):
        tb.BundleReader(prefix).lookup("a")
    path.write_bytes(bytes(raw[:20]))
    with pytest.raises(errors.DataLossError, match="truncated.*|ck.data"):
        tb.BundleReader(prefix).lookup("s")


@pytest.mark.parametrize("cut", [0, 10, 47, -3])
def test_truncated_or_corrupted_index_is_data_loss(tmp_path, cut):
    prefix = _write(tmp_path, a=np.arange(10, dtype=np.float32))
    path = tmp_path / "ck.index"
    raw = path.read_bytes()
    path.write_bytes(raw[:cut] if cut >= 0 else raw[: cut - 48] + b"\x99" * 3 + raw[-48:])
    with pytest.raises(errors.DataLossError, match="ck.index"):
        tb.BundleReader(prefix)


def test_missing_bundle_and_key_are_not_found(tmp_path):
    with pytest.raises(errors.NotFoundError, match="Failed to find any matching files"):
        tb.BundleReader(str(tmp_path / "nothing"))
    prefix = _write(tmp_path, a=np.zeros(2))
    with pytest.raises(errors.NotFoundError, match=f"Key b not found in checkpoint {prefix}"):
        tb.BundleReader(prefix).lookup("b")


def test_slices_assemble_into_the_full_tensor(tmp_path):
    full = np.arange(40, dtype=np.float32).reshape(10, 4)
    w = tb.BundleWriter(str(tmp_path / "p"))
    for spec in ("0,4:0,4", "4,3:-", "7,3:0,4"):
        sl = Slice.parse(spec)
        w.add_slice("pv", [10, 4], sl, full[sl.index(full.shape)])
    w.finish()
    with tb.BundleReader(str(tmp_path / "p")) as r:
        assert r.keys() == ["pv"]
        assert r.shape("pv") == (10, 4)
        np.testing.assert_array_equal(r.lookup("pv"), full)
        np.testing.assert_array_equal(r.lookup_slice("pv", Slice.parse("2,5:1,2")), full[2:7, 1:3])


def test_merge_renames_shards_and_merges_slices(tmp_path):
    full = np.arange(12.0).reshape(6, 2)
    parts = []
    for i, spec in enumerate(("0,3:-", "3,3:-")):
        prefix = str(tmp_path / "tmp" / f"part-{i:05d}-of-00002")
        w = tb.BundleWriter(prefix)
        sl = Slice.parse(spec)
        w.add_slice("pv", [6, 2], sl, full[sl.index(full.shape)])
        w.add(f"v{i}", np.full(3, i))
        w.finish()
        parts.append(prefix)
    dest = str(tmp_path / "model")
    tb.merge_bundles(parts, dest)
    assert sorted(os.listdir(tmp_path)) == [
        "model.data-00000-of-00002",
        "model.data-00001-of-00002",
        "model.index",
    ]
    with tb.BundleReader(dest) as r:
        assert r.header.num_shards == 2
        np.testing.assert_array_equal(r.lookup("pv"), full)
        np.testing.assert_array_equal(r.lookup("v1"), [1, 1, 1])
        assert r.entry("v1").shard_id == 1


def test_failed_writer_leaves_no_bundle(tmp_path):
    w = tb.BundleWriter(str(tmp_path / "x"))
    w.add("a", np.zeros(3))
    with pytest.raises(errors.InvalidArgumentError, match="duplicate key: a"):
        w.add("a", np.zeros(3))
    w.abort()
    assert os.listdir(tmp_path) == []

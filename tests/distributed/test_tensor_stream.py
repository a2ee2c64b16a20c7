"""RecvTensor streamed in chunks: every dtype reassembles bit for bit, and a stream that does
not add up to the announced tensor is a DataLossError."""

import numpy as np
import pytest

from flowgraph.core import errors
from flowgraph.distributed import tensor_stream
from flowgraph.distributed.tensor_stream import CHUNK_BYTES
from tests.helpers import FIXED_SIZE_DTYPES, dtype_id


def _round_trip(value, is_dead=False):
    messages = list(tensor_stream.encode(value, is_dead, send_start_micros=7))
    array, header = tensor_stream.decode(iter(messages))
    assert header.send_start_micros == 7
    return array, messages


@pytest.mark.parametrize("dtype", FIXED_SIZE_DTYPES, ids=dtype_id)
def test_every_fixed_size_dtype_round_trips(dtype):
    rng = np.random.default_rng(0)
    value = (rng.standard_normal((3, 5, 7)) * 100).astype(dtype)
    array, messages = _round_trip(value)
    assert array.dtype == value.dtype and array.shape == value.shape
    assert array.tobytes() == value.tobytes()
    assert array.flags.writeable
    assert len(messages) == 2  # header, then one chunk


def test_large_tensor_is_split_into_chunks():
    value = np.arange(CHUNK_BYTES, dtype=np.float32).reshape(4, -1)  # 4 MiB
    array, messages = _round_trip(value)
    assert [len(m) for m in messages[1:]] == [CHUNK_BYTES] * 4
    np.testing.assert_array_equal(array, value)


def test_uneven_last_chunk_and_non_contiguous_and_big_endian_input():
    value = np.arange(CHUNK_BYTES // 4 + 3, dtype=np.float32)
    array, messages = _round_trip(value)
    assert [len(m) for m in messages[1:]] == [CHUNK_BYTES, 12]
    np.testing.assert_array_equal(array, value)
    strided = np.arange(40, dtype=np.int64).reshape(5, 8)[:, ::3]
    np.testing.assert_array_equal(_round_trip(strided)[0], strided)
    big = np.arange(6, dtype=">f8").reshape(2, 3)
    out = _round_trip(big)[0]
    assert out.dtype == np.float64 and out.dtype.isnative
    np.testing.assert_array_equal(out, big)


def test_strings_scalars_empty_and_dead_travel_in_the_header():
    strings = np.array([[b"ab", b""], [b"xyz", b"\x00\xff"]], dtype=object)
    array, messages = _round_trip(strings)
    assert len(messages) == 1 and array.dtype == object
    assert array.tolist() == strings.tolist()
    scalar, messages = _round_trip(np.float64(2.5))
    assert scalar.shape == () and scalar == 2.5 and len(messages) == 2
    empty, messages = _round_trip(np.zeros((0, 3), np.int32))
    assert empty.shape == (0, 3) and empty.dtype == np.int32 and len(messages) == 1
    dead, messages = _round_trip(None, is_dead=True)
    assert dead is None and len(messages) == 1
    for value, want in [  # bytes, str and fixed-width 'S'/'U' arrays are strings
        (b"a path", b"a path"),
        ("text", b"text"),
        (np.array([b"ab", b"c"]), [b"ab", b"c"]),
        (np.array(["d", "ef"]), [b"d", b"ef"]),
    ]:
        got, messages = _round_trip(value)
        assert len(messages) == 1 and got.dtype == object and got.tolist() == want


def test_short_long_or_empty_streams_are_data_loss():
    messages = list(tensor_stream.encode(np.arange(CHUNK_BYTES, dtype=np.int32), False))
    with pytest.raises(errors.DataLossError, match="ended after 1048576 of 4194304 bytes"):
        tensor_stream.decode(messages[:2])
    with pytest.raises(errors.DataLossError, match="more than the 4194304 bytes"):
        tensor_stream.decode([*messages, b"x"])
    with pytest.raises(errors.DataLossError, match="before its header"):
        tensor_stream.decode([])

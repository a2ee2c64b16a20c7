"""Tensor slices (core/tensor_slice.py): the index keys of stored slices equal the ones TensorFlow
wrote into a partitioned checkpoint, and the text form parses as TensorSlice::Parse does."""

import pytest

from flowgraph.core import errors, tensor_slice
from flowgraph.core.tensor_slice import Slice, parse_shape_and_slice


def test_slice_keys_match_tensorflows_ordered_code():
    # keys read from a partitioned checkpoint written by TensorFlow 2.21
    assert tensor_slice.encode_tensor_name_slice("pv", Slice.parse("4,3:0,4")) == (
        b"\x00pv\x00\x01\x01\x02\x84\x83\x80\x84"
    )
    assert tensor_slice.encode_tensor_name_slice("big", Slice.parse("0,300:1,1")) == (
        b"\x00big\x00\x01\x01\x02\x80\xc1,\x81\x81"
    )
    assert tensor_slice._signed_num_increasing(-1) == b"\x7f"
    assert tensor_slice._signed_num_increasing(-65) == bytes([0x3F, 0xBF])
    assert tensor_slice._escape(b"a\x00b\xffc") == b"a\x00\xffb\xff\x00c"


def test_slice_text_and_proto_forms():
    sl = Slice.parse("4,3:-")
    assert sl.extents == ((4, 3), (0, -1))
    assert Slice.from_proto(sl.to_proto()) == sl
    assert sl.index((10, 4)) == (slice(4, 7), slice(0, 4))
    assert Slice.parse("0,10:-").is_full((10, 4)) and not sl.is_full((10, 4))
    assert parse_shape_and_slice("") is None
    assert parse_shape_and_slice("10 4 4,3:-") == ([10, 4], sl)
    with pytest.raises(errors.InvalidArgumentError, match="pair of integers"):
        Slice.parse("4:-")
    with pytest.raises(errors.InvalidArgumentError, match="slice rank differs"):
        parse_shape_and_slice("10 4 4,3")

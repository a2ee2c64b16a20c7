"""A tensor slice, as TensorFlow's checkpoints name one (tensor_slice.cc, checkpoint::
EncodeTensorNameSlice): the "start,length:-:..." text of SaveV2's `shape_and_slices`, the
TensorSliceProto of a partitioned variable's bundle entry, and the OrderedCode index key under
which a V2 bundle (core/tensor_bundle.py) or a V1 table (core/checkpoint_v1.py) stores a slice.
"""

from __future__ import annotations

import dataclasses

from flowgraph.core import errors
from flowgraph.core.protos import TensorSliceProto


@dataclasses.dataclass(frozen=True)
class Slice:
    """One extent (start, length) per dimension; length -1 means the whole dimension."""

    extents: tuple[tuple[int, int], ...]

    @staticmethod
    def parse(spec: str) -> Slice:
        """TensorSlice::Parse: "start,length:-:..." with "-" for a full dimension."""
        out = []
        for part in spec.split(":"):
            if part == "-":
                out.append((0, -1))
                continue
            try:
                start, length = (int(x) for x in part.split(","))
            except ValueError:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Expected a pair of integers or '-', got '{part}' in slice {spec!r}",
                ) from None
            out.append((start, length))
        return Slice(tuple(out))

    @staticmethod
    def from_proto(p: TensorSliceProto) -> Slice:
        return Slice(tuple((e.start, e.length if e.HasField("length") else -1) for e in p.extent))

    def to_proto(self) -> TensorSliceProto:
        p = TensorSliceProto()
        for start, length in self.extents:
            e = p.extent.add()
            if length != -1:
                e.start = start
                e.length = length
        return p

    def index(self, shape) -> tuple[slice, ...]:
        """The NumPy index of this slice in a tensor of `shape`."""
        return tuple(
            slice(0, n) if length == -1 else slice(start, start + length)
            for (start, length), n in zip(self.extents, shape)
        )

    def is_full(self, shape) -> bool:
        return all(
            length == -1 or (start == 0 and length == n)
            for (start, length), n in zip(self.extents, shape)
        )


def parse_shape_and_slice(spec: str) -> tuple[list[int], Slice] | None:
    """SaveV2's `shape_and_slices` entry: "" (the whole tensor) or "d0 d1 ... slice"."""
    if not spec:
        return None
    parts = spec.split(" ")
    try:
        shape = [int(x) for x in parts[:-1]]
    except ValueError:
        raise errors.InvalidArgumentError(None, None, f"bad shape_and_slice {spec!r}") from None
    sl = Slice.parse(parts[-1])
    if len(sl.extents) != len(shape):
        raise errors.InvalidArgumentError(
            None, None, f"shape_and_slice {spec!r}: slice rank differs from the shape's"
        )
    return shape, sl


def _num_increasing(n: int) -> bytes:
    """OrderedCode::WriteNumIncreasing: a length byte, then big-endian bytes."""
    body = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    return bytes([len(body)]) + body


_HEADER_BITS = [
    (0, 0),
    (0x80, 0),
    (0xC0, 0),
    (0xE0, 0),
    (0xF0, 0),
    (0xF8, 0),
    (0xFC, 0),
    (0xFE, 0),
    (0xFF, 0),
    (0xFF, 0x80),
    (0xFF, 0xC0),
]


def _signed_num_increasing(n: int) -> bytes:
    """OrderedCode::WriteSignedNumIncreasing: the length is encoded in the leading bits."""
    x = ~n if n < 0 else n
    if x < 64:
        return bytes([(0x80 ^ n) & 0xFF])
    length = (x.bit_length() + 7) // 7
    buf = bytearray(n.to_bytes(10, "big", signed=True)[10 - length :])
    buf[0] ^= _HEADER_BITS[length][0]
    buf[1] ^= _HEADER_BITS[length][1]
    return bytes(buf)


def encode_tensor_name_slice(name: str, sl: Slice) -> bytes:
    """The index key of one stored slice of `name` (checkpoint::EncodeTensorNameSlice). It
    starts with byte 0, so slice keys sort before every tensor name."""
    out = (
        _num_increasing(0) + _escape(name.encode()) + b"\x00\x01" + _num_increasing(len(sl.extents))
    )
    for start, length in sl.extents:
        out += _signed_num_increasing(start) + _signed_num_increasing(length)
    return out


def _escape(raw: bytes) -> bytes:
    """OrderedCode::WriteString's escaping: 0x00 -> 00 ff and 0xff -> ff 00."""
    out = bytearray()
    for chunk in raw.split(b"\x00"):
        out += chunk.replace(b"\xff", b"\xff\x00") + b"\x00\xff"
    return bytes(out[:-2])

"""The sorted string table of a checkpoint's `.index` file (LevelDB's table format, which
TensorFlow's `core/lib/io/table*` copies; FORMATS.md §4.2).

A table is, in file order:

    data block 0 | trailer | ... | data block n | trailer | metaindex block | trailer |
    index block | trailer | footer

* A block holds entries `varint32 shared | varint32 unshared | varint32 value_len |
  key[shared:] | value`, where `shared` bytes of the key are taken from the previous key (prefix
  compression). Every `restart_interval`-th entry stores its whole key (shared = 0) and its
  offset is listed after the entries as a uint32 "restart point", followed by their count.
* A trailer is 5 bytes: the compression type (0: none; TensorFlow writes none for bundles) and
  the masked CRC-32C of the block's bytes followed by that type byte.
* The index block maps, for each data block, a key >= its last key and < the next block's first
  key (as short as possible) to the block's handle `varint64 offset | varint64 size`.
* The footer is the last 48 bytes: the metaindex and index handles zero-padded to 40 bytes,
  then the magic number 0xdb4775248b80fb57 (fixed64, little-endian).

`write_table` is the only writer and `read_table` the only reader. Both follow TensorFlow's
defaults (4 KiB blocks, restart interval 16 for data blocks and 1 for the index block), so the
bytes we write for the same entries are TensorFlow's bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

from flowgraph.core import crc32c, errors

MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5
BLOCK_SIZE = 4096
RESTART_INTERVAL = 16
_MASK_DELTA = 0xA282EAD8
_M32 = 0xFFFFFFFF


def masked_crc32c(data) -> int:
    """TensorFlow's masked CRC-32C: rotated right by 15 bits plus a constant, because a CRC over
    data that embeds CRCs is weak (the same mask as summary/records.py's TFRecord framing)."""
    return mask_crc(crc32c.value(data))


def mask_crc(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & _M32


def varint(n: int) -> bytes:
    """LEB128 encoding of a non-negative int (protobuf's and LevelDB's varint)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, next position) of the varint at `buf[pos]`; IndexError if it runs off the end."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


class _BlockBuilder:
    """Accumulates sorted entries of one block with prefix compression and restart points."""

    def __init__(self, restart_interval: int):
        self.restart_interval = restart_interval
        self.reset()

    def reset(self):
        self.buf = bytearray()
        self.restarts = [0]
        self.counter = 0
        self.last_key = b""

    def empty(self) -> bool:
        return not self.buf

    def size_estimate(self) -> int:
        return len(self.buf) + 4 * len(self.restarts) + 4

    def add(self, key: bytes, value: bytes):
        shared = 0
        if self.counter < self.restart_interval:
            limit = min(len(key), len(self.last_key))
            while shared < limit and key[shared] == self.last_key[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buf))
            self.counter = 0
        self.buf += varint(shared) + varint(len(key) - shared) + varint(len(value))
        self.buf += key[shared:] + value
        self.last_key = key
        self.counter += 1

    def finish(self) -> bytes:
        tail = b"".join(struct.pack("<I", r) for r in self.restarts)
        return bytes(self.buf) + tail + struct.pack("<I", len(self.restarts))


def _shortest_separator(start: bytes, limit: bytes) -> bytes:
    """A short key k with start <= k < limit (LevelDB's BytewiseComparator)."""
    n = min(len(start), len(limit))
    i = 0
    while i < n and start[i] == limit[i]:
        i += 1
    if i < n and start[i] < 0xFF and start[i] + 1 < limit[i]:
        return start[:i] + bytes([start[i] + 1])
    return start


def _short_successor(key: bytes) -> bytes:
    """A short key >= `key` (LevelDB's BytewiseComparator.FindShortSuccessor)."""
    for i, b in enumerate(key):
        if b != 0xFF:
            return key[:i] + bytes([b + 1])
    return key


def _handle(offset: int, size: int) -> bytes:
    return varint(offset) + varint(size)


def write_table(entries: Iterable[tuple[bytes, bytes]], write: Callable[[bytes], None]) -> int:
    """Writes (key, value) pairs, which must be strictly increasing by key, as one table
    through `write`; returns the table's size in bytes."""
    offset = 0
    data = _BlockBuilder(RESTART_INTERVAL)
    index = _BlockBuilder(1)
    pending: tuple[int, int] | None = None  # handle of the last flushed block, awaiting its key

    def emit(block: bytes) -> tuple[int, int]:
        nonlocal offset
        crc = masked_crc32c(block + b"\x00")
        write(block + b"\x00" + struct.pack("<I", crc))
        handle = (offset, len(block))
        offset += len(block) + BLOCK_TRAILER_SIZE
        return handle

    last = None
    for key, value in entries:
        if last is not None and key <= last:
            raise ValueError(f"table keys must be strictly increasing: {last!r} then {key!r}")
        if pending is not None:
            index.add(_shortest_separator(last, key), _handle(*pending))
            pending = None
        data.add(key, value)
        last = key
        if data.size_estimate() >= BLOCK_SIZE:
            pending = emit(data.finish())
            data.reset()
    if not data.empty():
        pending = emit(data.finish())
    if pending is not None:
        index.add(_short_successor(last), _handle(*pending))
    meta_handle = emit(_BlockBuilder(RESTART_INTERVAL).finish())
    index_handle = emit(index.finish())
    footer = _handle(*meta_handle) + _handle(*index_handle)
    footer = footer.ljust(FOOTER_SIZE - 8, b"\x00") + struct.pack("<Q", MAGIC)
    write(footer)
    return offset + len(footer)


def _corrupt(path: str, why: str) -> errors.DataLossError:
    return errors.DataLossError(None, None, f"Unable to read table file {path}: {why}")


def _read_block(buf: bytes, offset: int, size: int, path: str) -> bytes:
    end = offset + size
    if end + BLOCK_TRAILER_SIZE > len(buf):
        raise _corrupt(path, f"block at {offset} (+{size} bytes) runs past the end of the file")
    block = buf[offset:end]
    kind = buf[end]
    (crc,) = struct.unpack_from("<I", buf, end + 1)
    if masked_crc32c(block + bytes([kind])) != crc:
        raise _corrupt(path, f"block checksum mismatch at offset {offset}")
    if kind != 0:
        raise errors.UnimplementedError(
            None, None, f"{path}: table block compression type {kind} (only 0, none, is read)"
        )
    return block


def _block_entries(block: bytes, path: str) -> list[tuple[bytes, bytes]]:
    if len(block) < 4:
        raise _corrupt(path, "block shorter than its restart count")
    (num_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * num_restarts
    if end < 0:
        raise _corrupt(path, "bad restart count")
    out, pos, key = [], 0, b""
    try:
        while pos < end:
            shared, pos = read_varint(block, pos)
            unshared, pos = read_varint(block, pos)
            vlen, pos = read_varint(block, pos)
            if shared > len(key) or pos + unshared + vlen > end:
                raise _corrupt(path, "bad block entry")
            key = key[:shared] + block[pos : pos + unshared]
            pos += unshared
            out.append((key, block[pos : pos + vlen]))
            pos += vlen
    except (IndexError, ValueError) as e:
        raise _corrupt(path, f"bad block entry ({e})") from None
    return out


def read_table(buf: bytes, path: str = "<table>") -> list[tuple[bytes, bytes]]:
    """Every (key, value) of a table held in `buf`, in key order; DataLossError naming `path`
    when the footer, a block or a checksum is wrong."""
    if len(buf) < FOOTER_SIZE:
        raise _corrupt(path, f"file is too short ({len(buf)} bytes) to be a table")
    footer = buf[-FOOTER_SIZE:]
    if struct.unpack_from("<Q", footer, FOOTER_SIZE - 8)[0] != MAGIC:
        raise _corrupt(path, "not an sstable (bad magic number)")
    try:
        _, pos = read_varint(footer, 0)
        _, pos = read_varint(footer, pos)
        index_offset, pos = read_varint(footer, pos)
        index_size, pos = read_varint(footer, pos)
    except (IndexError, ValueError):
        raise _corrupt(path, "bad footer") from None
    body = buf[: len(buf) - FOOTER_SIZE]
    out = []
    for _, handle in _block_entries(_read_block(body, index_offset, index_size, path), path):
        try:
            offset, pos = read_varint(handle, 0)
            size, _ = read_varint(handle, pos)
        except (IndexError, ValueError):
            raise _corrupt(path, "bad block handle") from None
        out.extend(_block_entries(_read_block(body, offset, size, path), path))
    return out

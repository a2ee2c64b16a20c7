"""Record files: the TFRecord framing of event files (§9.1; FORMATS.md §1.1) and input data
(§4.5), their GZIP/ZLIB compression, and the text-line and fixed-length record formats. These are
plain functions and classes over files, shared by the event writer, the reader ops, python_io and
datasets.

A record is, little-endian:

    uint64 length | uint32 masked_crc32c(length bytes) | data[length] | uint32 masked_crc32c(data)

The CRC is CRC-32C (Castagnoli) from `google_crc32c`. It is "masked" (rotated right by 15 bits
plus 0xA282EAD8) because a CRC computed over data that itself embeds CRCs is weak; TensorFlow
masks every CRC it stores. `encode_record` is the only writer of this framing and
`RecordFile.read` (with `read_records` over it) its only reader.

Compression ("", "ZLIB", "GZIP"; TFRecordOptions' names) applies to the whole file, so offsets
here are positions in the uncompressed stream, as in TensorFlow.
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib
from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

import google_crc32c
import numpy as np

from flowgraph.core import errors, records_walk

_MASK_DELTA = 0xA282EAD8
# read_many cuts at least this many records at once (below it, the compiled walk's fixed cost
# is more than reading them one by one: a reader's read() of one record went 86 -> 134
# us/record in bench I1 when it took that path)
_MIN_CUT = 8
_EMPTY = np.zeros(0, np.uint8)
_HEADER = struct.Struct("<QI")  # a record's length and the masked CRC of its 8 bytes
_FOOTER = struct.Struct("<I")  # the masked CRC of its data
_M32 = 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TensorFlow's masked CRC-32C of `data`."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & _M32


def unmask_crc32c(masked: int) -> int:
    """The CRC-32C that `masked_crc32c` masked."""
    rot = (masked - _MASK_DELTA) & _M32
    return ((rot >> 17) | (rot << 15)) & _M32


def encode_record(data: bytes) -> bytes:
    """One TFRecord: length, its masked CRC, the data, the data's masked CRC."""
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", masked_crc32c(length))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


COMPRESSION_TYPES = ("", "ZLIB", "GZIP")


def check_compression(compression_type) -> str:
    """The canonical name of a compression type (None and "NONE" mean none)."""
    name = (compression_type or "").upper()
    name = "" if name == "NONE" else name
    if name not in COMPRESSION_TYPES:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Unsupported compression type {compression_type!r}: use '', 'ZLIB' or 'GZIP'",
        )
    return name


class _ZlibReader(io.RawIOBase):
    """A read-only stream of a zlib-compressed file (TF's ZLIB: header, deflate, adler32)."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self._inflate = zlib.decompressobj()
        self._buffer = b""

    def readable(self):
        return True

    def readinto(self, b):
        while not self._buffer and not self._inflate.eof:
            chunk = self._raw.read(1 << 16)
            if not chunk:
                break
            self._buffer = self._inflate.decompress(chunk)
        n = min(len(b), len(self._buffer))
        b[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n

    def close(self):
        self._raw.close()
        super().close()


def open_read(path: str, compression_type: str = "") -> BinaryIO:
    """`path` opened for reading its uncompressed bytes."""
    compression = check_compression(compression_type)
    try:
        raw = open(path, "rb")  # noqa: SIM115  (the caller closes the stream)
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None
    except OSError as e:
        raise errors.UnknownError(None, None, f"{path}: {e}") from None
    if compression == "GZIP":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "ZLIB":
        return io.BufferedReader(_ZlibReader(raw), 1 << 16)
    return raw


class _ZlibWriter:
    def __init__(self, raw: BinaryIO, level: int):
        self._raw = raw
        self._deflate = zlib.compressobj(level)

    def write(self, data: bytes):
        self._raw.write(self._deflate.compress(data))

    def flush(self):
        self._raw.write(self._deflate.flush(zlib.Z_SYNC_FLUSH))
        self._raw.flush()

    def close(self):
        self._raw.write(self._deflate.flush())
        self._raw.close()


def open_write(path: str, compression_type: str = "", level: int = -1, append: bool = False):
    """`path` opened for writing, compressing with `compression_type` at zlib `level`."""
    compression = check_compression(compression_type)
    raw = open(path, "ab" if append else "wb")  # noqa: SIM115  (the caller closes the stream)
    if compression == "GZIP":
        return gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9 if level < 0 else level)
    if compression == "ZLIB":
        return _ZlibWriter(raw, level)
    return raw


class Chunk(NamedTuple):
    """Records that lie in one buffer: record i's data is buf[starts[i]:starts[i] + lengths[i]]
    and its frame begins at byte offsets[i] of the file's (uncompressed) stream."""

    buf: bytes
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64
    offsets: np.ndarray  # int64


def _joined(records: list[tuple[int, bytes]]) -> Chunk:
    """The (offset, data) records as one Chunk (one record: its data is the buffer)."""
    lengths = np.fromiter((len(d) for _, d in records), np.int64, len(records))
    starts = np.cumsum(lengths) - lengths
    offsets = np.fromiter((o for o, _ in records), np.int64, len(records))
    return Chunk(b"".join([d for _, d in records]), starts, lengths, offsets)


# bytes a RecordFile reads from its stream at a time: a read_up_to whose records straddle two
# blocks costs a refill and two chunks (64 KiB: one read_up_to(64) of I2's in 3.5)
_READ_AHEAD = 1 << 18


class RecordFile:
    """Reads the TFRecords of one file in order; `offset` is where the next record starts.

    The stream is read ahead in blocks and records are cut from the block. A record that fails
    (a bad CRC, a cut) stays at the front of the block, as TF's RecordReader keeps its offset
    there: a later read fails on it again instead of skipping data."""

    def __init__(self, path: str, compression_type: str = "", offset: int = 0):
        self.path = path
        self.offset = 0
        self._stream = open_read(path, compression_type)
        self._buf = b""  # the stream's bytes from `offset` on start at _buf[_pos]
        self._arr = _EMPTY  # _buf as uint8, for compiled code
        self._pos = 0
        if offset:
            self._skip(offset)

    @classmethod
    def over(cls, stream: BinaryIO, path: str = "<stream>") -> RecordFile:
        """Records of an already open (uncompressed) stream."""
        f = cls.__new__(cls)
        f.path, f.offset, f._stream, f._buf, f._arr, f._pos = path, 0, stream, b"", _EMPTY, 0
        return f

    def _skip(self, offset: int):
        while self.offset < offset:
            chunk = self._stream.read(min(1 << 20, offset - self.offset))
            if not chunk:
                raise errors.OutOfRangeError(None, None, f"{self.path}: no offset {offset}")
            self.offset += len(chunk)

    def read(self) -> bytes | None:
        """The next record's data, None at the end; DataLossError on a bad CRC or a cut."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 12:
            buf, pos = self._more(12)
            if len(buf) < 12:
                if buf:
                    raise self._loss("truncated record header")
                return None
        length, length_crc = _HEADER.unpack_from(buf, pos)
        if masked_crc32c(buf[pos : pos + 8]) != length_crc:
            raise self._loss("corrupted record length")
        end = pos + 12 + length
        if len(buf) < end + 4:
            buf, pos = self._more(16 + length)
            end = 12 + length
            if len(buf) < end + 4:
                raise self._loss("truncated record")
        data = buf[pos + 12 : end]
        if masked_crc32c(data) != _FOOTER.unpack_from(buf, end)[0]:
            raise self._loss("corrupted record data")
        self.offset += 16 + length
        self._pos = end + 4
        return data

    def read_many(self, n: int) -> tuple[list[int], list[bytes]]:
        """The offsets and data of up to `n` next records (fewer at the end of the file);
        DataLossError on a bad CRC or a cut, the records before it read."""
        offsets: list[int] = []
        out: list[bytes] = []
        for got in self._records(n):
            if type(got) is Chunk:
                buf, starts, lengths, offs = got
                offsets.extend(offs.tolist())
                out.extend([buf[s : s + m] for s, m in zip(starts.tolist(), lengths.tolist())])
            else:
                offsets.append(got[0])
                out.append(got[1])
        return offsets, out

    def read_chunks(self, n: int) -> list[Chunk]:
        """Up to `n` next records as Chunks, in order, without a bytes object per record (a
        parser reads them in place: kernels/cpu/read_parse.py); fewer at the end of the file.
        DataLossError on a bad CRC or a cut, the records before it read."""
        chunks: list[Chunk] = []
        singles: list[tuple[int, bytes]] = []  # records read one by one, joined into a Chunk
        for got in self._records(n):
            if type(got) is not Chunk:
                singles.append(got)
                continue
            if singles:
                chunks.append(_joined(singles))
                singles = []
            chunks.append(got)
        if singles:
            chunks.append(_joined(singles))
        return chunks

    def read_parsed(self, n: int, parse) -> tuple[int, object]:
        """(count, result) of the n next records decoded where they lie by `parse(buf, pos,
        n)`, a compiled parser that frames them itself and answers (result, where the last
        one ends), or (None, records_walk.CUT) if they run past `buf` (uint8), (None, another
        negative) if they do not parse. Where they run past, the buffer is refilled once; at
        the end of the stream, the whole records left are decoded (count < n). (0, None),
        nothing consumed, where they do not parse: read_chunks then reads them and reports
        what fails. (kernels/cpu/read_parse.py: a reader's steady state, no Chunk made.)"""
        out, end = parse(self._arr, self._pos, n)
        if end == records_walk.CUT:
            more = self._refill()  # either way the unread bytes now start the buffer
            count = n if more else self._whole(n)
            out, end = parse(self._arr, 0, count) if count else (None, end)
            n = count
        if out is None:
            return 0, None
        self.offset += end - self._pos
        self._pos = end
        return n, out

    def _whole(self, n: int) -> int:
        """How many of the next n records lie whole in the buffer, as far as their CRCs
        hold."""
        n = min(n, (self._arr.size - self._pos) // 16)  # a record takes 16 bytes at least
        return records_walk.walk(self._arr, self._pos, n, np.empty((n, 2), np.int64))

    def cut(self, n: int) -> Chunk | None:
        """_cut for readers that keep the records before a bad one (tf.data's runs): up to `n`
        records lying whole in the buffer, or None; then read_chunks(1) refills the buffer or
        raises for the next record."""
        return self._cut(n)

    def _records(self, n: int) -> Iterator:
        """Yields up to `n` next records: Chunks of those cut from the buffer, (offset, data)
        of those read one by one (a few, or one that the buffer holds only in part)."""
        left = n
        while left:
            if left >= _MIN_CUT:
                cut = self._cut(left)
                if cut is None and self._refill():
                    cut = self._cut(left)  # the next record was cut by the buffer's end
                if cut is not None:
                    left -= len(cut.starts)
                    yield cut
                    continue
            offset = self.offset  # no whole record in the buffer: read() refills it
            data = self.read()
            if data is None:
                return
            left -= 1
            yield offset, data

    def _cut(self, n: int) -> Chunk | None:
        """Up to `n` records that lie whole in the buffer, as far as their CRCs hold (read()
        reports the first that fails), or None; their frames are found and their CRCs checked
        by one compiled walk (records_walk.py), not a Python step per field."""
        buf, pos = self._buf, self._pos
        frames = np.empty((n, 2), np.int64)
        k = records_walk.walk(self._arr, pos, n, frames)
        if not k:
            return None
        starts, lengths = frames[:k, 0], frames[:k, 1]
        end = int(starts[-1] + lengths[-1]) + 16
        chunk = Chunk(buf, starts + 12, lengths, starts + (self.offset - pos))
        self.offset += end - pos
        self._pos = end
        return chunk

    def _refill(self) -> bool:
        """Reads the stream's next block into the buffer; False at its end."""
        size = len(self._buf) - self._pos
        return len(self._more(size + 1)[0]) > size

    def _more(self, need: int) -> tuple[bytes, int]:
        """The buffer from the next record on, followed by the stream's next bytes: at least
        `need` in all unless the stream ends first."""
        chunks = [self._buf[self._pos :]] if self._pos < len(self._buf) else []
        have = len(chunks[0]) if chunks else 0
        while have < need:
            chunk = self._stream.read(max(need - have, _READ_AHEAD))
            if not chunk:
                break
            chunks.append(chunk)
            have += len(chunk)
        # a block read after a used-up buffer is kept as it is: no copy with the GIL held
        one = len(chunks) == 1 and type(chunks[0]) is bytes
        self._buf, self._pos = chunks[0] if one else b"".join(chunks), 0
        self._arr = np.frombuffer(self._buf, np.uint8)
        return self._buf, 0

    def _loss(self, what: str) -> errors.DataLossError:
        return errors.DataLossError(None, None, f"{self.path}: {what} at offset {self.offset}")

    def close(self):
        self._stream.close()


class TextLineFile:
    """Reads lines without their line ending ("\\n" or "\\r\\n"); `line_number` counts lines
    read so far (1 is the first)."""

    def __init__(self, path: str, compression_type: str = "", skip_header_lines: int = 0):
        self.path = path
        self.line_number = 0
        self._stream = open_read(path, compression_type)
        for _ in range(skip_header_lines):
            if self.read() is None:
                break

    def read(self) -> bytes | None:
        line = self._stream.readline()
        if not line:
            return None
        self.line_number += 1
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        return line

    def close(self):
        self._stream.close()


class FixedLengthFile:
    """Records of `record_bytes` bytes between a header and a footer; with `hop_bytes` they start
    every hop_bytes (and may overlap). `record_number` counts records read so far."""

    def __init__(
        self,
        path: str,
        record_bytes: int,
        header_bytes: int = 0,
        footer_bytes: int = 0,
        hop_bytes: int = 0,
        compression_type: str = "",
    ):
        if record_bytes <= 0:
            raise errors.InvalidArgumentError(
                None, None, f"record_bytes must be > 0, got {record_bytes}"
            )
        self.path = path
        self.record_number = 0
        with open_read(path, compression_type) as stream:
            data = stream.read()
        end = len(data) - footer_bytes
        self._data = memoryview(data)[header_bytes : max(header_bytes, end)]
        self._record_bytes = record_bytes
        self._hop = hop_bytes or record_bytes

    def read_many(self, n: int) -> list:
        """Up to `n` next records (fewer at the end of the file)."""
        start = self.record_number * self._hop
        last = (len(self._data) - self._record_bytes) // self._hop + 1 if self._data else 0
        count = max(0, min(n, last - self.record_number))
        hop, size = self._hop, self._record_bytes
        out = [bytes(self._data[start + i * hop : start + i * hop + size]) for i in range(count)]
        self.record_number += count
        return out

    def read(self) -> bytes | None:
        got = self.read_many(1)
        return got[0] if got else None

    def close(self):
        self._data = memoryview(b"")


def tf_record_iterator(path: str, compression_type: str = ""):
    """Yields the data of each TFRecord in `path`."""
    f = RecordFile(path, compression_type)
    try:
        while (data := f.read()) is not None:
            yield data
    finally:
        f.close()


def read_records(stream: BinaryIO, path: str = "<stream>") -> Iterator[bytes]:
    """Yields each record's data of an open stream, checking both CRCs.

    Raises DataLossError naming `path` and the record's byte offset on a bad CRC or a record
    cut short (a file still being written ends cleanly only at a record boundary).
    """
    f = RecordFile.over(stream, path)
    while (data := f.read()) is not None:
        yield data

"""TensorFlow's V2 checkpoint, the tensor bundle (whitepaper §3.3 Save/Restore; FORMATS.md §4.2).

A bundle with prefix P is:

* `P.data-00000-of-00001` (one file per shard): the tensors' bytes, back to back. A numeric
  tensor is its raw little-endian row-major bytes; a string tensor is `varint64 len_i ...`,
  then the masked CRC-32C of the lengths (as uint32 each), then the concatenated bytes.
* `P.index`: an SSTable (core/sstable.py). Under the empty key a `BundleHeaderProto`
  (num_shards, endianness, version); under each tensor's name a `BundleEntryProto` (dtype,
  shape, shard_id, offset, size and the masked CRC-32C of the bytes). A partitioned variable
  has one entry under its full name holding the slices' specs and no data, and one entry per
  slice under `encode_tensor_name_slice(name, slice)` (core/tensor_slice.py).

A bundle is written under temporary names and renamed, data files first and the index last:
the index's rename is the commit point, so a reader never sees a partial bundle. All file
writes and renames go through `fs` so that tests can inject a failure at each of them.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import uuid

import google_crc32c
import ml_dtypes
import numpy as np
from google.protobuf.message import DecodeError

from flowgraph.core import errors, sstable
from flowgraph.core.dtypes import as_dtype
from flowgraph.core.protos import (
    BundleEntryProto,
    BundleHeaderProto,
    DataType,
    TensorShapeProto,
)
from flowgraph.core.tensor_slice import Slice, encode_tensor_name_slice

HEADER_KEY = b""
VERSION = 1  # kTensorBundleVersion: what the header's version.producer says


class fs:
    """Every file write and rename of a checkpoint save. Tests replace these to simulate a
    crash at each step; nothing else in flowgraph writes checkpoint files."""

    @staticmethod
    def open_write(path: str):
        return open(path, "wb")

    @staticmethod
    def rename(src: str, dst: str) -> None:
        os.replace(src, dst)


def data_filename(prefix: str, shard: int, num_shards: int) -> str:
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


def index_filename(prefix: str) -> str:
    return f"{prefix}.index"


def temp_suffix() -> str:
    return f".tempstate{uuid.uuid4().int >> 64}"


# -- dtypes --------------------------------------------------------------------------------------
def numpy_dtype(enum: int) -> np.dtype:
    """The NumPy storage type of a DataType; bfloat16 is ml_dtypes.bfloat16 (its 2-byte bits)."""
    if enum == DataType.DT_BFLOAT16:
        return np.dtype(ml_dtypes.bfloat16)
    dt = as_dtype(enum).base_dtype
    if dt.as_numpy_dtype is None:
        raise errors.UnimplementedError(None, None, f"checkpoints of dtype {dt.name}")
    return np.dtype(dt.as_numpy_dtype)


def datatype_of(arr: np.ndarray) -> int:
    if arr.dtype == np.dtype(ml_dtypes.bfloat16):
        return DataType.DT_BFLOAT16
    return as_dtype(arr.dtype).as_datatype_enum


# -- tensor bytes ------------------------------------------------------------------------------
def _encode_strings(flat) -> tuple[bytes, int]:
    """A string tensor's bytes and their unmasked CRC-32C (TensorFlow's WriteStringTensor)."""
    elems = [x.encode() if isinstance(x, str) else bytes(x) for x in flat]
    lengths = np.fromiter((len(e) for e in elems), dtype=np.int64, count=len(elems))
    if lengths.size and lengths.max() > 0xFFFFFFFF:
        raise errors.UnimplementedError(None, None, "checkpoint strings of 4 GiB or more")
    header = b"".join(sstable.varint(int(n)) for n in lengths)
    crc = google_crc32c.value(lengths.astype("<u4").tobytes())
    length_crc = struct.pack("<I", sstable.mask_crc(crc))
    body = b"".join(elems)
    crc = google_crc32c.extend(google_crc32c.extend(crc, length_crc), body)
    return header + length_crc + body, crc


def encode_tensor(arr: np.ndarray) -> tuple[bytes | np.ndarray, int]:
    """(bytes, masked CRC-32C) of one tensor as stored in a data file. A numeric tensor's
    bytes are a read-only uint8 view of the array itself: no copy is made to checksum or
    write it (google_crc32c reads a read-only array's buffer directly)."""
    if arr.dtype == object or arr.dtype.kind in "SU":
        data, crc = _encode_strings(arr.reshape(-1))
        return data, sstable.mask_crc(crc)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    view = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    view.flags.writeable = False
    return view, sstable.masked_crc32c(view)


def _decode_varints(buf: bytes, n: int) -> tuple[np.ndarray, int]:
    """The first `n` varints of `buf`, decoded without a Python loop, and the bytes they took."""
    if n == 0:
        return np.zeros(0, np.int64), 0
    raw = np.frombuffer(buf, np.uint8, count=min(len(buf), 10 * n))
    ends = np.flatnonzero(raw < 0x80)[:n]
    if len(ends) < n:
        raise ValueError("string lengths run past the end of the data")
    end = int(ends[-1]) + 1
    starts = np.concatenate([[0], ends[:-1] + 1])
    pos = np.arange(end) - np.repeat(starts, ends - starts + 1)
    parts = (raw[:end].astype(np.uint64) & np.uint64(0x7F)) << (7 * pos).astype(np.uint64)
    return np.add.reduceat(parts, starts).astype(np.int64), end


def _decode_strings(data: bytes, n: int, where: str) -> np.ndarray:
    try:
        lengths, pos = _decode_varints(data, n)
    except ValueError as e:
        raise errors.DataLossError(None, None, f"{where}: {e}") from None
    (length_crc,) = struct.unpack_from("<I", data, pos) if len(data) >= pos + 4 else (None,)
    crc = google_crc32c.value(lengths.astype("<u4").tobytes())
    if length_crc != sstable.mask_crc(crc):
        raise errors.DataLossError(None, None, f"{where}: string lengths checksum mismatch")
    ends = np.cumsum(lengths) + pos + 4
    if n and ends[-1] > len(data):
        raise errors.DataLossError(None, None, f"{where}: strings run past the entry's end")
    out = np.empty(n, dtype=object)
    out[:] = [data[e - k : e] for e, k in zip(ends.tolist(), lengths.tolist())]
    return out


def _shape_proto(shape) -> TensorShapeProto:
    p = TensorShapeProto()
    for n in shape:
        p.dim.add().size = int(n)
    return p


def _shape_of(p: TensorShapeProto) -> tuple[int, ...]:
    return tuple(d.size for d in p.dim)


def _mkdirs(prefix: str) -> None:
    d = os.path.dirname(prefix)
    if d:
        os.makedirs(d, exist_ok=True)


def _write_index(prefix: str, header: BundleHeaderProto, entries: dict) -> None:
    """Writes `P.index` under a temporary name and renames it: the commit of a bundle."""
    path = index_filename(prefix)
    tmp = path + temp_suffix()
    items = [(HEADER_KEY, header.SerializeToString())]
    items += [(k, entries[k].SerializeToString()) for k in sorted(entries)]
    with fs.open_write(tmp) as f:
        sstable.write_table(items, f.write)
    fs.rename(tmp, path)


class BundleWriter:
    """Writes one bundle: `add` appends a tensor's bytes to the data file, `finish` renames the
    data file into place and commits the index (TensorFlow's BundleWriter)."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        _mkdirs(prefix)
        self._data_path = data_filename(prefix, 0, 1)
        self._tmp_data = self._data_path + temp_suffix()
        self._file = fs.open_write(self._tmp_data)
        self._offset = 0
        self._entries: dict[bytes, BundleEntryProto] = {}

    def add(self, name: str, value) -> None:
        """Appends the whole tensor `value` under `name`."""
        self._add(name.encode(), np.asarray(value, order="C"))

    def _add(self, key: bytes, arr: np.ndarray) -> None:
        if key in self._entries:
            raise errors.InvalidArgumentError(
                None, None, f"Adding duplicate key: {key.decode(errors='replace')}"
            )
        data, crc = encode_tensor(arr)
        self._file.write(data)
        entry = BundleEntryProto(dtype=datatype_of(arr), shard_id=0, offset=self._offset)
        entry.shape.CopyFrom(_shape_proto(arr.shape))
        entry.size = len(data)
        entry.crc32c = crc
        self._entries[key] = entry
        self._offset += entry.size

    def add_slice(self, name: str, full_shape, sl: Slice, value) -> None:
        """Appends one slice of the tensor `name` (a partition of a partitioned variable)."""
        arr = np.asarray(value, order="C")
        if sl.is_full(full_shape):
            return self.add(name, arr)
        want = tuple(n if ln == -1 else ln for (_, ln), n in zip(sl.extents, full_shape))
        if arr.shape != want:
            raise errors.InvalidArgumentError(
                None, None, f"slice of {name}: value shape {list(arr.shape)} != {list(want)}"
            )
        full = self._entries.setdefault(name.encode(), BundleEntryProto())
        if full.HasField("shape") and _shape_of(full.shape) != tuple(full_shape):
            raise errors.InvalidArgumentError(
                None, None, f"slices of {name} disagree on its full shape"
            )
        full.dtype = datatype_of(arr)
        full.shape.CopyFrom(_shape_proto(full_shape))
        full.slices.add().CopyFrom(sl.to_proto())
        self._add(encode_tensor_name_slice(name, sl), arr)

    def finish(self) -> None:
        """Commits the bundle. An older bundle under the same prefix stops existing first (its
        index is removed), so a crash between the renames leaves no bundle, never a new data
        file under an old index."""
        self._file.close()
        try:
            os.remove(index_filename(self.prefix))
        except FileNotFoundError:
            pass
        fs.rename(self._tmp_data, self._data_path)
        header = BundleHeaderProto(num_shards=1)
        header.version.producer = VERSION
        _write_index(self.prefix, header, self._entries)

    def abort(self) -> None:
        """Closes and removes the temporary data file after a failed save."""
        self._file.close()
        try:
            os.remove(self._tmp_data)
        except OSError:
            pass


class BundleReader:
    """Reads a bundle: its entries at once (the index is small), tensor bytes on demand, every
    checksum verified. Errors: NotFoundError for a missing bundle or key, DataLossError (naming
    the file) for a truncated or corrupted one.

    Reads are positional (`os.preadv` into the array that becomes the tensor), so RestoreV2's
    shards on the device pool read through one reader at once. `lookup(name, borrow=True)`
    returns a numeric tensor as a read-only view of the data file mapped into memory, checked
    in place: no allocation and no copy, for a caller whose consumer copies the value anyway
    (RestoreV2 into Assign; passes/borrowed_restores.py decides). The mapping lives as long
    as such a view; files of a committed bundle are never written in place (a save writes
    new files and renames them), so the view keeps the bytes it was checked with."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        path = index_filename(prefix)
        try:
            with open(path, "rb") as f:
                buf = f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise errors.NotFoundError(
                None,
                None,
                "Unsuccessful TensorSliceReader constructor: Failed to find any matching files "
                f"for {prefix}",
            ) from None
        table = sstable.read_table(buf, path)
        if not table or table[0][0] != HEADER_KEY:
            raise errors.DataLossError(None, None, f"{path}: no bundle header under the empty key")
        try:
            self.header = BundleHeaderProto.FromString(table[0][1])
            self._entries = {k: BundleEntryProto.FromString(v) for k, v in table[1:]}
        except DecodeError as e:
            raise errors.DataLossError(None, None, f"{path}: bad entry ({e})") from None
        self._big_endian = self.header.endianness == BundleHeaderProto.BIG
        self._fds: dict[int, int] = {}  # shard -> open file descriptor
        self._maps: dict[int, mmap.mmap | None] = {}  # shard -> mapping (None: not mappable)
        self._lock = threading.Lock()  # guards opening files and mappings

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
            for m in self._maps.values():
                try:
                    if m is not None:
                        m.close()
                except BufferError:
                    pass  # a borrowed view still uses it: unmapped when the last one goes
            self._maps.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def keys(self) -> list[str]:
        """Tensor names in sorted order (slice entries, whose keys start with byte 0, excluded)."""
        return [k.decode() for k in self._entries if not k.startswith(b"\x00")]

    def contains(self, name: str) -> bool:
        return name.encode() in self._entries

    def entry(self, name: str) -> BundleEntryProto:
        try:
            return self._entries[name.encode()]
        except KeyError:
            raise errors.NotFoundError(
                None, None, f"Key {name} not found in checkpoint {self.prefix}"
            ) from None

    def dtype(self, name: str) -> int:
        return self.entry(name).dtype

    def shape(self, name: str) -> tuple[int, ...]:
        return _shape_of(self.entry(name).shape)

    def nbytes(self, name: str) -> int:
        """The bytes stored for `name` (its slices' for a partitioned tensor): a read's cost."""
        entry = self.entry(name)
        if not entry.slices:
            return entry.size
        parts = (
            self._entries.get(encode_tensor_name_slice(name, Slice.from_proto(p)))
            for p in entry.slices
        )
        return sum(p.size for p in parts if p is not None)

    def lookup(self, name: str, borrow: bool = False) -> np.ndarray:
        """The whole tensor `name`, assembled from its slices if it was saved partitioned.
        With `borrow`, a numeric tensor may be a read-only view of the mapped data file (see
        the class docstring): the caller must copy what it keeps."""
        entry = self.entry(name)
        if entry.slices:
            return self._assemble(name, entry)
        return self._read(entry, name, borrow)

    def lookup_slice(self, name: str, sl: Slice) -> np.ndarray:
        """The part `sl` of tensor `name` (RestoreV2 with a slice spec)."""
        full = self.lookup(name)
        if len(sl.extents) != full.ndim:
            raise errors.InvalidArgumentError(
                None, None, f"slice of rank {len(sl.extents)} for {name} of rank {full.ndim}"
            )
        for (start, length), n in zip(sl.extents, full.shape):
            if length != -1 and (start < 0 or start + length > n):
                raise errors.InvalidArgumentError(
                    None, None, f"slice {sl.extents} is outside {name}'s shape {list(full.shape)}"
                )
        return full[sl.index(full.shape)]

    def _assemble(self, name: str, entry: BundleEntryProto) -> np.ndarray:
        shape = _shape_of(entry.shape)
        out = np.zeros(shape, dtype=numpy_dtype(entry.dtype))
        for proto in entry.slices:
            sl = Slice.from_proto(proto)
            key = encode_tensor_name_slice(name, sl)
            part = self._entries.get(key)
            if part is None:
                raise errors.DataLossError(
                    None,
                    None,
                    f"{index_filename(self.prefix)}: slice {sl.extents} of {name} "
                    "is listed but not stored",
                )
            out[sl.index(shape)] = self._read(part, name, borrow=True)  # copied into `out`
        return out

    def _fd(self, shard: int) -> int:
        fd = self._fds.get(shard)
        if fd is None:
            with self._lock:
                fd = self._fds.get(shard)
                if fd is None:
                    path = data_filename(self.prefix, shard, self.header.num_shards)
                    try:
                        fd = os.open(path, os.O_RDONLY)
                    except FileNotFoundError:
                        raise errors.DataLossError(
                            None, None, f"data file {path} of checkpoint {self.prefix} is missing"
                        ) from None
                    self._fds[shard] = fd
        return fd

    def _map(self, shard: int) -> mmap.mmap | None:
        """The shard's data file mapped read-only, or None where it cannot be (an empty file,
        a file system without mmap)."""
        if shard in self._maps:
            return self._maps[shard]
        fd = self._fd(shard)
        with self._lock:
            if shard not in self._maps:
                try:
                    self._maps[shard] = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
                except (OSError, ValueError):
                    self._maps[shard] = None
            return self._maps[shard]

    def _bytes(self, entry: BundleEntryProto, where: str, borrow: bool) -> np.ndarray:
        """The entry's bytes as a read-only uint8 array: a view of the mapped file (`borrow`)
        or a new array read into; DataLossError if the file ends before them."""
        got = 0
        mapped = self._map(entry.shard_id) if borrow else None
        if mapped is not None:
            got = max(0, min(entry.size, len(mapped) - entry.offset))
            if got == entry.size:
                return np.frombuffer(mapped, np.uint8, entry.size, entry.offset)
        else:
            data = np.empty(entry.size, np.uint8)
            fd = self._fd(entry.shard_id)
            view = memoryview(data)
            while got < entry.size:  # a read returns at most ~2 GiB
                n = os.preadv(fd, [view[got:]], entry.offset + got)
                if n == 0:
                    break
                got += n
            if got == entry.size:
                data.flags.writeable = False
                return data
        raise errors.DataLossError(
            None,
            None,
            f"{where}: file is truncated (wanted {entry.size} bytes at offset "
            f"{entry.offset}, got {got})",
        )

    def _read(self, entry: BundleEntryProto, name: str, borrow: bool = False) -> np.ndarray:
        path = data_filename(self.prefix, entry.shard_id, self.header.num_shards)
        where = f"tensor {name} in {path}"
        is_string = entry.dtype == DataType.DT_STRING
        data = self._bytes(entry, where, borrow and not is_string)
        shape = _shape_of(entry.shape)
        n = int(np.prod(shape, dtype=np.int64))
        if is_string:
            raw = data.tobytes()
            arr = _decode_strings(raw, n, where)
            crc = sstable.mask_crc(_string_crc(raw, arr))
        else:
            crc = sstable.masked_crc32c(data)
            dt = numpy_dtype(entry.dtype)
            if n * dt.itemsize != entry.size:
                raise errors.DataLossError(
                    None, None, f"{where}: {entry.size} bytes for shape {list(shape)}"
                )
            arr = data.view(dt.newbyteorder(">" if self._big_endian else "<"))
            if self._big_endian:
                arr = arr.astype(dt)
        if crc != entry.crc32c:
            raise errors.DataLossError(
                None,
                None,
                f"Checksum does not match: stored {entry.crc32c} vs. calculated on "
                f"the restored bytes {crc} ({where})",
            )
        return arr.reshape(shape)


def _string_crc(data: bytes, arr: np.ndarray) -> int:
    """The entry CRC of a decoded string tensor: lengths as uint32, the length CRC, the bytes."""
    lengths = np.fromiter((len(x) for x in arr), dtype=np.int64, count=len(arr))
    _, pos = _decode_varints(data, len(arr))
    crc = google_crc32c.value(lengths.astype("<u4").tobytes())
    return google_crc32c.extend(crc, data[pos:])


def merge_bundles(
    sources: list[str],
    destination: str,
    delete_old_dirs: bool = True,
    allow_missing_files: bool = False,
) -> None:
    """Merges bundles into one with a data file per source shard (MergeV2Checkpoints): data
    files are renamed, then the merged index is committed, then the sources' indexes and (with
    `delete_old_dirs`) their emptied directories are removed."""
    readers = []
    for src in sources:
        try:
            readers.append(BundleReader(src))
        except errors.NotFoundError:
            if not allow_missing_files:
                raise
    if not readers:
        raise errors.InvalidArgumentError(None, None, f"no checkpoint to merge into {destination}")
    num_shards = sum(r.header.num_shards for r in readers)
    merged: dict[bytes, BundleEntryProto] = {}
    base = 0
    _mkdirs(destination)
    try:  # withdraw an older bundle under this prefix before renaming data files over it
        os.remove(index_filename(destination))
    except FileNotFoundError:
        pass
    for r in readers:
        for key, entry in r._entries.items():
            _merge_entry(merged, key, entry, base, destination)
        r.close()
        for i in range(r.header.num_shards):
            fs.rename(
                data_filename(r.prefix, i, r.header.num_shards),
                data_filename(destination, base + i, num_shards),
            )
        base += r.header.num_shards
    header = BundleHeaderProto(num_shards=num_shards)
    header.version.producer = VERSION
    _write_index(destination, header, merged)
    for r in readers:
        if os.path.abspath(r.prefix) == os.path.abspath(destination):
            continue
        os.remove(index_filename(r.prefix))
        if delete_old_dirs:
            try:
                os.rmdir(os.path.dirname(r.prefix) or ".")
            except OSError:
                pass  # not empty or already gone: TF ignores this too


def _merge_entry(merged: dict, key: bytes, entry: BundleEntryProto, base: int, dest: str):
    copy = BundleEntryProto()
    copy.CopyFrom(entry)
    if not entry.slices:
        copy.shard_id += base
    old = merged.get(key)
    if old is None:
        merged[key] = copy
    elif entry.slices and old.slices and old.dtype == entry.dtype and old.shape == entry.shape:
        old.slices.extend(entry.slices)
    else:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Duplicate tensor keyed by {key.decode(errors='replace')} encountered, "
            f"when merging prefix into {dest}",
        )

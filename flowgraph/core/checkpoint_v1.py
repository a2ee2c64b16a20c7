"""TensorFlow's V1 checkpoint format, written by the TF1-era `Save`/`SaveSlices` ops and read by
`Restore`/`RestoreSlice` (and by RestoreV2 and the checkpoint reader when a prefix has no V2
`.index`), as TF's TensorSliceWriter/TensorSliceReader do.

A V1 checkpoint is one SSTable file (core/sstable.py) per shard, matched by a file pattern
("model.ckpt-?????-of-00002"). Under the empty key a SavedTensorSlices holds the meta: every
tensor's name, full shape, dtype and stored slices; under encode_tensor_name_slice(name, slice)
a SavedTensorSlices holds one slice's values in the TensorProto's typed `*_val` field.
"""

from __future__ import annotations

import glob
import os

import numpy as np
from google.protobuf.message import DecodeError

from flowgraph.core import errors, sstable
from flowgraph.core.protos import DataType, SavedTensorSlices, TensorProto, TensorShapeProto
from flowgraph.core.tensor_bundle import datatype_of, fs, numpy_dtype, temp_suffix
from flowgraph.core.tensor_slice import Slice, encode_tensor_name_slice
from flowgraph.core.tensor_util import make_ndarray

VERSION = 1  # TF_CHECKPOINT_VERSION


def _shape_proto(shape) -> TensorShapeProto:
    p = TensorShapeProto()
    for n in shape:
        p.dim.add().size = int(n)
    return p


def _fill(proto: TensorProto, arr: np.ndarray) -> None:
    """The values of `arr` in the typed field TensorSliceWriter uses (no tensor_content)."""
    flat = arr.reshape(-1)
    enum = datatype_of(arr) if arr.dtype != object else DataType.DT_STRING
    if enum == DataType.DT_STRING:
        proto.string_val.extend(x if isinstance(x, bytes) else str(x).encode() for x in flat)
        return
    fields = {
        DataType.DT_FLOAT: ("float_val", None),
        DataType.DT_DOUBLE: ("double_val", None),
        DataType.DT_INT32: ("int_val", None),
        DataType.DT_INT16: ("int_val", None),
        DataType.DT_INT8: ("int_val", None),
        DataType.DT_UINT8: ("int_val", None),
        DataType.DT_UINT16: ("int_val", None),
        DataType.DT_INT64: ("int64_val", None),
        DataType.DT_UINT32: ("uint32_val", None),
        DataType.DT_UINT64: ("uint64_val", None),
        DataType.DT_BOOL: ("bool_val", None),
        DataType.DT_HALF: ("half_val", np.uint16),
        DataType.DT_BFLOAT16: ("half_val", np.uint16),
        DataType.DT_COMPLEX64: ("scomplex_val", np.float32),
        DataType.DT_COMPLEX128: ("dcomplex_val", np.float64),
    }
    if enum not in fields:
        raise errors.UnimplementedError(None, None, f"V1 checkpoints of DataType {enum}")
    field, view = fields[enum]
    values = flat.view(view) if view is not None else flat
    getattr(proto, field).extend(values.tolist())


def write_v1(filename: str, tensors) -> None:
    """Writes [(name, full_shape or None, Slice or None, array)] as one V1 table file, under a
    temporary name renamed into place (TensorSliceWriter)."""
    meta = SavedTensorSlices()
    meta.meta.versions.producer = VERSION
    by_name: dict = {}
    data: dict[bytes, bytes] = {}
    for name, full_shape, sl, arr in tensors:
        arr = np.asarray(arr)
        if sl is None:
            full_shape, sl = arr.shape, Slice(((0, -1),) * arr.ndim)
        ssm = by_name.get(name)
        enum = DataType.DT_STRING if arr.dtype == object else datatype_of(arr)
        if ssm is None:
            ssm = meta.meta.tensor.add(name=name, type=enum)
            ssm.shape.CopyFrom(_shape_proto(full_shape))
            by_name[name] = ssm
        elif ssm.type != enum or tuple(d.size for d in ssm.shape.dim) != tuple(full_shape):
            raise errors.InvalidArgumentError(
                None, None, f"slices of {name} disagree on dtype or shape"
            )
        ssm.slice.add().CopyFrom(sl.to_proto())
        key = encode_tensor_name_slice(name, sl)
        if key in data:
            raise errors.InvalidArgumentError(None, None, f"Adding duplicate key: {name}")
        sts = SavedTensorSlices()
        sts.data.name = name
        sts.data.slice.CopyFrom(sl.to_proto())
        _fill(sts.data.data, arr)
        data[key] = sts.SerializeToString()
    entries = [(b"", meta.SerializeToString())] + sorted(data.items())
    d = os.path.dirname(filename)
    if d:
        os.makedirs(d, exist_ok=True)
    tmp = filename + temp_suffix()
    with fs.open_write(tmp) as f:
        sstable.write_table(entries, f.write)
    fs.rename(tmp, filename)


def matching_files(pattern: str) -> list[str]:
    """The files of a V1 checkpoint: the glob `pattern` (or the file itself)."""
    if any(c in pattern for c in "*?["):
        return sorted(glob.glob(pattern))
    return [pattern] if os.path.isfile(pattern) else []


class V1Reader:
    """Reads a V1 checkpoint (all its shards); the interface of tensor_bundle.BundleReader."""

    def __init__(self, file_pattern: str):
        self.prefix = file_pattern
        files = matching_files(file_pattern)
        if not files:
            raise errors.NotFoundError(
                None,
                None,
                "Unsuccessful TensorSliceReader constructor: Failed to find any "
                f"matching files for {file_pattern}",
            )
        self._tables: list[dict] = []
        self._meta: dict = {}  # name -> (dtype enum, shape, [(Slice, table index)])
        for path in files:
            with open(path, "rb") as f:
                table = dict(sstable.read_table(f.read(), path))
            try:
                meta = SavedTensorSlices.FromString(table[b""]).meta
            except (KeyError, DecodeError):
                raise errors.DataLossError(None, None, f"{path}: not a V1 checkpoint") from None
            for t in meta.tensor:
                slices = self._meta.setdefault(
                    t.name, (t.type, tuple(d.size for d in t.shape.dim), [])
                )[2]
                slices.extend((Slice.from_proto(s), len(self._tables)) for s in t.slice)
            self._tables.append(table)

    def close(self):
        self._tables = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def keys(self) -> list[str]:
        return sorted(self._meta)

    def contains(self, name: str) -> bool:
        return name in self._meta

    def _get(self, name: str):
        try:
            return self._meta[name]
        except KeyError:
            raise errors.NotFoundError(
                None, None, f"Key {name} not found in checkpoint {self.prefix}"
            ) from None

    def dtype(self, name: str) -> int:
        return self._get(name)[0]

    def shape(self, name: str) -> tuple[int, ...]:
        return self._get(name)[1]

    def lookup(self, name: str) -> np.ndarray:
        kind, shape, slices = self._get(name)
        dt = numpy_dtype(kind)
        out = np.full(shape, b"", dtype=object) if dt == object else np.zeros(shape, dt)
        for sl, i in slices:
            raw = self._tables[i].get(encode_tensor_name_slice(name, sl))
            if raw is None:
                raise errors.DataLossError(None, None, f"{self.prefix}: slice of {name} missing")
            proto = SavedTensorSlices.FromString(raw).data.data
            index = sl.index(shape)
            proto.dtype = kind
            proto.tensor_shape.CopyFrom(_shape_proto([s.stop - s.start for s in index]))
            out[index] = _values(proto, dt)
        return out

    def lookup_slice(self, name: str, sl: Slice) -> np.ndarray:
        full = self.lookup(name)
        return full[sl.index(full.shape)]


def _values(proto: TensorProto, dt: np.dtype) -> np.ndarray:
    """A slice's values; bfloat16 (which tensor_util does not decode) from its uint16 bits."""
    if proto.dtype != DataType.DT_BFLOAT16:
        return make_ndarray(proto)
    shape = [d.size for d in proto.tensor_shape.dim]
    return np.array(proto.half_val, np.uint16).view(dt).reshape(shape)


def open_checkpoint(prefix: str):
    """A reader of the checkpoint `prefix`: the V2 bundle if its `.index` exists, else a V1
    checkpoint matching `prefix` (RestoreV2's fallback); NotFoundError if neither."""
    from flowgraph.core.tensor_bundle import BundleReader, index_filename

    if os.path.isfile(index_filename(prefix)) or not matching_files(prefix):
        return BundleReader(prefix)
    return V1Reader(prefix)

"""Datasets of the records in files (whitepaper §4.5: input nodes that read files directly):
TFRecords, text lines and fixed-length records, one string per record (core/records.py reads
them in the kernels). `filenames` is a string, a list of strings or a string tensor."""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape
from flowgraph.data.dataset_ops import Dataset, _int64, _op
from flowgraph.data.structure import Spec, Structure
from flowgraph.framework import convert
from flowgraph.ops import array

_STRING = Structure(Spec(dtypes.string, TensorShape([])))


def _filenames(filenames):
    t = convert.convert_to_tensor(filenames, dtype=dtypes.string, name="filenames")
    if t.shape.ndims not in (None, 0, 1):
        raise ValueError(f"`filenames` must be a scalar or a vector, got shape {t.shape}")
    return array.reshape(t, [-1]) if t.shape.ndims != 1 else t


def _compression(compression_type):
    value = "" if compression_type is None else compression_type
    return convert.convert_to_tensor(value, dtype=dtypes.string, name="compression_type")


def _buffer(buffer_size, default):
    return _int64(default if buffer_size is None else buffer_size, "buffer_size")


class TFRecordDataset(Dataset):
    """The records of TFRecord files, in order (`compression_type` "", "ZLIB" or "GZIP").

    `num_parallel_reads` interleaves that many files (TF's parallel_interleave, in order)."""

    def __init__(self, filenames, compression_type=None, buffer_size=None, num_parallel_reads=None):
        names = _filenames(filenames)
        comp, buf = _compression(compression_type), _buffer(buffer_size, 256 * 1024)
        if num_parallel_reads is None:
            variant = _op("TFRecordDataset", [names, comp, buf])
            super().__init__(variant, _STRING)
            return
        files = Dataset.from_tensor_slices(names)
        ds = files.interleave(
            lambda f: TFRecordDataset(f, compression_type, buffer_size),
            cycle_length=num_parallel_reads,
            block_length=1,
            num_parallel_calls=num_parallel_reads,
        )
        super().__init__(ds._variant_tensor, ds._structure)


class TextLineDataset(Dataset):
    """The lines of text files, without their line endings."""

    def __init__(self, filenames, compression_type=None, buffer_size=None):
        variant = _op(
            "TextLineDataset",
            [
                _filenames(filenames),
                _compression(compression_type),
                _buffer(buffer_size, 256 * 1024),
            ],
        )
        super().__init__(variant, _STRING)


class FixedLengthRecordDataset(Dataset):
    """Records of `record_bytes` bytes between a header and a footer of each file."""

    def __init__(
        self,
        filenames,
        record_bytes,
        header_bytes=None,
        footer_bytes=None,
        buffer_size=None,
        compression_type=None,
    ):
        inputs = [
            _filenames(filenames),
            _int64(header_bytes or 0, "header_bytes"),
            _int64(record_bytes, "record_bytes"),
            _int64(footer_bytes or 0, "footer_bytes"),
            _buffer(buffer_size, 256 * 1024),
            _compression(compression_type),
        ]
        super().__init__(_op("FixedLengthRecordDatasetV2", inputs), _STRING)


TFRecordDatasetV1 = TFRecordDataset
TextLineDatasetV1 = TextLineDataset
FixedLengthRecordDatasetV1 = FixedLengthRecordDataset

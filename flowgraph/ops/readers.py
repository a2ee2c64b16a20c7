"""Readers (whitepaper §4.5): tf.TFRecordReader, tf.TextLineReader, tf.FixedLengthRecordReader,
tf.WholeFileReader and tf.IdentityReader, plus tf.read_file / tf.write_file.

A reader is a stateful op: `read(queue)` produces the next (key, value) record, taking a new
work item (file name) from `queue` whenever the current one is exhausted.

Example:
    files = tf.train.string_input_producer(["a.tfrecord"])
    key, value = tf.TFRecordReader().read(files)
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import convert
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.operation import Tensor
from flowgraph.ops.tf_record import TFRecordOptions

__all__ = [
    "FixedLengthRecordReader",
    "IdentityReader",
    "LMDBReader",
    "ReaderBase",
    "TFRecordReader",
    "TextLineReader",
    "WholeFileReader",
    "read_file",
    "write_file",
]


class ReaderBase:
    """A reader op's handle and the ops that use it."""

    def __init__(self, reader_ref, supports_serialize=False):
        self._reader_ref = reader_ref
        self._supports_serialize = supports_serialize

    @property
    def reader_ref(self):
        return self._reader_ref

    @property
    def supports_serialize(self):
        return self._supports_serialize

    def read(self, queue, name=None):
        """The next (key, value) record; takes work items from `queue` (a queue or its handle)."""
        queue_ref = queue if isinstance(queue, Tensor) else queue.queue_ref
        key, value = apply_op("ReaderReadV2", [self._reader_ref, queue_ref], name=name).outputs
        return key, value

    def read_up_to(self, queue, num_records, name=None):
        """Up to `num_records` records (fewer at the end of a work item)."""
        queue_ref = queue if isinstance(queue, Tensor) else queue.queue_ref
        n = convert.convert_to_tensor(num_records, dtype=dtypes.int64, name="num_records")
        keys, values = apply_op(
            "ReaderReadUpToV2", [self._reader_ref, queue_ref, n], name=name
        ).outputs
        return keys, values

    def num_records_produced(self, name=None):
        return apply_op("ReaderNumRecordsProducedV2", [self._reader_ref], name=name).outputs[0]

    def num_work_units_completed(self, name=None):
        return apply_op("ReaderNumWorkUnitsCompletedV2", [self._reader_ref], name=name).outputs[0]

    def serialize_state(self, name=None):
        """A string holding the reader's state (its work counts and position)."""
        return apply_op("ReaderSerializeStateV2", [self._reader_ref], name=name).outputs[0]

    def restore_state(self, state, name=None):
        """Restores a state from serialize_state."""
        state = convert.convert_to_tensor(state, dtype=dtypes.string, name="state")
        return apply_op("ReaderRestoreStateV2", [self._reader_ref, state], name=name)

    def reset(self, name=None):
        """Back to the initial state: no work item, counts zero."""
        return apply_op("ReaderResetV2", [self._reader_ref], name=name)


class TFRecordReader(ReaderBase):
    """Reads the records of TFRecord files (`options` gives the compression)."""

    def __init__(self, name=None, options=None):
        compression = TFRecordOptions.get_compression_type_string(options)
        ref = apply_op("TFRecordReaderV2", [], name=name, compression_type=compression).outputs[0]
        super().__init__(ref, supports_serialize=True)


class TextLineReader(ReaderBase):
    """Reads the lines of text files, without line endings."""

    def __init__(self, skip_header_lines=None, name=None):
        ref = apply_op(
            "TextLineReaderV2", [], name=name, skip_header_lines=skip_header_lines
        ).outputs[0]
        super().__init__(ref, supports_serialize=True)


class FixedLengthRecordReader(ReaderBase):
    """Reads fixed-size records (after `header_bytes`, before `footer_bytes`, one every
    `hop_bytes` if given); `encoding` may be 'ZLIB' or 'GZIP'."""

    def __init__(
        self,
        record_bytes,
        header_bytes=None,
        footer_bytes=None,
        hop_bytes=None,
        name=None,
        encoding=None,
    ):
        ref = apply_op(
            "FixedLengthRecordReaderV2",
            [],
            name=name,
            record_bytes=record_bytes,
            header_bytes=header_bytes,
            footer_bytes=footer_bytes,
            hop_bytes=hop_bytes,
            encoding=encoding,
        ).outputs[0]
        super().__init__(ref, supports_serialize=True)


class WholeFileReader(ReaderBase):
    """Reads whole files: key is the file name, value its contents."""

    def __init__(self, name=None):
        super().__init__(apply_op("WholeFileReaderV2", [], name=name).outputs[0], True)


class IdentityReader(ReaderBase):
    """Outputs each work item as both key and value."""

    def __init__(self, name=None):
        super().__init__(apply_op("IdentityReaderV2", [], name=name).outputs[0], True)


class LMDBReader(ReaderBase):
    """LMDB databases need the lmdb library, which flowgraph does not use."""

    def __init__(self, name=None, options=None):
        raise NotImplementedError("tf.LMDBReader is not supported by flowgraph (no LMDB library)")


def read_file(filename, name=None):
    """The contents of file `filename` as a string scalar."""
    filename = convert.convert_to_tensor(filename, dtype=dtypes.string, name="filename")
    return apply_op("ReadFile", [filename], name=name).outputs[0]


def write_file(filename, contents, name=None):
    """Writes `contents` to file `filename` (an op)."""
    filename = convert.convert_to_tensor(filename, dtype=dtypes.string, name="filename")
    contents = convert.convert_to_tensor(contents, dtype=dtypes.string, name="contents")
    return apply_op("WriteFile", [filename, contents], name=name)

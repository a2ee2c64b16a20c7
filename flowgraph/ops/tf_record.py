"""tf.python_io / tf.io: writing and iterating TFRecord files from Python (the framing and the
compression are core/records.py's).

Example:
    opts = tf.python_io.TFRecordOptions(tf.python_io.TFRecordCompressionType.GZIP)
    with tf.python_io.TFRecordWriter("data.tfrecord.gz", opts) as w:
        w.write(example.SerializeToString())
    for record in tf.python_io.tf_record_iterator("data.tfrecord.gz", opts): ...
"""

from __future__ import annotations

from flowgraph.core import records

__all__ = ["TFRecordCompressionType", "TFRecordOptions", "TFRecordWriter", "tf_record_iterator"]


class TFRecordCompressionType:
    """The compression of a TFRecord file."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


_NAMES = {
    TFRecordCompressionType.NONE: "",
    TFRecordCompressionType.ZLIB: "ZLIB",
    TFRecordCompressionType.GZIP: "GZIP",
}


class TFRecordOptions:
    """How a TFRecord file is compressed. Of the zlib tuning options only compression_level is
    supported; the others raise rather than be ignored."""

    def __init__(
        self,
        compression_type=None,
        flush_mode=None,
        input_buffer_size=None,
        output_buffer_size=None,
        window_bits=None,
        compression_level=None,
        compression_method=None,
        mem_level=None,
        compression_strategy=None,
    ):
        unsupported = {
            "flush_mode": flush_mode,
            "input_buffer_size": input_buffer_size,
            "output_buffer_size": output_buffer_size,
            "window_bits": window_bits,
            "compression_method": compression_method,
            "mem_level": mem_level,
            "compression_strategy": compression_strategy,
        }
        for arg, value in unsupported.items():
            if value is not None:
                raise NotImplementedError(
                    f"TFRecordOptions({arg}=...) is not supported by flowgraph; only "
                    f"compression_type and compression_level are"
                )
        if (
            compression_type is not None
            and not isinstance(compression_type, str)
            and (compression_type not in _NAMES)
        ):
            raise ValueError(f"Unknown compression type {compression_type!r}")
        self.compression_type = compression_type
        self.compression_level = compression_level

    @classmethod
    def get_compression_type_string(cls, options) -> str:
        """'', 'ZLIB' or 'GZIP' for options given as TFRecordOptions, a name or an enum value."""
        if options is None:
            return ""
        if isinstance(options, TFRecordOptions):
            return cls.get_compression_type_string(options.compression_type)
        if isinstance(options, str):
            return records.check_compression(options)
        if options in _NAMES:
            return _NAMES[options]
        raise ValueError(f"Unknown compression type {options!r}")

    def _level(self) -> int:
        return -1 if self.compression_level is None else int(self.compression_level)


class TFRecordWriter:
    """Writes records to a TFRecord file (a context manager)."""

    def __init__(self, path, options=None):
        compression = TFRecordOptions.get_compression_type_string(options)
        level = options._level() if isinstance(options, TFRecordOptions) else -1
        self._path = str(path)
        self._stream = records.open_write(self._path, compression, level)

    def write(self, record):
        """Appends one record (bytes, or str encoded as UTF-8)."""
        if isinstance(record, str):
            record = record.encode()
        self._stream.write(records.encode_record(bytes(record)))

    def flush(self):
        self._stream.flush()

    def close(self):
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def tf_record_iterator(path, options=None):
    """Yields the records of a TFRecord file, checking every CRC."""
    return records.tf_record_iterator(
        str(path), TFRecordOptions.get_compression_type_string(options)
    )

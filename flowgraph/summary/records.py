"""The TFRecord framing of event files; its owner is `flowgraph/core/records.py` (shared with the
input readers), re-exported here for the summary writer and its users."""

from flowgraph.core.records import encode_record, masked_crc32c, read_records, unmask_crc32c

__all__ = ["encode_record", "masked_crc32c", "read_records", "unmask_crc32c"]

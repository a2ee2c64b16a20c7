"""tf.summary: summary ops and the FileWriter for TensorBoard event files (whitepaper §9.1).

`records` re-exports the TFRecord framing (owned by core/records.py), `writer` the event files,
`summary_ops` the graph nodes; the ops' kernels (histogram bucketing, PNG) are in
`flowgraph/kernels/cpu/summary.py`. `summary_iterator(path)` reads an event file back, checking
every CRC.
"""

from flowgraph.core.protos import Event, SessionLog, Summary, SummaryMetadata, TaggedRunMetadata
from flowgraph.summary.records import read_records
from flowgraph.summary.summary_ops import (
    histogram,
    image,
    merge,
    merge_all,
    scalar,
    tensor_summary,
    text,
)
from flowgraph.summary.writer import FileWriter, FileWriterCache


def summary_iterator(path):
    """Yields the Event protos of event file `path`, in file order (TF1's summary_iterator)."""
    with open(path, "rb") as f:
        for data in read_records(f, path):
            event = Event()
            event.ParseFromString(data)
            yield event


__all__ = [
    "Event",
    "FileWriter",
    "FileWriterCache",
    "SessionLog",
    "Summary",
    "SummaryMetadata",
    "TaggedRunMetadata",
    "histogram",
    "image",
    "merge",
    "merge_all",
    "scalar",
    "summary_iterator",
    "tensor_summary",
    "text",
]

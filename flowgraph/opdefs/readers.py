"""OpDefs of readers (whitepaper §4.5: input operation nodes that read files) and of ReadFile /
WriteFile. TF1's readers create the V2 ops (a resource handle)."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape
from flowgraph.opdefs.shape_fns import no_outputs, scalar

_COMMON = ["container: string = ''", "shared_name: string = ''"]
_READERS = {
    "TFRecordReaderV2": ["compression_type: string = ''"],
    "TextLineReaderV2": ["skip_header_lines: int = 0"],
    "FixedLengthRecordReaderV2": [
        "header_bytes: int = 0",
        "record_bytes: int",
        "footer_bytes: int = 0",
        "hop_bytes: int = 0",
        "encoding: string = ''",
    ],
    "WholeFileReaderV2": [],
    "IdentityReaderV2": [],
}
for _op, _attrs in _READERS.items():
    register_op(
        OpDef(
            _op,
            outputs=["reader_handle: resource"],
            attrs=_attrs + _COMMON,
            shape_fn=scalar,
            is_stateful=True,
        )
    )

register_op(
    OpDef(
        "ReaderReadV2",
        inputs=["reader_handle: resource", "queue_handle: resource"],
        outputs=["key: string", "value: string"],
        shape_fn=lambda ctx: [TensorShape([]), TensorShape([])],
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "ReaderReadUpToV2",
        inputs=["reader_handle: resource", "queue_handle: resource", "num_records: int64"],
        outputs=["keys: string", "values: string"],
        shape_fn=lambda ctx: [TensorShape([None]), TensorShape([None])],
        is_stateful=True,
    )
)
for _op, _out in (
    ("ReaderNumRecordsProducedV2", "records_produced: int64"),
    ("ReaderNumWorkUnitsCompletedV2", "units_completed: int64"),
    ("ReaderSerializeStateV2", "state: string"),
):
    register_op(
        OpDef(
            _op,
            inputs=["reader_handle: resource"],
            outputs=[_out],
            shape_fn=scalar,
            is_stateful=True,
        )
    )
register_op(
    OpDef(
        "ReaderRestoreStateV2",
        inputs=["reader_handle: resource", "state: string"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "ReaderResetV2", inputs=["reader_handle: resource"], shape_fn=no_outputs, is_stateful=True
    )
)
register_op(
    OpDef("ReadFile", inputs=["filename: string"], outputs=["contents: string"], shape_fn=scalar)
)
register_op(
    OpDef(
        "WriteFile",
        inputs=["filename: string", "contents: string"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)

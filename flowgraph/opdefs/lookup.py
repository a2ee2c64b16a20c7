"""OpDefs of the lookup tables (TensorFlow's lookup_ops.cc): a table is a stateful resource in
its device's container (whitepaper §4.7), made by HashTableV2 / MutableHashTableV2, filled by an
initializer op, and read by LookupTableFindV2."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape
from flowgraph.opdefs.shape_fns import no_outputs, scalar

_TABLE = [
    "container: string = ''",
    "shared_name: string = ''",
    "use_node_name_sharing: bool = false",
    "key_dtype: type",
    "value_dtype: type",
]
for _op in ("HashTableV2", "MutableHashTableV2"):
    register_op(
        OpDef(
            _op, outputs=["table_handle: resource"], attrs=_TABLE, shape_fn=scalar, is_stateful=True
        )
    )

# Fill a table: InitializeTableV2 (TF1's KeyValueTensorInitializer) and LookupTableImportV2
# (TF2's, and MutableHashTable restores) take keys and values; the text-file one a file name.
register_op(
    OpDef(
        "InitializeTableV2",
        inputs=["table_handle: resource", "keys: Tkey", "values: Tval"],
        attrs=["Tkey: type", "Tval: type"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)
for _op in ("LookupTableImportV2", "LookupTableInsertV2"):
    register_op(
        OpDef(
            _op,
            inputs=["table_handle: resource", "keys: Tin", "values: Tout"],
            attrs=["Tin: type", "Tout: type"],
            shape_fn=no_outputs,
            is_stateful=True,
        )
    )
register_op(
    OpDef(
        "LookupTableRemoveV2",
        inputs=["table_handle: resource", "keys: Tin"],
        attrs=["Tin: type"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "InitializeTableFromTextFileV2",
        inputs=["table_handle: resource", "filename: string"],
        attrs=[
            "key_index: int >= -2",
            "value_index: int >= -2",
            "vocab_size: int >= -1 = -1",
            "delimiter: string = '\\t'",
        ],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "LookupTableFindV2",
        inputs=["table_handle: resource", "keys: Tin", "default_value: Tout"],
        outputs=["values: Tout"],
        attrs=["Tin: type", "Tout: type"],
        shape_fn=lambda ctx: ctx.input_shapes[1],
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "LookupTableSizeV2",
        inputs=["table_handle: resource"],
        outputs=["size: int64"],
        shape_fn=scalar,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "LookupTableExportV2",
        inputs=["table_handle: resource"],
        outputs=["keys: Tkeys", "values: Tvalues"],
        attrs=["Tkeys: type", "Tvalues: type"],
        shape_fn=lambda ctx: [TensorShape([None]), TensorShape([None])],
        is_stateful=True,
    )
)

"""OpDefs of the parsing ops an input pipeline decodes records with (whitepaper §4.5): tf.Example
parsing (ParseExample, ParseSingleExample, ParseSequenceExample), DecodeCSV, DecodeRaw and
DecodeCompressed. Feature dtypes are float, int64 or string; the kernels check it (the attr
notation has no list-of-type-set)."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.opdefs.shape_fns import unchanged, unknown

_PARSE_EXAMPLE_INPUTS = [
    "names: string",
    "sparse_keys: Nsparse * string",
    "dense_keys: Ndense * string",
    "dense_defaults: Tdense",
]
_PARSE_EXAMPLE_OUTPUTS = [
    "sparse_indices: Nsparse * int64",
    "sparse_values: sparse_types",
    "sparse_shapes: Nsparse * int64",
    "dense_values: Tdense",
]
_PARSE_EXAMPLE_ATTRS = [
    "Nsparse: int >= 0",
    "Ndense: int >= 0",
    "sparse_types: list(type) >= 0",
    "Tdense: list(type) >= 0",
    "dense_shapes: list(shape) >= 0",
]
register_op(
    OpDef(
        "ParseExample",
        inputs=["serialized: string", *_PARSE_EXAMPLE_INPUTS],
        outputs=_PARSE_EXAMPLE_OUTPUTS,
        attrs=_PARSE_EXAMPLE_ATTRS,
        shape_fn=unknown,
    )
)
# ParseExample of the records a ReaderReadUpToV2 read, as one async kernel that parses them in
# the reader's buffer (made by runtime/passes/read_parse.py, users never do): the read's inputs,
# then ParseExample's after `serialized`; ParseExample's outputs and attrs.
register_op(
    OpDef(
        "_ReaderReadUpToParseExample",
        inputs=[
            "reader_handle: resource",
            "queue_handle: resource",
            "num_records: int64",
            *_PARSE_EXAMPLE_INPUTS,
        ],
        outputs=_PARSE_EXAMPLE_OUTPUTS,
        attrs=_PARSE_EXAMPLE_ATTRS,
        shape_fn=unknown,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "ParseSingleExample",
        inputs=["serialized: string", "dense_defaults: Tdense"],
        outputs=[
            "sparse_indices: num_sparse * int64",
            "sparse_values: sparse_types",
            "sparse_shapes: num_sparse * int64",
            "dense_values: Tdense",
        ],
        attrs=[
            "num_sparse: int >= 0",
            "sparse_keys: list(string) >= 0",
            "dense_keys: list(string) >= 0",
            "sparse_types: list(type) >= 0",
            "Tdense: list(type) >= 0",
            "dense_shapes: list(shape) >= 0",
        ],
        shape_fn=unknown,
    )
)
register_op(
    OpDef(
        "ParseSequenceExample",
        inputs=[
            "serialized: string",
            "debug_name: string",
            "context_dense_defaults: Tcontext_dense",
        ],
        outputs=[
            "context_sparse_indices: Ncontext_sparse * int64",
            "context_sparse_values: context_sparse_types",
            "context_sparse_shapes: Ncontext_sparse * int64",
            "context_dense_values: Tcontext_dense",
            "feature_list_sparse_indices: Nfeature_list_sparse * int64",
            "feature_list_sparse_values: feature_list_sparse_types",
            "feature_list_sparse_shapes: Nfeature_list_sparse * int64",
            "feature_list_dense_values: feature_list_dense_types",
            "feature_list_dense_lengths: Nfeature_list_dense * int64",
        ],
        attrs=[
            "feature_list_dense_missing_assumed_empty: list(string) >= 0",
            "context_sparse_keys: list(string) >= 0",
            "context_dense_keys: list(string) >= 0",
            "feature_list_sparse_keys: list(string) >= 0",
            "feature_list_dense_keys: list(string) >= 0",
            "Ncontext_sparse: int >= 0 = 0",
            "Ncontext_dense: int >= 0 = 0",
            "Nfeature_list_sparse: int >= 0 = 0",
            "Nfeature_list_dense: int >= 0 = 0",
            "context_sparse_types: list(type) >= 0 = []",
            "Tcontext_dense: list(type) >= 0 = []",
            "feature_list_dense_types: list(type) >= 0 = []",
            "context_dense_shapes: list(shape) >= 0 = []",
            "feature_list_sparse_types: list(type) >= 0 = []",
            "feature_list_dense_shapes: list(shape) >= 0 = []",
        ],
        shape_fn=unknown,
    )
)
register_op(
    OpDef(
        "DecodeCSV",
        inputs=["records: string", "record_defaults: OUT_TYPE"],
        outputs=["output: OUT_TYPE"],
        attrs=[
            "OUT_TYPE: list(type)",
            "field_delim: string = ','",
            "use_quote_delim: bool = true",
            "na_value: string = ''",
            "select_cols: list(int) = []",
        ],
        shape_fn=lambda ctx: [ctx.input_shapes[0]] * ctx.num_outputs,
    )
)


def _decode_raw_shape(ctx):
    return ctx.input_shapes[0].concatenate([None])


register_op(
    OpDef(
        "DecodeRaw",
        inputs=["bytes: string"],
        outputs=["output: out_type"],
        attrs=[
            (
                "out_type: {half, float, double, int32, uint16, uint8, int16, int8, int64, "
                "complex64, complex128, bool}"
            ),
            "little_endian: bool = true",
        ],
        shape_fn=_decode_raw_shape,
    )
)
register_op(
    OpDef(
        "DecodeCompressed",
        inputs=["bytes: string"],
        outputs=["output: string"],
        attrs=["compression_type: string = ''"],
        shape_fn=unchanged,
    )
)
register_op(
    OpDef(
        "ParseExampleV2",  # what TF 2's tf.compat.v1.parse_(single_)example build
        inputs=[
            "serialized: string",
            "names: string",
            "sparse_keys: string",
            "dense_keys: string",
            "ragged_keys: string",
            "dense_defaults: Tdense",
        ],
        outputs=[
            "sparse_indices: num_sparse * int64",
            "sparse_values: sparse_types",
            "sparse_shapes: num_sparse * int64",
            "dense_values: Tdense",
            "ragged_values: ragged_value_types",
            "ragged_row_splits: ragged_split_types",
        ],
        attrs=[
            "Tdense: list(type) >= 0",
            "num_sparse: int >= 0",
            "sparse_types: list(type) >= 0",
            "ragged_value_types: list(type) >= 0",
            "ragged_split_types: list(type) >= 0",
            "dense_shapes: list(shape) >= 0",
        ],
        shape_fn=unknown,
    )
)

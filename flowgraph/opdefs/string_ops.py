"""OpDefs of the string ops a TF1 Saver's graph uses (TensorFlow's string_ops.cc): StringJoin
builds a sharded save's temporary prefix, StaticRegexFullMatch picks it by file system
("^s3://.*"). A SavedModel written by TensorFlow needs them to import."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape
from flowgraph.opdefs.shape_fns import unchanged


def _join_shape(ctx):
    """Scalars broadcast; every other input must have one shape."""
    out = TensorShape([])
    for s in ctx.input_shapes:
        if s.ndims != 0:
            out = s if out.ndims == 0 else out.merge_with(s)
    return out


register_op(
    OpDef(
        "StringJoin",
        inputs=["inputs: N * string"],
        outputs=["output: string"],
        attrs=["N: int >= 0", "separator: string = ''"],
        shape_fn=_join_shape,
    )
)
register_op(
    OpDef(
        "StaticRegexFullMatch",
        inputs=["input: string"],
        outputs=["output: bool"],
        attrs=["pattern: string"],
        shape_fn=unchanged,
    )
)
register_op(
    OpDef(
        "RegexFullMatch",
        inputs=["input: string", "pattern: string"],
        outputs=["output: bool"],
        shape_fn=unchanged,
    )
)


# -- The string ops TF1 programs use (TensorFlow's string_ops.cc, parsing_ops.cc) ----------------
def _split_shape(ctx):
    ctx.input_shapes[0].with_rank(1)
    ctx.input_shapes[1].with_rank(0)
    return [TensorShape([None, 2]), TensorShape([None]), TensorShape([2])]


register_op(
    OpDef(
        "StringSplit",
        inputs=["input: string", "delimiter: string"],
        outputs=["indices: int64", "values: string", "shape: int64"],
        attrs=["skip_empty: bool = true"],
        shape_fn=_split_shape,
    )
)
register_op(
    OpDef(
        "StringSplitV2",
        inputs=["input: string", "sep: string"],
        outputs=["indices: int64", "values: string", "shape: int64"],
        attrs=["maxsplit: int = -1"],
        shape_fn=_split_shape,
    )
)


def _broadcast3(ctx):
    out = TensorShape([])
    for s in ctx.input_shapes:
        if s.ndims is None:
            return TensorShape(None)
        if s.ndims:
            out = s if out.ndims == 0 else out.merge_with(s)
    return out


register_op(
    OpDef(
        "Substr",
        inputs=["input: string", "pos: T", "len: T"],
        outputs=["output: string"],
        attrs=["T: {int32, int64}", "unit: {'BYTE', 'UTF8_CHAR'} = 'BYTE'"],
        shape_fn=_broadcast3,
    )
)
register_op(
    OpDef(
        "AsString",
        inputs=["input: T"],
        outputs=["output: string"],
        attrs=[
            "T: {int8, int16, int32, int64, complex64, complex128, float, double, bool}",
            "precision: int = -1",
            "scientific: bool = false",
            "shortest: bool = false",
            "width: int = -1",
            "fill: string = ''",
        ],
        shape_fn=unchanged,
    )
)
register_op(
    OpDef(
        "StringToNumber",
        inputs=["string_tensor: string"],
        outputs=["output: out_type"],
        attrs=["out_type: {float, double, int32, int64} = DT_FLOAT"],
        shape_fn=unchanged,
    )
)
register_op(
    OpDef(
        "StringToHashBucketFast",
        inputs=["input: string"],
        outputs=["output: int64"],
        attrs=["num_buckets: int >= 1"],
        shape_fn=unchanged,
    )
)
register_op(
    OpDef(
        "RegexReplace",
        inputs=["input: string", "pattern: string", "rewrite: string"],
        outputs=["output: string"],
        attrs=["replace_global: bool = true"],
        shape_fn=unchanged,
    )
)
register_op(
    OpDef(
        "StaticRegexReplace",
        inputs=["input: string"],
        outputs=["output: string"],
        attrs=["pattern: string", "rewrite: string", "replace_global: bool = true"],
        shape_fn=unchanged,
    )
)


def _reduce_join_shape(ctx):
    shape = ctx.input_shapes[0]
    axes = ctx.input_constant(1)
    if shape.ndims is None or axes is None:
        return TensorShape(None)
    axes = {int(a) % shape.ndims for a in axes.reshape(-1)} if shape.ndims else set()
    if ctx.attrs["keep_dims"]:
        return TensorShape([1 if i in axes else d for i, d in enumerate(shape.as_list())])
    return TensorShape([d for i, d in enumerate(shape.as_list()) if i not in axes])


register_op(
    OpDef(
        "ReduceJoin",
        inputs=["inputs: string", "reduction_indices: int32"],
        outputs=["output: string"],
        attrs=["keep_dims: bool = false", "separator: string = ''"],
        shape_fn=_reduce_join_shape,
    )
)
register_op(
    OpDef(
        "StringLength",
        inputs=["input: string"],
        outputs=["output: int32"],
        attrs=["unit: {'BYTE', 'UTF8_CHAR'} = 'BYTE'"],
        shape_fn=unchanged,
    )
)
for _op in ("StringLower", "StringUpper"):
    register_op(
        OpDef(
            _op,
            inputs=["input: string"],
            outputs=["output: string"],
            attrs=["encoding: string = ''"],
            shape_fn=unchanged,
        )
    )
register_op(
    OpDef("StringStrip", inputs=["input: string"], outputs=["output: string"], shape_fn=unchanged)
)
register_op(
    OpDef(
        "EncodeBase64",
        inputs=["input: string"],
        outputs=["output: string"],
        attrs=["pad: bool = false"],
        shape_fn=unchanged,
    )
)
register_op(
    OpDef("DecodeBase64", inputs=["input: string"], outputs=["output: string"], shape_fn=unchanged)
)


def _fingerprint_shape(ctx):
    return TensorShape([ctx.input_shapes[0].with_rank_at_least(1)[0].value, 8])


register_op(
    OpDef(
        "Fingerprint",
        inputs=["data: T", "method: string"],
        outputs=["fingerprint: uint8"],
        attrs=["T: type"],
        shape_fn=_fingerprint_shape,
    )
)

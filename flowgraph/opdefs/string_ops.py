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

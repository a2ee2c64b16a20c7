"""OpDefs of checkpoint I/O (whitepaper §3.3: "Save" and "Restore" nodes write variables to and
read them from persistent storage), TensorFlow's io_ops.cc.

SaveV2/RestoreV2/MergeV2Checkpoints use the V2 tensor bundle (core/tensor_bundle.py); the
TF1-era Save/SaveSlices/Restore/RestoreSlice use the V1 table format (core/checkpoint_v1.py). The
ops
that touch files are stateful, so no pass may fold or merge them.
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
from flowgraph.opdefs.shape_fns import no_outputs, scalar


def _restore_v2_shapes(ctx):
    specs = ctx.input_constant(2)
    if specs is None:
        return [unknown_shape()] * ctx.num_outputs
    out = []
    for spec in specs.reshape(-1):
        spec = spec.decode() if isinstance(spec, bytes) else str(spec)
        out.append(_slice_shape(spec))
    return out


def _slice_shape(spec: str):
    """The shape of what one `shape_and_slice` entry restores ("" is unknown: whole tensor)."""
    if not spec:
        return unknown_shape()
    parts = spec.split(" ")
    full = [int(x) for x in parts[:-1]]
    dims = []
    for n, ext in zip(full, parts[-1].split(":")):
        dims.append(n if ext == "-" else int(ext.split(",")[1]))
    return TensorShape(dims)


def _restore_slice_shape(ctx):
    spec = ctx.input_constant(2)
    if spec is None:
        return unknown_shape()
    spec = spec.reshape(-1)[0]
    return _slice_shape(spec.decode() if isinstance(spec, bytes) else str(spec))


register_op(
    OpDef(
        "SaveV2",
        inputs=[
            "prefix: string",
            "tensor_names: string",
            "shape_and_slices: string",
            "tensors: dtypes",
        ],
        attrs=["dtypes: list(type)"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "RestoreV2",
        inputs=["prefix: string", "tensor_names: string", "shape_and_slices: string"],
        outputs=["tensors: dtypes"],
        attrs=["dtypes: list(type)"],
        shape_fn=_restore_v2_shapes,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "MergeV2Checkpoints",
        inputs=["checkpoint_prefixes: string", "destination_prefix: string"],
        attrs=["delete_old_dirs: bool = true", "allow_missing_files: bool = false"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "ShardedFilename",
        inputs=["basename: string", "shard: int32", "num_shards: int32"],
        outputs=["filename: string"],
        shape_fn=scalar,
    )
)
register_op(
    OpDef(
        "ShardedFilespec",
        inputs=["basename: string", "num_shards: int32"],
        outputs=["filename: string"],
        shape_fn=scalar,
    )
)


# The V1 format's ops (TF1 graphs and Saver(write_version=V1) use them).
register_op(
    OpDef(
        "Save",
        inputs=["filename: string", "tensor_names: string", "data: T"],
        attrs=["T: list(type)"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "SaveSlices",
        inputs=["filename: string", "tensor_names: string", "shapes_and_slices: string", "data: T"],
        attrs=["T: list(type)"],
        shape_fn=no_outputs,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "Restore",
        inputs=["file_pattern: string", "tensor_name: string"],
        outputs=["tensor: dt"],
        attrs=["dt: type", "preferred_shard: int = -1"],
        shape_fn=lambda ctx: unknown_shape(),
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "RestoreSlice",
        inputs=["file_pattern: string", "tensor_name: string", "shape_and_slice: string"],
        outputs=["tensor: dt"],
        attrs=["dt: type", "preferred_shard: int = -1"],
        shape_fn=_restore_slice_shape,
        is_stateful=True,
    )
)

"""Python wrappers of the checkpoint ops (TF1's gen_io_ops): the Saver builds its graph from
these, so saving and restoring are ordinary nodes of the GraphDef (whitepaper §3.3)."""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework.apply_op import apply_op

__all__ = [
    "merge_v2_checkpoints",
    "restore",
    "restore_slice",
    "restore_v2",
    "save",
    "save_slices",
    "save_v2",
    "sharded_filename",
    "sharded_filespec",
]


def save_v2(prefix, tensor_names, shape_and_slices, tensors, name=None):
    """Writes `tensors` under `tensor_names` to the bundle `prefix` (the SaveV2 op)."""
    return apply_op("SaveV2", [prefix, tensor_names, shape_and_slices, list(tensors)], name=name)


def restore_v2(prefix, tensor_names, shape_and_slices, dtypes_, name=None):
    """Reads the named tensors (or slices of them) from the bundle `prefix`."""
    kinds = [dtypes.as_dtype(d).base_dtype for d in dtypes_]
    op = apply_op("RestoreV2", [prefix, tensor_names, shape_and_slices], name=name, dtypes=kinds)
    return list(op.outputs)


def merge_v2_checkpoints(
    checkpoint_prefixes,
    destination_prefix,
    delete_old_dirs=True,
    allow_missing_files=False,
    name=None,
):
    """Merges per-shard bundles into `destination_prefix` (sharded saves)."""
    return apply_op(
        "MergeV2Checkpoints",
        [checkpoint_prefixes, destination_prefix],
        name=name,
        delete_old_dirs=delete_old_dirs,
        allow_missing_files=allow_missing_files,
    )


def sharded_filename(basename, shard, num_shards, name=None):
    """ "basename-00003-of-00008": the name of one shard."""
    return apply_op("ShardedFilename", [basename, shard, num_shards], name=name).outputs[0]


def sharded_filespec(basename, num_shards, name=None):
    """ "basename-?????-of-00008": a glob of every shard."""
    return apply_op("ShardedFilespec", [basename, num_shards], name=name).outputs[0]


def save(filename, tensor_names, data, name=None):
    """Writes whole tensors to the V1 checkpoint file `filename` (the Save op)."""
    return apply_op("Save", [filename, tensor_names, list(data)], name=name)


def save_slices(filename, tensor_names, shapes_and_slices, data, name=None):
    """Writes tensors or slices of them to a V1 checkpoint file (the SaveSlices op)."""
    return apply_op(
        "SaveSlices", [filename, tensor_names, shapes_and_slices, list(data)], name=name
    )


def restore(file_pattern, tensor_name, dt, preferred_shard=-1, name=None):
    """Reads one tensor from the V1 checkpoint matching `file_pattern` (the Restore op)."""
    return apply_op(
        "Restore",
        [file_pattern, tensor_name],
        name=name,
        dt=dtypes.as_dtype(dt).base_dtype,
        preferred_shard=preferred_shard,
    ).outputs[0]


def restore_slice(file_pattern, tensor_name, shape_and_slice, dt, preferred_shard=-1, name=None):
    """Reads a slice of one tensor from a V1 checkpoint (the RestoreSlice op)."""
    return apply_op(
        "RestoreSlice",
        [file_pattern, tensor_name, shape_and_slice],
        name=name,
        dt=dtypes.as_dtype(dt).base_dtype,
        preferred_shard=preferred_shard,
    ).outputs[0]

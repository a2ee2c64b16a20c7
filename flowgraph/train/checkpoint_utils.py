"""Reading checkpoints from Python (TF1's checkpoint_utils.py and py_checkpoint_reader): a
CheckpointReader over the bundle, list_variables, load_variable, and init_from_checkpoint,
which turns variables' initializers into restores from a checkpoint (warm starts)."""

from __future__ import annotations

import os

import numpy as np

from flowgraph.core import dtypes
from flowgraph.core.checkpoint_v1 import open_checkpoint
from flowgraph.framework import default_graph
from flowgraph.ops import io_ops, variable_scope, variables
from flowgraph.train import checkpoint_management as cm
from flowgraph.train import saveable as saveable_lib

__all__ = [
    "CheckpointReader",
    "NewCheckpointReader",
    "init_from_checkpoint",
    "list_variables",
    "load_checkpoint",
    "load_variable",
]


class CheckpointReader:
    """The tensors of one checkpoint, by name (TF's CheckpointReader)."""

    def __init__(self, filepattern):
        self._prefix = os.fspath(filepattern)
        self._reader = open_checkpoint(self._prefix)

    def get_tensor(self, tensor_str) -> np.ndarray:
        """The value of tensor `tensor_str` (a writable copy); NotFoundError if absent."""
        value = self._reader.lookup(_name(tensor_str))
        return value.copy() if value.dtype != object else value

    def has_tensor(self, tensor_str) -> bool:
        return self._reader.contains(_name(tensor_str))

    def get_variable_to_shape_map(self) -> dict:
        return {k: list(self._reader.shape(k)) for k in self._reader.keys()}  # noqa: SIM118 (a method)

    def get_variable_to_dtype_map(self) -> dict:
        return {k: dtypes.as_dtype(self._reader.dtype(k)) for k in self._reader.keys()}  # noqa: SIM118 (a method)

    def debug_string(self) -> bytes:
        lines = []
        for k in self._reader.keys():  # noqa: SIM118 (a method)
            dt = dtypes.as_dtype(self._reader.dtype(k)).name
            lines.append(f"{k} ({dt}) {list(self._reader.shape(k))}")
        return ("\n".join(lines) + "\n").encode()

    def close(self):
        self._reader.close()


def _name(tensor_str) -> str:
    return tensor_str.decode() if isinstance(tensor_str, bytes) else str(tensor_str)


def NewCheckpointReader(filepattern) -> CheckpointReader:
    """A CheckpointReader of the checkpoint with this prefix.

    Example: tf.train.NewCheckpointReader(path).get_tensor("dense/kernel")"""
    return CheckpointReader(filepattern)


def _checkpoint_filename(ckpt_dir_or_file) -> str:
    ckpt_dir_or_file = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(ckpt_dir_or_file):
        path = cm.latest_checkpoint(ckpt_dir_or_file)
        if path is None:
            raise ValueError(
                f"Couldn't find 'checkpoint' file or checkpoints in given directory "
                f"{ckpt_dir_or_file}"
            )
        return path
    return ckpt_dir_or_file


def load_checkpoint(ckpt_dir_or_file) -> CheckpointReader:
    """A CheckpointReader of a checkpoint prefix, or of the latest one in a directory."""
    return CheckpointReader(_checkpoint_filename(ckpt_dir_or_file))


def load_variable(ckpt_dir_or_file, name) -> np.ndarray:
    """The value of variable `name` ("w" or "w:0") in a checkpoint."""
    name = name.removesuffix(":0")
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)


def list_variables(ckpt_dir_or_file) -> list[tuple[str, list[int]]]:
    """[(name, shape)] of every tensor in a checkpoint, sorted by name."""
    shapes = load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map()
    return [(k, shapes[k]) for k in sorted(shapes)]


def _is_variable(x) -> bool:
    return isinstance(x, variables.Variable)


def _partitioned(name: str, store: dict):
    """The partitions "name/part_0", "name/part_1", ... of a partitioned variable, or None."""
    parts = [v for k, v in store.items() if k.startswith(name + "/part_")]
    return parts or None


def init_from_checkpoint(ckpt_dir_or_file, assignment_map):
    """Replaces the initializers of the mapped variables by restores from a checkpoint.

    assignment_map: {checkpoint name or "scope/": variable, its name, its partitions, or
    "scope/"}; "/" on either side means the root.

    Example: tf.train.init_from_checkpoint(ckpt, {"old_scope/": "new_scope/"})"""
    ckpt_file = _checkpoint_filename(ckpt_dir_or_file)
    reader = load_checkpoint(ckpt_dir_or_file)
    shapes = reader.get_variable_to_shape_map()
    store = variable_scope._get_store(default_graph.get()).vars
    for in_ckpt, current in sorted(assignment_map.items(), key=lambda kv: kv[0]):
        var = None
        if _is_variable(current) or (
            isinstance(current, list) and all(_is_variable(v) for v in current)
        ):
            var = current
        elif _is_partitioned(current):
            var = list(current)
        else:
            var = store.get(current) or _partitioned(current, store)
        if var is not None:
            if in_ckpt not in shapes:
                raise ValueError(
                    f"Tensor {in_ckpt} is not found in {ckpt_dir_or_file} checkpoint {shapes}"
                )
            if _is_variable(var) and not var.get_shape().is_compatible_with(shapes[in_ckpt]):
                raise ValueError(
                    f"Shape of variable {var.name} ({var.get_shape()}) doesn't match with shape "
                    f"of tensor {in_ckpt} ({shapes[in_ckpt]}) from checkpoint reader."
                )
            _set_initializer(var, ckpt_file, in_ckpt)
            continue
        _init_scope(ckpt_file, ckpt_dir_or_file, in_ckpt, current, shapes, store)


def _is_partitioned(x) -> bool:
    return type(x).__name__ == "PartitionedVariable"


def _init_scope(ckpt_file, ckpt_name, in_ckpt, current, shapes, store):
    scopes = current[: current.rindex("/")] if "/" in current else ""
    if not in_ckpt.endswith("/"):
        raise ValueError(
            f"Assignment map with scope only name {scopes} should map to scope only {in_ckpt}. "
            "Should be 'scope/': 'other_scope/'."
        )
    names = set()
    for name in store:
        if not scopes or name.startswith(scopes + "/"):
            names.add(name[: name.index("/part_")] if "/part_" in name else name)
    for name in sorted(names):
        full = name[len(scopes) :]
        if current != "/":
            full = full[1:]
        if in_ckpt != "/":
            full = in_ckpt + full
        full = full.rstrip("/")
        if full not in shapes:
            raise ValueError(
                f"Tensor {full} ({name[len(scopes) + 1 :]} in {in_ckpt}) is not found in "
                f"{ckpt_name} checkpoint"
            )
        _set_initializer(store.get(name) or _partitioned(name, store), ckpt_file, full)


def _set_initializer(var, ckpt_file: str, tensor_name: str):
    if isinstance(var, (list, tuple)):
        for v in var:
            spec = saveable_lib._slice_spec(v) if v._save_slice_info is not None else ""
            _set_checkpoint_initializer(v, ckpt_file, tensor_name, spec)
    else:
        _set_checkpoint_initializer(var, ckpt_file, tensor_name, "")


def _set_checkpoint_initializer(var, ckpt_file, tensor_name, slice_spec):
    """var's initializer becomes Assign(var, RestoreV2(ckpt, tensor_name, slice_spec))."""
    graph = var.graph
    with graph.device(var.device), graph.device("/device:CPU:0"):
        restored = io_ops.restore_v2(
            ckpt_file,
            [tensor_name],
            [slice_spec],
            [var.dtype.base_dtype],
            name="checkpoint_initializer",
        )[0]
    saveable = saveable_lib.saveable_objects_for_op(var, tensor_name)[0]
    init = saveable.restore([restored], None)
    var._initializer_op = init if not hasattr(init, "op") else init.op
    restored.set_shape(var.shape)
    var._initial_value = restored

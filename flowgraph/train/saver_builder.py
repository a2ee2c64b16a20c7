"""The graph half of a Saver: the ops that save and restore a list of SaveableObjects.

TF1's BaseSaverBuilder builds, under the Saver's name scope, the filename tensor, one SaveV2 (or
one per device with `sharded=True`, merged by MergeV2Checkpoints) and the RestoreV2 + Assign ops,
and returns the SaverDef that names them. BulkSaverBuilder restores every tensor with one op.
"""

from __future__ import annotations

import uuid

from flowgraph.core.device_spec import DeviceSpec
from flowgraph.core.protos import SaverDef
from flowgraph.framework import default_graph
from flowgraph.framework.convert import constant
from flowgraph.ops import array, io_ops
from flowgraph.ops import math as math_ops
from flowgraph.train import saveable as saveable_lib

__all__ = ["BaseSaverBuilder", "BulkSaverBuilder"]


class BaseSaverBuilder:
    """Builds the save and restore subgraphs; one RestoreV2 per saveable."""

    SaveSpec = saveable_lib.SaveSpec
    SaveableObject = saveable_lib.SaveableObject

    def __init__(self, write_version=SaverDef.V2):
        self._write_version = write_version

    def save_op(self, filename_tensor, saveables):
        names, tensors, slices = [], [], []
        for s in saveables:
            for spec in s.specs:
                names.append(spec.name)
                tensors.append(spec.tensor)
                slices.append(spec.slice_spec)
        if self._write_version == SaverDef.V2:
            return io_ops.save_v2(filename_tensor, names, slices, tensors)
        if self._write_version != SaverDef.V1:
            raise ValueError(f"Unexpected write_version: {self._write_version}")
        if any(slices):
            return io_ops.save_slices(filename_tensor, names, slices, tensors)
        return io_ops.save(filename_tensor, names, tensors)

    def bulk_restore(self, filename_tensor, saveables, preferred_shard, restore_sequentially):
        """One RestoreV2 per saveable; with restore_sequentially each waits for the previous."""
        all_tensors, last = [], None
        for s in saveables:
            deps = [last] if restore_sequentially and last is not None else []
            with default_graph.get().control_dependencies(deps):
                tensors = self.restore_op(filename_tensor, s, preferred_shard)
            last = tensors[0].op
            all_tensors.extend(tensors)
        return all_tensors

    def restore_op(self, filename_tensor, saveable, preferred_shard):
        names = [spec.name for spec in saveable.specs]
        slices = [spec.slice_spec for spec in saveable.specs]
        kinds = [spec.dtype for spec in saveable.specs]
        with default_graph.get().device(saveable.device or None):
            return io_ops.restore_v2(filename_tensor, names, slices, kinds)

    def _add_save_ops(self, filename_tensor, saveables):
        save = self.save_op(filename_tensor, saveables)
        return _with_dependencies([save], filename_tensor)

    def _add_restore_ops(
        self,
        filename_tensor,
        saveables,
        restore_sequentially,
        reshape,
        preferred_shard=-1,
        name="restore_all",
    ):
        tensors = self.bulk_restore(
            filename_tensor, saveables, preferred_shard, restore_sequentially
        )
        assigns, idx = [], 0
        for s in saveables:
            shapes = None
            if reshape:
                shapes = []
                for spec in s.specs:
                    shape = spec.tensor.get_shape()
                    shapes.append(shape if shape.is_fully_defined() else array.shape(spec.tensor))
            assigns.append(s.restore(tensors[idx : idx + len(s.specs)], shapes))
            idx += len(s.specs)
        return array.group(*assigns, name=name)

    def _add_sharded_save_ops(self, checkpoint_prefix, per_device):
        """One bundle per device under a temporary directory, then MergeV2Checkpoints (V1:
        one file per device, and the save path is their file pattern)."""
        graph = default_graph.get()
        if self._write_version == SaverDef.V1:
            return self._add_sharded_save_ops_v1(checkpoint_prefix, per_device)
        tmp_prefix = math_ops.add(checkpoint_prefix, f"_temp_{uuid.uuid4().hex}/part")
        num_shards = constant(len(per_device), name="num_shards")
        prefixes, saves = [], []
        for shard, (device, saveables) in enumerate(per_device):
            with graph.device(device):
                name = io_ops.sharded_filename(tmp_prefix, shard, num_shards)
                prefixes.append(name)
                saves.append(self._add_save_ops(name, saveables))
        with (
            graph.control_dependencies([s.op for s in saves]),
            graph.device(_cpu_of(per_device[-1][0])),
        ):
            merge = io_ops.merge_v2_checkpoints(
                array.stack(prefixes), checkpoint_prefix, delete_old_dirs=True
            )
            with graph.control_dependencies([merge]):
                return array.identity(checkpoint_prefix)

    def _add_sharded_save_ops_v1(self, filename_tensor, per_device):
        graph = default_graph.get()
        num_shards = constant(len(per_device), name="num_shards")
        saves = []
        for shard, (device, saveables) in enumerate(per_device):
            with graph.device(device):
                name = io_ops.sharded_filename(filename_tensor, shard, num_shards)
                saves.append(self._add_save_ops(name, saveables))
        with graph.control_dependencies([s.op for s in saves]):
            return io_ops.sharded_filespec(filename_tensor, num_shards)

    def _add_sharded_restore_ops(self, filename_tensor, per_device, restore_sequentially, reshape):
        graph = default_graph.get()
        shards = []
        for shard, (device, saveables) in enumerate(per_device):
            with graph.device(device):
                shards.append(
                    self._add_restore_ops(
                        filename_tensor,
                        saveables,
                        restore_sequentially,
                        reshape,
                        preferred_shard=shard,
                        name="restore_shard",
                    )
                )
        return array.group(*shards, name="restore_all")

    @staticmethod
    def _group_by_devices(saveables):
        per_device: dict[str, list] = {}
        for s in saveables:
            devices = {_canonical(spec.device) for spec in s.specs}
            if len(devices) != 1:
                raise ValueError(
                    f"All tensors of a saveable object must be on the same device: {s.name}"
                )
            per_device.setdefault(devices.pop(), []).append(s)
        return sorted(per_device.items(), key=lambda t: t[0])

    def _build_internal(
        self,
        names_to_saveables,
        reshape=False,
        sharded=False,
        max_to_keep=5,
        keep_checkpoint_every_n_hours=10000.0,
        name=None,
        restore_sequentially=False,
        filename="model",
        build_save=True,
        build_restore=True,
    ) -> SaverDef:
        if not build_save or not build_restore:
            raise ValueError(
                "save and restore operations need to be built together when eager execution is "
                "not enabled."
            )
        saveables = saveable_lib.validate_and_slice_inputs(names_to_saveables)
        graph = default_graph.get()
        with graph.name_scope(name or "save") as scope:
            del scope
            fname = constant(filename or "model", name="filename/input")
            fname = array.placeholder_with_default(fname, shape=(), name="filename")
            fname = array.placeholder_with_default(fname, shape=(), name="Const")
            if sharded:
                per_device = self._group_by_devices(saveables)
                save_tensor = self._add_sharded_save_ops(fname, per_device)
                restore_op = self._add_sharded_restore_ops(
                    fname, per_device, restore_sequentially, reshape
                )
            else:
                save_tensor = self._add_save_ops(fname, saveables)
                restore_op = self._add_restore_ops(fname, saveables, restore_sequentially, reshape)
        return SaverDef(
            filename_tensor_name=fname.name,
            save_tensor_name=save_tensor.name,
            restore_op_name=restore_op.name,
            max_to_keep=max_to_keep or 0,
            sharded=sharded,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
            version=self._write_version,
        )


class BulkSaverBuilder(BaseSaverBuilder):
    """The default builder: one RestoreV2 for every tensor (on the CPU)."""

    def bulk_restore(self, filename_tensor, saveables, preferred_shard, restore_sequentially):
        del restore_sequentially
        specs = [spec for s in saveables for spec in s.specs]
        graph = default_graph.get()
        with graph.device("/device:CPU:0"):
            return io_ops.restore_v2(
                filename_tensor,
                [s.name for s in specs],
                [s.slice_spec for s in specs],
                [s.dtype for s in specs],
            )


def _with_dependencies(deps, tensor):
    """`tensor` through an Identity that runs after `deps` (TF1's with_dependencies)."""
    graph = tensor.graph
    with graph.colocate_with(tensor.op), graph.control_dependencies(deps):
        return array.identity(tensor, name="control_dependency")


def _canonical(device) -> str:
    return DeviceSpec.from_string(device or "").to_string()


def _cpu_of(device: str) -> str:
    spec = DeviceSpec.from_string(device or "")
    return DeviceSpec(
        job=spec.job, replica=spec.replica, task=spec.task, device_type="CPU", device_index=0
    ).to_string()

"""tf.train.Saver: checkpoints as graph ops (whitepaper §3.3 fault tolerance; TF1's saver.py).

The Saver adds to the graph, under the name scope `save`:

    save/filename (PlaceholderWithDefault of "model") -> save/Const   the prefix to feed
    save/SaveV2 -> save/control_dependency                            run to save
    save/RestoreV2 -> save/Assign, ... -> save/restore_all            run to restore

and describes them in a SaverDef, so a MetaGraph carries the Saver. `sharded=True` saves one
bundle per device (`ShardedFilename` + `SaveV2` on each device) and merges them with
`MergeV2Checkpoints`. A save is safe against a crash at any point: the bundle is committed by
its index's rename, then the `.meta` file, and the `checkpoint` state file last.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np

from flowgraph.core import errors
from flowgraph.core.checkpoint_v1 import open_checkpoint
from flowgraph.core.protos import SaverDef
from flowgraph.core.tensor_bundle import numpy_dtype
from flowgraph.core.tensor_slice import parse_shape_and_slice
from flowgraph.framework.convert import constant_value
from flowgraph.train import checkpoint_management as cm
from flowgraph.train import saveable as saveable_lib
from flowgraph.train.saver_builder import BaseSaverBuilder, BulkSaverBuilder
from flowgraph.train.training_util import global_step as _global_step_value

__all__ = ["BaseSaverBuilder", "BulkSaverBuilder", "Saver"]

log = logging.getLogger(__name__)


class Saver:
    """Saves and restores variables (TF1's tf.train.Saver).

    Example:
        saver = tf.train.Saver(max_to_keep=3)
        path = saver.save(sess, "/tmp/run/model.ckpt", global_step=step)
        saver.restore(sess, tf.train.latest_checkpoint("/tmp/run"))
    """

    def __init__(
        self,
        var_list=None,
        reshape=False,
        sharded=False,
        max_to_keep=5,
        keep_checkpoint_every_n_hours=10000.0,
        name=None,
        restore_sequentially=False,
        saver_def=None,
        builder=None,
        defer_build=False,
        allow_empty=False,
        write_version=SaverDef.V2,
        pad_step_number=False,
        save_relative_paths=False,
        filename=None,
    ):
        if defer_build and var_list:
            raise ValueError(
                "If `var_list` is provided then build cannot be deferred. Either set "
                "defer_build=False or var_list=None."
            )
        if write_version not in (SaverDef.V1, SaverDef.V2):
            raise ValueError(f"write_version must be SaverDef.V1 or V2, got {write_version}")
        self._var_list = var_list
        self._reshape = reshape
        self._sharded = sharded
        self._max_to_keep = max_to_keep
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._name = name
        self._restore_sequentially = restore_sequentially
        self.saver_def = saver_def
        self._builder = builder
        self._is_built = False
        self._allow_empty = allow_empty
        self._is_empty = None
        self._write_version = write_version
        self._pad_step_number = pad_step_number
        self._filename = filename
        self._save_relative_paths = save_relative_paths
        self._last_checkpoints: list[tuple[str, float]] = []
        self._checkpoints_to_be_deleted: list[tuple[str, float]] = []
        self._next_checkpoint_time = time.time() + keep_checkpoint_every_n_hours * 3600
        if not defer_build:
            self.build()
        if self.saver_def is not None:
            self._check_saver_def()
            self._write_version = self.saver_def.version

    def build(self):
        """Adds the save and restore ops (done by the constructor unless defer_build=True)."""
        self._build(self._filename, build_save=True, build_restore=True)

    def _build(self, checkpoint_path, build_save, build_restore):
        if self._is_built:
            return
        self._is_built = True
        if self.saver_def is None:
            if self._builder is None:
                self._builder = BulkSaverBuilder(self._write_version)
            if self._var_list is None:
                self._var_list = saveable_lib.all_saveable_objects()
            if not self._var_list:
                if self._allow_empty:
                    self._is_empty = True
                    return
                raise ValueError("No variables to save")
            self._is_empty = False
            self.saver_def = self._builder._build_internal(
                self._var_list,
                reshape=self._reshape,
                sharded=self._sharded,
                max_to_keep=self._max_to_keep,
                keep_checkpoint_every_n_hours=self._keep_checkpoint_every_n_hours,
                name=self._name,
                restore_sequentially=self._restore_sequentially,
                filename=checkpoint_path,
                build_save=build_save,
                build_restore=build_restore,
            )
        elif self._name and self._name.rstrip("/"):
            # a SaverDef imported under a scope: its names gain the scope (import_meta_graph)
            scope = self._name.rstrip("/")
            for field in ("filename_tensor_name", "save_tensor_name", "restore_op_name"):
                setattr(self.saver_def, field, f"{scope}/{getattr(self.saver_def, field)}")
        self._check_saver_def()
        self._write_version = self.saver_def.version
        self._next_checkpoint_time = (
            time.time() + self.saver_def.keep_checkpoint_every_n_hours * 3600
        )

    def _check_saver_def(self):
        if not isinstance(self.saver_def, SaverDef):
            raise TypeError(f"saver_def must be a saver_pb2.SaverDef: {self.saver_def}")
        if not self.saver_def.save_tensor_name:
            raise ValueError(f"saver_def must specify the save_tensor_name: {self.saver_def}")
        if not self.saver_def.restore_op_name:
            raise ValueError(f"saver_def must specify the restore_op_name: {self.saver_def}")

    # -- the kept checkpoints -------------------------------------------------------------------
    @property
    def last_checkpoints(self) -> list[str]:
        """Prefixes of the checkpoints this Saver keeps, oldest first."""
        return [p for p, _ in self._last_checkpoints]

    def set_last_checkpoints(self, last_checkpoints):
        if not isinstance(last_checkpoints, list):
            raise TypeError("last_checkpoints must be a list")
        self._last_checkpoints = [(s, np.inf) for s in last_checkpoints]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time):
        if not isinstance(last_checkpoints_with_time, list):
            raise TypeError("last_checkpoints_with_time must be a list")
        self._last_checkpoints = list(last_checkpoints_with_time)

    def recover_last_checkpoints(self, checkpoint_paths):
        """Takes over the checkpoints of an earlier run (their ages come from the files)."""
        existing = [p for p in checkpoint_paths if cm.checkpoint_exists(p)]
        mtimes = cm.get_checkpoint_mtimes(existing)
        self.set_last_checkpoints_with_time(list(zip(existing, mtimes)))

    def _record_last_checkpoint(self, path: str):
        if not self.saver_def.max_to_keep:
            return
        self._last_checkpoints = [p for p in self._last_checkpoints if p[0] != path]
        self._last_checkpoints.append((path, time.time()))
        if len(self._last_checkpoints) > self.saver_def.max_to_keep:
            self._checkpoints_to_be_deleted.append(self._last_checkpoints.pop(0))

    def _maybe_delete_old_checkpoints(self, meta_graph_suffix="meta"):
        while self._checkpoints_to_be_deleted:
            path, stamp = self._checkpoints_to_be_deleted.pop(0)
            if stamp > self._next_checkpoint_time:  # keep one every N hours
                self._next_checkpoint_time += self.saver_def.keep_checkpoint_every_n_hours * 3600
                continue
            try:
                cm.remove_checkpoint(path, self.saver_def.version, meta_graph_suffix)
            except OSError as e:
                log.warning("Ignoring: %s", e)

    def as_saver_def(self) -> SaverDef:
        return self.saver_def

    def to_proto(self, export_scope=None) -> SaverDef | None:
        """The SaverDef with `export_scope` stripped from its names (None if outside it)."""
        if export_scope is None:
            return self.saver_def
        names = [
            self.saver_def.filename_tensor_name,
            self.saver_def.save_tensor_name,
            self.saver_def.restore_op_name,
        ]
        if not all(n.startswith(export_scope + "/") for n in names):
            return None
        out = SaverDef()
        out.CopyFrom(self.saver_def)
        cut = len(export_scope) + 1
        out.filename_tensor_name = names[0][cut:]
        out.save_tensor_name = names[1][cut:]
        out.restore_op_name = names[2][cut:]
        return out

    @staticmethod
    def from_proto(saver_def, import_scope=None) -> Saver:
        return Saver(saver_def=saver_def, name=import_scope)

    # -- save and restore -----------------------------------------------------------------------
    def save(
        self,
        sess,
        save_path,
        global_step=None,
        latest_filename=None,
        meta_graph_suffix="meta",
        write_meta_graph=True,
        write_state=True,
        strip_default_attrs=False,
        save_debug_info=False,
    ):
        """Runs the save op; returns the checkpoint's prefix (None for an empty Saver).

        The bundle, then the MetaGraph, then the `checkpoint` state file are committed, each by
        a rename, so a crash never leaves a state file naming an incomplete checkpoint."""
        if not self._is_built:
            raise RuntimeError("`build()` should be called before save if defer_build==True")
        if save_debug_info:
            raise NotImplementedError("Saver.save(save_debug_info=True): no GraphDebugInfo")
        latest_filename = latest_filename or "checkpoint"
        if os.path.split(latest_filename)[0]:
            raise ValueError("'latest_filename' must not contain path components")
        save_path = os.fspath(save_path)
        if global_step is not None:
            if not isinstance(global_step, (int, np.integer)):
                global_step = _global_step_value(sess, global_step)
            step = f"{int(global_step):08d}" if self._pad_step_number else str(int(global_step))
            checkpoint_file = f"{save_path}-{step}"
        else:
            checkpoint_file = save_path
            if os.path.basename(save_path) == latest_filename and not self._sharded:
                raise ValueError(
                    f"'latest_filename' collides with 'save_path': '{latest_filename}' and "
                    f"'{save_path}'"
                )
        if not hasattr(sess, "run") or not hasattr(sess, "graph"):
            raise TypeError(f"'sess' must be a Session; {sess}")
        parent = os.path.dirname(save_path)
        path = None
        if not self._is_empty:
            path = sess.run(
                self.saver_def.save_tensor_name,
                {self.saver_def.filename_tensor_name: checkpoint_file},
            )
            path = path.decode() if isinstance(path, bytes) else str(path)
        if write_meta_graph:
            meta_file = cm.meta_graph_filename(checkpoint_file, meta_graph_suffix)
            with sess.graph.as_default():
                self.export_meta_graph(meta_file, strip_default_attrs=strip_default_attrs)
        if path is not None and write_state:
            self._record_last_checkpoint(path)
            cm.update_checkpoint_state(
                parent,
                path,
                all_model_checkpoint_paths=self.last_checkpoints,
                latest_filename=latest_filename,
                save_relative_paths=self._save_relative_paths,
            )
            self._maybe_delete_old_checkpoints(meta_graph_suffix)
        return path

    def export_meta_graph(
        self,
        filename=None,
        collection_list=None,
        as_text=False,
        export_scope=None,
        clear_devices=False,
        clear_extraneous_savers=False,
        strip_default_attrs=False,
        save_debug_info=False,
    ):
        """A MetaGraphDef of the default graph with this Saver's SaverDef (written if named)."""
        from flowgraph.train import meta_graph

        return meta_graph.export_meta_graph(
            filename=filename,
            saver_def=self.saver_def,
            collection_list=collection_list,
            as_text=as_text,
            export_scope=export_scope,
            clear_devices=clear_devices,
            clear_extraneous_savers=clear_extraneous_savers,
            strip_default_attrs=strip_default_attrs,
            save_debug_info=save_debug_info,
        )

    def restore(self, sess, save_path):
        """Runs the restore op. Before running anything it checks the checkpoint against the
        graph, so a missing key (NotFoundError) or a dtype/shape mismatch
        (InvalidArgumentError) leaves every variable as it was."""
        if self._is_empty:
            return
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        save_path = os.fspath(save_path)
        if not cm.checkpoint_exists(save_path):
            raise ValueError(f"The passed save_path is not a valid checkpoint: {save_path}")
        log.info("Restoring parameters from %s", save_path)
        if self._var_list is not None and self._builder is not None:
            self._check_against(save_path)
        else:  # a Saver from a SaverDef (import_meta_graph): check what its graph restores
            self._check_graph_against(sess.graph, save_path)
        sess.run(self.saver_def.restore_op_name, {self.saver_def.filename_tensor_name: save_path})

    def _check_graph_against(self, graph, save_path: str):
        with open_checkpoint(save_path) as reader:
            for name, spec, dtype, shape in _restore_targets(graph, self.saver_def.restore_op_name):
                target = saveable_lib.SaveSpec(
                    None, spec, name, dtype=dtype, device="", shape=shape
                )
                _check_spec(reader, target, save_path, reshape=False)

    def _check_against(self, save_path: str):
        saveables = saveable_lib.validate_and_slice_inputs(self._var_list)
        with open_checkpoint(save_path) as reader:
            for s in saveables:
                for spec in s.specs:
                    _check_spec(reader, spec, save_path, self._reshape)


_MISSING = "a Variable name or other graph key that is missing"
_MISMATCH = "a mismatch between the current graph and the graph"


def _restore_targets(graph, restore_op_name: str):
    """(key, slice spec, dtype, shape of the variable assigned or None) of every tensor the
    restore op reads, found by walking back from it to its RestoreV2 ops."""
    seen, stack, found = set(), [graph.get_operation_by_name(restore_op_name)], []
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type == "RestoreV2":
            found.append(op)
            continue
        stack.extend(op.control_inputs)
        stack.extend(t.op for t in op.inputs)
    for op in found:
        names, specs = constant_value(op.inputs[1]), constant_value(op.inputs[2])
        if names is None or specs is None:
            continue
        for name, spec, out in zip(names.reshape(-1), specs.reshape(-1), op.outputs):
            yield _text(name), _text(spec), out.dtype.base_dtype, _assigned_shape(out)


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _assigned_shape(tensor, depth: int = 0):
    """The shape of the variable an Assign (ref) or AssignVariableOp (resource, reached
    through the Identity that places the value) stores `tensor` into; None when unknown."""
    for consumer in tensor.consumers():
        if consumer.type == "Assign" and consumer.inputs[1] is tensor:
            return consumer.inputs[0].get_shape()
        if consumer.type == "AssignVariableOp" and consumer.inputs[1] is tensor:
            handle = consumer.inputs[0].op
            return handle.get_attr("shape") if handle.type == "VarHandleOp" else None
        if consumer.type == "Identity" and depth < 2:
            shape = _assigned_shape(consumer.outputs[0], depth + 1)
            if shape is not None:
                return shape
    return None


def _restore_error(cls, reason: str, original: str):
    return cls(
        None,
        None,
        "Restoring from checkpoint failed. This is most likely due to "
        f"{reason} from the checkpoint. Please ensure that you have not altered the graph "
        f"expected based on the checkpoint. Original error:\n\n{original}",
    )


def _check_spec(reader, spec, save_path: str, reshape: bool):
    if not reader.contains(spec.name):
        raise _restore_error(
            errors.NotFoundError,
            _MISSING,
            f"Key {spec.name} not found in checkpoint {save_path}",
        )
    stored_dtype = reader.dtype(spec.name)
    if numpy_dtype(stored_dtype) != numpy_dtype(spec.dtype.as_datatype_enum):
        raise _restore_error(
            errors.InvalidArgumentError,
            _MISMATCH,
            f"variable {spec.name} has dtype {spec.dtype.name}, the checkpoint "
            f"{numpy_dtype(stored_dtype)}",
        )
    stored = reader.shape(spec.name)
    parsed = parse_shape_and_slice(spec.slice_spec)
    if parsed is not None:
        full, _ = parsed
        want_full = tuple(full)
        if want_full != stored:
            raise _restore_error(
                errors.InvalidArgumentError,
                _MISMATCH,
                f"variable {spec.name} has full shape {list(want_full)}, the checkpoint "
                f"{list(stored)}",
            )
        return
    shape = spec.shape
    if shape is None or not shape.is_fully_defined():
        return
    want = tuple(shape.as_list())
    if want != stored and not (reshape and int(np.prod(want)) == int(np.prod(stored))):
        raise _restore_error(
            errors.InvalidArgumentError,
            _MISMATCH,
            f"Assign requires shapes of both tensors to match. variable {spec.name} has shape "
            f"{list(want)}, the checkpoint {list(stored)}",
        )

"""What a Saver saves: SaveableObjects, each a list of SaveSpecs (tensor, checkpoint key, slice)
and a way to restore them (TF1's saveable_object.py and saveable_object_util.py).

A ref variable saves its value and restores with Assign; a resource variable saves a read of
its handle and restores with AssignVariableOp; each partition of a partitioned variable saves
its slice of the full tensor under the full variable's name, with a slice spec
"d0 d1 start,len:start,len" (so the checkpoint holds one tensor, as in TensorFlow).
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.operation import Tensor
from flowgraph.ops import array, variable_ops, variables
from flowgraph.ops.resource_variables import is_resource_variable

__all__ = ["SaveSpec", "SaveableObject", "op_list_to_dict", "validate_and_slice_inputs"]


class SaveSpec:
    """One tensor to save: its value, the key it is stored under and its slice spec."""

    def __init__(self, tensor, slice_spec, name, dtype=None, device=None, shape=None):
        self._tensor = tensor
        self.shape = shape if shape is not None else getattr(tensor, "shape", None)
        self.slice_spec = slice_spec
        self.name = name
        self.dtype = dtype if dtype is not None else tensor.dtype.base_dtype
        self.device = device if device is not None else getattr(tensor, "device", "")

    @property
    def tensor(self):
        return self._tensor() if callable(self._tensor) else self._tensor


class SaveableObject:
    """Something saveable: `op` (what it came from), its `specs` and its checkpoint `name`.
    Subclasses implement restore(restored_tensors, restored_shapes) -> an op."""

    def __init__(self, op, specs, name):
        self.op = op
        self.specs = specs
        self.name = name

    @property
    def device(self):
        return self.specs[0].device

    def restore(self, restored_tensors, restored_shapes):
        raise NotImplementedError(f"{type(self).__name__}.restore")


class ReferenceVariableSaveable(SaveableObject):
    """A ref variable (VariableV2): saves its value, restores by Assign."""

    def __init__(self, var, slice_spec, name):
        spec = SaveSpec(var, slice_spec, name, dtype=var.dtype.base_dtype, device=var.device)
        super().__init__(var, [spec], name)

    def restore(self, restored_tensors, restored_shapes):
        restored = restored_tensors[0]
        if restored_shapes is not None:
            restored = array.reshape(restored, restored_shapes[0])
        validate = restored_shapes is None and self.op.get_shape().is_fully_defined()
        return variable_ops.assign(self.op, restored, validate_shape=validate)


class ResourceVariableSaveable(SaveableObject):
    """A resource variable: saves a read of its handle on its device, restores with
    AssignVariableOp there."""

    def __init__(self, var, slice_spec, name):
        self._var = var
        handle = var.handle

        def read():
            graph = handle.graph
            with graph.colocate_with(None, ignore_existing=True), graph.device(handle.device):
                value = apply_op("ReadVariableOp", [handle], dtype=var.dtype).outputs[0]
                return array.identity(value)

        spec = SaveSpec(
            read, slice_spec, name, dtype=var.dtype, device=handle.device, shape=var.shape
        )
        super().__init__(var, [spec], name)

    def restore(self, restored_tensors, restored_shapes):
        restored = restored_tensors[0]
        if restored_shapes is not None:
            restored = array.reshape(restored, restored_shapes[0])
        graph = self._var.handle.graph
        with graph.colocate_with(None, ignore_existing=True), graph.device(self._var.device):
            restored = array.identity(restored)
            return apply_op("AssignVariableOp", [self._var.handle, restored])


def _is_variable(x) -> bool:
    return isinstance(x, variables.Variable)


def _is_partitioned(x) -> bool:
    return type(x).__name__ == "PartitionedVariable" and hasattr(x, "_get_variable_list")


def _var_key(v) -> str:
    """The checkpoint key of a variable: its op name, or the full name of its partition."""
    info = getattr(v, "_save_slice_info", None)
    if info is not None:
        return info.full_name
    return v.op.name


def _add_unique(names_to_saveables: dict, name: str, value):
    if name in names_to_saveables:
        raise ValueError(f"At least two variables have the same name: {name}")
    names_to_saveables[name] = value


def op_list_to_dict(op_list, convert_variable_to_tensor=True) -> dict:
    """{checkpoint name: variable, list of partitions or saveable} of a Saver's var_list.

    Partitions of one variable are grouped under its full name."""
    if not isinstance(op_list, (list, tuple, set)):
        raise TypeError(f"Variables to save should be passed in a dict or a list: {op_list}")
    op_list = sorted(op_list, key=lambda x: getattr(x, "name", ""))
    names: dict = {}
    for var in op_list:
        if isinstance(var, SaveableObject):
            _add_unique(names, var.name, var)
        elif _is_partitioned(var):
            _add_unique(names, var.name, list(var))
        elif _is_variable(var) and getattr(var, "_save_slice_info", None) is not None:
            names.setdefault(var._save_slice_info.full_name, [])
            if not isinstance(names[var._save_slice_info.full_name], list):
                raise TypeError(f"Mixing slices and non-slices with the same name: {_var_key(var)}")
            names[var._save_slice_info.full_name].append(var)
        elif _is_variable(var) or (
            isinstance(var, Tensor)
            and var.op.type in ("Variable", "VariableV2", "AutoReloadVariable", "VarHandleOp")
        ):
            _add_unique(names, var.op.name, var)
        else:
            raise TypeError(f"Can not convert a {type(var).__name__} into a Variable or saveable")
    return names


def _slice_spec(v) -> str:
    """ "10 4 0,5:0,4": the full shape, then offset,length per dimension (TF1's
    _SaveSliceInfo.spec). `_save_slice_info` is a SaveSliceInfoDef."""
    info = v._save_slice_info
    full = " ".join(str(d) for d in info.full_shape)
    return full + " " + ":".join(f"{o},{n}" for o, n in zip(info.var_offset, info.var_shape))


def saveable_objects_for_op(op, name: str) -> list[SaveableObject]:
    """The SaveableObjects of one var_list value under checkpoint name `name`."""
    if isinstance(op, SaveableObject):
        return [op]
    if isinstance(op, (list, tuple)) or _is_partitioned(op):
        parts = list(op)
        out = []
        for v in parts:
            if getattr(v, "_save_slice_info", None) is None:
                raise ValueError(f"Slices must all be slices: {v.name} of {name} has no slice info")
            out.append(_one(v, _slice_spec(v), name))
        return out
    return [_one(op, "", name)]


def _one(var, spec: str, name: str) -> SaveableObject:
    if isinstance(var, Tensor):
        if var.dtype == dtypes.resource:
            raise TypeError(f"Saving a raw resource handle {var.name}: pass the variable itself")
        if not var.dtype.is_ref_dtype:
            raise TypeError(f"Can not save {var.name}: not a variable (dtype {var.dtype.name})")
        return ReferenceVariableSaveable(var, spec, name)
    if is_resource_variable(var):
        return ResourceVariableSaveable(var, spec, name)
    if _is_variable(var):
        return ReferenceVariableSaveable(var._ref(), spec, name)
    raise TypeError(f"Can not save {var!r} under {name}: not a variable or SaveableObject")


def validate_and_slice_inputs(names_to_saveables) -> list[SaveableObject]:
    """The SaveableObjects of a var_list (list or {name: variable}), sorted by name; a variable
    listed twice is a ValueError."""
    if not isinstance(names_to_saveables, dict):
        names_to_saveables = op_list_to_dict(names_to_saveables)
    saveables, seen = [], set()
    for name, op in sorted(names_to_saveables.items(), key=lambda x: x[0]):
        for saveable in saveable_objects_for_op(op, name):
            key = id(saveable.op)
            if key in seen:
                raise ValueError(f"The same saveable will be restored with two names: {name}")
            seen.add(key)
            saveables.append(saveable)
    return saveables


def all_saveable_objects(graph=None) -> list:
    """Global variables and the SAVEABLE_OBJECTS collection (Saver's default var_list)."""
    graph = graph if graph is not None else default_graph.get()
    return graph.get_collection("variables") + graph.get_collection("saveable_objects")

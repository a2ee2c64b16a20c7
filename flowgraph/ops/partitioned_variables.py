"""Partitioned variables: one logical variable stored as slices along one axis, each its own
variable (so the slices can live on different parameter servers, whitepaper §3.3), and saved
as one full tensor with slice specs (TF1's partitioned_variables.py and PartitionedVariable).

A partitioner maps (shape, dtype) to the number of slices per dimension; at most one entry
is above 1. Slice i of n along an axis of size d has d // n elements, plus one for the first
d % n slices.
"""

from __future__ import annotations

import math

from flowgraph.core import dtypes
from flowgraph.core.protos import SaveSliceInfoDef
from flowgraph.core.shapes import TensorShape, as_shape
from flowgraph.framework import default_graph
from flowgraph.framework.convert import convert_to_tensor, register_tensor_conversion_function
from flowgraph.framework.operation import Tensor
from flowgraph.ops import array, array_index

__all__ = [
    "create_partitioned_variables",
    "fixed_size_partitioner",
    "min_max_variable_partitioner",
    "variable_axis_size_partitioner",
]


def fixed_size_partitioner(num_shards, axis=0):
    """Splits `axis` into `num_shards` slices (fewer if the axis is shorter).

    Example: tf.get_variable("emb", [1000, 64], partitioner=tf.fixed_size_partitioner(4))"""

    def _partitioner(shape, dtype):
        del dtype
        partitions = [1] * len(shape)
        partitions[axis] = min(num_shards, shape.dims[axis].value)
        return partitions

    return _partitioner


def _element_size(dtype, bytes_per_string_element):
    dtype = dtypes.as_dtype(dtype).base_dtype
    return bytes_per_string_element if dtype == dtypes.string else dtype.size


def variable_axis_size_partitioner(
    max_shard_bytes, axis=0, bytes_per_string_element=16, max_shards=None
):
    """As many slices along `axis` as keep each slice under `max_shard_bytes` (but at least
    one row each, and at most `max_shards` slices)."""
    if max_shard_bytes < 1 or bytes_per_string_element < 1:
        raise ValueError("Both max_shard_bytes and bytes_per_string_element must be positive.")
    if max_shards and max_shards < 1:
        raise ValueError("max_shards must be positive.")

    def _partitioner(shape, dtype):
        if not isinstance(shape, TensorShape):
            raise ValueError(f"shape is not a TensorShape: {shape}")
        if not shape.is_fully_defined():
            raise ValueError(f"shape is not fully defined: {shape}")
        if not isinstance(dtype, dtypes.DType):
            raise ValueError(f"dtype is not a DType: {dtype}")
        size = _element_size(dtype, bytes_per_string_element)
        partitions = [1] * shape.ndims
        bytes_per_slice = 1.0 * (shape.num_elements() / shape.dims[axis].value) * size
        slices_per_shard = max(1, math.floor(max_shard_bytes / bytes_per_slice))
        axis_shards = math.ceil(1.0 * shape.dims[axis].value / slices_per_shard)
        if max_shards:
            axis_shards = min(max_shards, axis_shards)
        partitions[axis] = axis_shards
        return partitions

    return _partitioner


def min_max_variable_partitioner(
    max_partitions=1, axis=0, min_slice_size=256 << 10, bytes_per_string_element=16
):
    """Slices of at least `min_slice_size` bytes, at most `max_partitions` of them."""

    def _partitioner(shape, dtype):
        if axis >= len(shape):
            raise ValueError(
                f"Cannot partition variable along axis {axis} when shape is only {shape}"
            )
        total = shape.num_elements() * _element_size(dtype, bytes_per_string_element)
        partitions = [1] * len(shape)
        wanted = math.ceil(total / min_slice_size)
        partitions[axis] = max(1, min(shape.dims[axis].value, max_partitions, wanted))
        return partitions

    return _partitioner


def create_partitioned_variables(*args, **kwargs):
    raise NotImplementedError(
        "tf.create_partitioned_variables (deprecated in TF1): use "
        "tf.get_variable(..., partitioner=tf.fixed_size_partitioner(n)) instead"
    )


class PartitionInfo:
    """What an initializer is told about the slice it initializes (TF's _PartitionInfo)."""

    def __init__(self, full_shape, var_offset):
        self.full_shape = list(full_shape)
        self.var_offset = list(var_offset)

    def single_offset(self, shape):
        dim = self.single_slice_dim(shape)
        return 0 if dim is None else self.var_offset[dim]

    def single_slice_dim(self, shape):
        dims = [i for i, (n, full) in enumerate(zip(shape, self.full_shape)) if n != full]
        if len(dims) > 1:
            raise ValueError(f"Cannot use single_slice_dim() with more than one slice dim: {shape}")
        return dims[0] if dims else None


class PartitionedVariable:
    """A variable stored as slices; iterating gives the slices, converting to a Tensor
    concatenates them (TF1's PartitionedVariable)."""

    def __init__(self, name, shape, dtype, variable_list, partitions):
        if not variable_list:
            raise ValueError("variable_list may not be empty")
        for v in variable_list:
            if v._save_slice_info is None:
                raise ValueError(f"All variables must have a save_slice_info available: {v.name}")
        if len(shape) != len(partitions):
            raise ValueError(f"len(shape) != len(partitions): {shape} vs. {partitions}")
        self._name = name
        self._shape = as_shape(shape)
        self._dtype = dtypes.as_dtype(dtype)
        self._variable_list = sorted(
            variable_list, key=lambda v: list(v._save_slice_info.var_offset)
        )
        self._partitions = list(partitions)
        self._as_tensor = None

    def __iter__(self):
        return iter(self._variable_list)

    def __len__(self):
        axes = self._partition_axes()
        if len(axes) > 1:
            raise ValueError(f"Cannot get a length for {len(axes)} > 1 partition axes")
        return len(self._variable_list)

    def _partition_axes(self):
        if all(p == 1 for p in self._partitions):
            return [0]
        return [i for i, p in enumerate(self._partitions) if p > 1]

    def _concat(self):
        graph = default_graph.get()
        if len(self._variable_list) == 1:
            with graph.name_scope(None):
                return array.identity(self._variable_list[0], name=self._name)
        with graph.name_scope(self._name + "/ConcatPartitions/"):
            joined = array.concat(self._variable_list, self._partition_axes()[0])
        with graph.name_scope(None):
            return array.identity(joined, name=self._name)

    def as_tensor(self) -> Tensor:
        """The full value: the slices concatenated (a new read each call)."""
        with default_graph.get().control_dependencies(None):
            return self._concat()

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    @property
    def graph(self):
        return self._variable_list[0].graph

    def _get_variable_list(self):
        return self._variable_list

    def _get_partitions(self):
        return self._partitions

    def assign(self, value, use_locking=False, name=None, read_value=True):
        """Assigns the matching slice of `value` to each partition; returns their updates."""
        value = convert_to_tensor(value, dtype=self._dtype)
        out = []
        for v in self._variable_list:
            info = v._save_slice_info
            part = array_index.slice(value, list(info.var_offset), list(info.var_shape))
            out.append(v.assign(part, use_locking=use_locking, read_value=read_value))
        return out

    def __repr__(self):
        parts = len(self._variable_list)
        return f"<PartitionedVariable '{self._name}' shape={self._shape} parts={parts}>"


def _to_tensor(v: PartitionedVariable, dtype=None, name=None, as_ref=False):
    if dtype is not None and not dtypes.as_dtype(dtype).is_compatible_with(v.dtype):
        raise ValueError(
            f"Incompatible type conversion requested to type '{dtype}' for variable of type "
            f"'{v.dtype.name}'"
        )
    if as_ref:
        raise NotImplementedError("PartitionedVariable doesn't support being used as a reference.")
    return v.as_tensor()


register_tensor_conversion_function(PartitionedVariable, _to_tensor)


def _slicing(shape: TensorShape, partitions, name: str) -> tuple[int, int]:
    if not isinstance(partitions, (list, tuple)) or len(partitions) != shape.ndims:
        raise ValueError(
            f"Partitioner returned a partition list that does not match the Variable's rank: "
            f"{partitions} vs. {shape}"
        )
    if any(int(p) < 1 for p in partitions):
        raise ValueError(f"Partitioner returned zero partitions for some axes: {partitions}")
    dims = [i for i, p in enumerate(partitions) if p > 1]
    if len(dims) > 1:
        raise ValueError(
            f"Can only slice a variable along one dimension: shape: {shape}, partitioning: "
            f"{partitions} ({name})"
        )
    return (dims[0], int(partitions[dims[0]])) if dims else (0, 1)


def get_partitioned_variable(
    store,
    name,
    partitioner,
    shape,
    dtype,
    initializer,
    regularizer,
    reuse,
    trainable,
    collections,
    caching_device,
    validate_shape,
    use_resource,
    constraint,
) -> PartitionedVariable:
    """Creates (or, with reuse, returns) the partitions "name/part_i" of variable `name`."""
    from_tensor = initializer is not None and not callable(initializer)
    if from_tensor:
        initializer = convert_to_tensor(initializer, dtype=dtype)
        if shape is not None:
            raise ValueError("If initializer is a constant, do not specify shape.")
        shape = initializer.get_shape()
        dtype = initializer.dtype.base_dtype
    shape = as_shape(shape)
    if not shape.is_fully_defined():
        raise ValueError(
            f"Shape of a new partitioned variable ({name}) must be fully defined, but instead "
            f"was {shape}."
        )
    if shape.ndims < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1, shape: {shape}")
    partitions = list(partitioner(shape=shape, dtype=dtypes.as_dtype(dtype)))
    slice_dim, num_slices = _slicing(shape, partitions, name)
    found = store.partitioned_vars.get(name)
    if found is not None:
        if reuse is False:
            raise ValueError(
                f"Partitioned variable with name {name} already exists. Did you mean to set "
                "reuse=True or reuse=tf.AUTO_REUSE in VarScope?"
            )
        if not shape.is_compatible_with(found.get_shape()):
            raise ValueError(
                f"Trying to reuse partitioned variable {name}, but specified shape {shape} and "
                f"found shape {found.get_shape()}."
            )
        if found._get_partitions() != partitions:
            raise ValueError(
                f"Trying to reuse partitioned variable {name}, but specified partitions "
                f"{partitions} and found partitions {found._get_partitions()}."
            )
        return found
    if reuse is True:
        raise ValueError(
            f"PartitionedVariable {name} does not exist, or was not created with "
            "tf.get_variable(). Did you mean to set reuse=False or reuse=tf.AUTO_REUSE in VarScope?"
        )
    if name in store.vars:
        raise ValueError(
            f"A partitioner was provided, but an unpartitioned version of the variable was "
            f"found: {name}.  Perhaps a variable of the same name was already created without "
            "partitioning?"
        )
    full = shape.as_list()
    size, excess = divmod(full[slice_dim], num_slices)
    offset = [0] * len(full)
    parts = []
    graph = default_graph.get()
    for i in range(num_slices):
        var_shape = list(full)
        var_shape[slice_dim] = size + (1 if i < excess else 0)
        var_offset = list(offset)
        part_name = f"{name}/part_{i}"
        info = PartitionInfo(full, var_offset)
        if from_tensor:
            with graph.name_scope(part_name + "/PartitionedInitializer/"):
                init = array_index.slice(initializer, var_offset, var_shape)
            init_shape = None
        else:
            init, init_shape = initializer, var_shape
        v = store._get_single_variable(
            part_name,
            init_shape,
            dtype,
            init,
            regularizer,
            reuse,
            trainable,
            collections,
            caching_device,
            validate_shape,
            use_resource,
            constraint,
            partition_info=info,
        )
        v._save_slice_info = SaveSliceInfoDef(
            full_name=name, full_shape=full, var_offset=var_offset, var_shape=var_shape
        )
        parts.append(v)
        offset[slice_dim] += var_shape[slice_dim]
    pv = PartitionedVariable(name, shape, dtype, parts, partitions)
    store.partitioned_vars[name] = pv
    return pv

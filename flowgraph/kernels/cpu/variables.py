"""CPU kernels for variables (§2 "Variables", §4.7 containers).

A variable's storage is a VariableState in its device's resource container; the variable op
outputs that object as its reference. Stored arrays are read-only. An update of a reference
variable writes into its buffer, which every read of the variable aliases (TF's ref semantics);
an update of a resource variable rebinds the value (copy on write), so nothing that read the old
value sees it change (runtime/resources.py)."""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.array import checked
from flowgraph.kernels.cpu.array_index import gather
from flowgraph.kernels.variable_state import VariableState
from flowgraph.opdefs import strided_slice as ss
from flowgraph.opdefs.array_index import check_batch_dims


def _in_place(ctx) -> bool:
    """Whether this update writes through a reference (input 0 is a ref) or a resource handle."""
    return ctx.input_types[0].is_ref_dtype


def _variable_state(ctx) -> VariableState:
    a = ctx.attrs
    name = a.get("shared_name") or ctx.name
    return ctx.resources.lookup_or_create(
        a.get("container", ""), name, lambda: VariableState(ctx.name, a["dtype"], a["shape"])
    )


@register_kernel("VariableV2")
@register_kernel("Variable")
def variable(ctx):
    return _variable_state(ctx)


def _check_shape(ctx, var: VariableState, value):
    shape = np.shape(value)
    old = var.value.shape if var.value is not None else None
    if old is None and var.shape is not None and var.shape.is_fully_defined():
        old = tuple(var.shape.as_list())
    if old is not None and old != shape:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Assign requires shapes of both tensors to match. lhs shape= {list(old)} rhs shape= {list(shape)}",
        )


@register_kernel("Assign")
def assign(ctx, var: VariableState, value):
    if ctx.attrs["validate_shape"]:
        _check_shape(ctx, var, value)
    with var.lock:
        var.write(value, in_place=True)
    return var


def _update(fn):
    def kernel(ctx, var: VariableState, value):
        with var.lock:
            old = var.read()
            # Checked before the update: NumPy would broadcast a [1] value into a [3] variable.
            if np.shape(value) != old.shape:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Cannot update variable with shape {list(old.shape)} using a Tensor with shape "
                    f"{list(np.shape(value))}, shapes must be equal.",
                )
            new = fn(old, value)
            var.write(new, _in_place(ctx), owned=True)
        return var

    return kernel


register_kernel("AssignAdd")(_update(np.add))
register_kernel("AssignSub")(_update(np.subtract))


@register_kernel("IsVariableInitialized")
def is_variable_initialized(ctx, var: VariableState):
    return np.array(var.value is not None)


# -- resource variables: the handle is the VariableState itself ----------------------------------
@register_kernel("VarHandleOp")
def var_handle(ctx):
    return _variable_state(ctx)


def _read_as(ctx, var: VariableState) -> np.ndarray:
    """The variable's value, checked against the op's `dtype` attr (TF rejects a mismatch)."""
    value = var.read()
    want = ctx.attrs["dtype"]
    if var.dtype is not None and want.base_dtype != var.dtype.base_dtype:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Trying to read variable {var.name} with wrong dtype. Expected "
            f"{var.dtype.base_dtype.name} got {want.base_dtype.name}",
        )
    return value


@register_kernel("ReadVariableOp")
def read_variable(ctx, var: VariableState):
    return _read_as(ctx, var)


@register_kernel("ResourceGather")
def resource_gather(ctx, var: VariableState, indices):
    """Rows of the variable at `indices` (along axis batch_dims), read without a full copy."""
    params = _read_as(ctx, var)
    indices = np.asarray(indices)
    if params.ndim == 0:
        raise errors.InvalidArgumentError(None, None, "params must be at least 1 dimensional")
    batch_dims = ctx.attrs["batch_dims"]
    if batch_dims < 0:
        batch_dims += indices.ndim
    batch_dims = checked(check_batch_dims, batch_dims, batch_dims, params.ndim, indices.ndim)
    return gather(params, indices, batch_dims, batch_dims)


@register_kernel("VariableShape")
def variable_shape(ctx, var: VariableState):
    value = var.read()
    return np.asarray(value.shape, dtype=ctx.attrs["out_type"].as_numpy_dtype)


@register_kernel("AssignVariableOp")
def assign_variable(ctx, var: VariableState, value):
    if ctx.attrs.get("validate_shape") and var.value is not None:
        _check_shape(ctx, var, value)
    with var.lock:
        var.write(value, in_place=False)


@register_kernel("AssignAddVariableOp")
def assign_add_variable(ctx, var, value):
    _update(np.add)(ctx, var, value)


@register_kernel("AssignSubVariableOp")
def assign_sub_variable(ctx, var, value):
    _update(np.subtract)(ctx, var, value)


@register_kernel("VarIsInitializedOp")
def var_is_initialized(ctx, var: VariableState):
    return np.array(var.value is not None)


@register_kernel("DestroyResourceOp")
def destroy_resource(ctx, var: VariableState):
    var.reset()


# -- sparse updates: Scatter* (rows of a ref variable) and ScatterNd* (slices at index tuples) -----
def _trunc_divide(a, b):
    """C++ integer division (truncates toward zero); division by zero is an error, not UB."""
    if np.any(b == 0):
        raise errors.InvalidArgumentError(None, None, "Integer division by zero in ScatterDiv")
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype, copy=False)


def _apply_at(new: np.ndarray, index, updates: np.ndarray, op_type: str):
    """Combines `updates` into `new` at `index` (an int array or a tuple of them) in place;
    duplicate indices accumulate for every op but ScatterUpdate (last write wins)."""
    base = op_type.replace("Nd", "")
    if base == "ScatterUpdate":
        new[index] = updates
    elif base == "ScatterDiv" and new.dtype.kind in "iu":
        # No ufunc.at for truncating division: apply each duplicate "round" of indices at once.
        flat = (
            np.ravel_multi_index(index, new.shape[: len(index)])
            if isinstance(index, tuple)
            else index
        )
        order = np.argsort(flat, kind="stable")
        sorted_flat = flat[order]
        starts = (
            np.r_[0, np.flatnonzero(np.diff(sorted_flat)) + 1] if flat.size else np.zeros(0, int)
        )
        rank = np.empty(flat.size, dtype=np.int64)
        rank[order] = np.arange(flat.size) - np.repeat(starts, np.diff(np.r_[starts, flat.size]))
        for r in range(int(rank.max(initial=-1)) + 1):
            sel = rank == r
            at = tuple(i[sel] for i in index) if isinstance(index, tuple) else index[sel]
            new[at] = _trunc_divide(new[at], updates[sel])
    else:
        ufunc = {
            "ScatterAdd": np.add,
            "ScatterSub": np.subtract,
            "ScatterMul": np.multiply,
            "ScatterDiv": np.divide,
            "ScatterMin": np.minimum,
            "ScatterMax": np.maximum,
        }[base]
        ufunc.at(new, index, updates)


def _scatter(ctx, var: VariableState, indices, updates):
    """Scatter*: ref[indices[i], ...] (op)= updates[i, ...]; updates may be a scalar.
    ResourceScatter* (no use_locking attr) always lock, like TF's resource-variable mutex."""
    lock = var.lock if ctx.attrs.get("use_locking", True) else _NO_LOCK
    with lock:
        old = var.read()
        if old.ndim == 0:
            raise errors.InvalidArgumentError(
                None, None, "params must be at least 1-D, got a scalar"
            )
        updates = np.asarray(updates, dtype=old.dtype)
        want = indices.shape + old.shape[1:]
        if updates.ndim and updates.shape != want:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Must have updates.shape = indices.shape + params.shape[1:] or updates.shape = [], "
                f"got updates.shape {list(updates.shape)}, indices.shape {list(indices.shape)}, "
                f"params.shape {list(old.shape)}",
            )
        flat = indices.reshape(-1).astype(np.int64, copy=False)
        bad = np.flatnonzero((flat < 0) | (flat >= old.shape[0]))
        if bad.size:
            raise errors.InvalidArgumentError(
                None, None, f"indices[{bad[0]}] = {flat[bad[0]]} is not in [0, {old.shape[0]})"
            )
        upd = np.broadcast_to(updates, want).reshape((flat.size,) + old.shape[1:])
        new = old.copy()
        _apply_at(new, flat, upd, ctx.op_type.removeprefix("Resource"))
        var.write(new, _in_place(ctx), owned=True)
    return var


def _resource_scatter(ctx, var: VariableState, indices, updates):
    """ResourceScatter*: the Scatter* update of a resource variable (the op has no output)."""
    _scatter(ctx, var, indices, updates)


def _scatter_nd(ctx, var: VariableState, indices, updates):
    """ScatterNd*: indices [..., K] name slices ref[i0, ..., iK-1]; updates fill those slices."""
    lock = var.lock if ctx.attrs["use_locking"] else _NO_LOCK
    with lock:
        old = var.read()
        if indices.ndim == 0:
            raise errors.InvalidArgumentError(None, None, "indices must be at least 1-D")
        k = indices.shape[-1]
        if k > old.ndim:
            raise errors.InvalidArgumentError(
                None, None, f"indices.shape[-1] = {k} must be <= the rank of ref ({old.ndim})"
            )
        want = indices.shape[:-1] + old.shape[k:]
        updates = np.asarray(updates, dtype=old.dtype)
        if updates.shape != want:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"updates must have shape indices.shape[:-1] + ref.shape[indices.shape[-1]:] = "
                f"{list(want)}, got {list(updates.shape)}",
            )
        flat = indices.reshape(-1, k).astype(np.int64, copy=False)
        limits = np.asarray(old.shape[:k], dtype=np.int64)
        bad = np.flatnonzero(np.any((flat < 0) | (flat >= limits), axis=1))
        if bad.size:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"indices[{bad[0]}] = {flat[bad[0]].tolist()} does not index into ref of shape "
                f"{list(old.shape)}",
            )
        upd = updates.reshape((flat.shape[0],) + old.shape[k:])
        new = old.copy()
        _apply_at(new, tuple(flat.T), upd, ctx.op_type.removeprefix("Resource"))
        var.write(new, _in_place(ctx), owned=True)
    return var


def _resource_scatter_nd(ctx, var: VariableState, indices, updates):
    """ResourceScatterNd*: the ScatterNd* update of a resource variable (no output)."""
    _scatter_nd(ctx, var, indices, updates)


class _NoLock:
    """Stands in for the variable's lock when use_locking=False (TF lets such updates race)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NO_LOCK = _NoLock()

for _op in (
    "ScatterUpdate",
    "ScatterAdd",
    "ScatterSub",
    "ScatterMul",
    "ScatterDiv",
    "ScatterMin",
    "ScatterMax",
):
    register_kernel(_op)(_scatter)
    register_kernel("Resource" + _op)(_resource_scatter)
for _op in ("ScatterNdUpdate", "ScatterNdAdd", "ScatterNdSub"):
    register_kernel(_op)(_scatter_nd)
    register_kernel("Resource" + _op)(_resource_scatter_nd)


@register_kernel("ResourceCountUpTo")
@register_kernel("CountUpTo")
def count_up_to(ctx, var: VariableState):
    """Returns the old value and increments it; OutOfRange once it reaches `limit`."""
    with var.lock:
        old = var.read()
        if old.ndim != 0:
            raise errors.InvalidArgumentError(
                None, None, f"input is not a scalar: {list(old.shape)}"
            )
        limit = ctx.attrs["limit"]
        if old >= limit:
            raise errors.OutOfRangeError(None, None, f"Reached limit of {limit}")
        old = np.array(old)  # a copy: a ref variable's buffer changes in place below
        var.write(np.asarray(old + 1, dtype=old.dtype), _in_place(ctx), owned=True)
    return old


def _as_ints(x) -> list:
    return [int(v) for v in np.asarray(x).reshape(-1)]


@register_kernel("StridedSliceAssign")
@register_kernel("ResourceStridedSliceAssign")
def strided_slice_assign(ctx, var: VariableState, begin, end, strides, value):
    """var[begin:end:strides] = value (the slice spec and masks of StridedSlice); the value
    broadcasts to the slice's shape. The ref form returns the variable, the resource form
    nothing."""
    with var.lock:
        old = var.read()
        index = checked(
            ss.build_index, _as_ints(begin), _as_ints(end), _as_ints(strides), ctx.attrs
        )
        entries = checked(ss.dense_entries, index, old.ndim)
        checked(ss.check_shrink, entries, list(old.shape))
        target = ss.numpy_index(entries)
        value = np.asarray(value)
        want = old[target].shape
        try:  # the r-value broadcasts to the slice, as in TF 2's kernel (TF 1.15 refused)
            value = np.broadcast_to(value, want)
        except ValueError:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Cannot broadcast input shape {list(value.shape)} into final shape {list(want)}",
            ) from None
        new = old.copy()
        new[target] = value
        var.write(new, _in_place(ctx), owned=True)
    return var if ctx.op_type == "StridedSliceAssign" else None

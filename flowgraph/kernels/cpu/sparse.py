"""CPU kernels of the sparse ops (see flowgraph/opdefs/sparse.py).

Every kernel works on whole index arrays: entries are identified by their row-major linear
index (`np.ravel_multi_index`), so ordering, grouping and matching entries are sorts,
`np.unique` and `np.searchsorted`, never Python loops over entries.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel


def _invalid(msg: str):
    return errors.InvalidArgumentError(None, None, msg)


def _fmt(row) -> str:
    return "[" + ",".join(str(int(v)) for v in row) + "]"


def linear_index(indices: np.ndarray, shape: np.ndarray, what: str = "indices") -> np.ndarray:
    """Row-major position of each index row in a dense tensor of `shape`; bounds are checked."""
    shape = np.asarray(shape, np.int64).reshape(-1)
    indices = np.asarray(indices, np.int64)
    indices = indices.reshape(len(indices), -1 if indices.size else shape.size)
    if indices.shape[1] != shape.size:
        raise _invalid(
            f"{what} has rank {indices.shape[1]} but the dense shape {_fmt(shape)} has rank "
            f"{shape.size}"
        )
    bad = np.any((indices < 0) | (indices >= shape), axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        raise _invalid(
            f"{what}[{i}] = {_fmt(indices[i])} is out of bounds: need 0 <= index < {_fmt(shape)}"
        )
    if shape.size == 0:
        return np.zeros(len(indices), np.int64)
    strides = np.concatenate([np.cumprod(shape[::-1])[:-1][::-1], [1]]).astype(np.int64)
    return indices @ strides


def _check_order(lin: np.ndarray, indices: np.ndarray):
    """TF's validation of canonical (row-major, strictly increasing) index order."""
    if lin.size < 2:
        return
    step = np.diff(lin)
    if (step <= 0).any():
        i = int(np.argmax(step <= 0)) + 1
        kind = "repeated" if step[i - 1] == 0 else "out of order"
        raise _invalid(f"indices[{i}] = {_fmt(indices[i])} is {kind}")


@register_kernel("SparseToDense")
def sparse_to_dense(ctx, sparse_indices, output_shape, sparse_values, default_value):
    shape = np.asarray(output_shape, np.int64).reshape(-1)
    if np.ndim(default_value) != 0:
        raise _invalid(f"default_value should be a scalar, got shape {list(default_value.shape)}")
    idx = np.asarray(sparse_indices, np.int64)
    idx = idx.reshape(-1, 1) if idx.ndim < 2 else idx
    if idx.ndim != 2:
        raise _invalid(f"sparse_indices should be a scalar, vector, or matrix, got {idx.ndim}-D")
    if np.ndim(sparse_values) not in (0, 1) or (
        np.ndim(sparse_values) == 1 and len(sparse_values) != len(idx)
    ):
        raise _invalid(
            f"sparse_values has incorrect shape {list(np.shape(sparse_values))}, should be [] "
            f"or [{len(idx)}]"
        )
    lin = linear_index(idx, shape, "sparse_indices")
    if ctx.attrs["validate_indices"]:
        _check_order(lin, idx)
    out = np.full(int(np.prod(shape)), default_value, dtype=np.asarray(default_value).dtype)
    out[lin] = sparse_values
    return out.reshape(shape)


def _coo(indices, values, shape) -> scipy.sparse.csr_matrix:
    shape = np.asarray(shape, np.int64).reshape(-1)
    if shape.size != 2:
        raise _invalid(f"Tensor 'a_shape' is not a matrix: shape {_fmt(shape)}")
    linear_index(indices, shape, "a_indices")
    rows, cols = np.asarray(indices, np.int64).T
    return scipy.sparse.csr_matrix((values, (rows, cols)), shape=tuple(shape))


@register_kernel("SparseTensorDenseMatMul")
def sparse_tensor_dense_matmul(ctx, a_indices, a_values, a_shape, b):
    a = _coo(a_indices, a_values, a_shape)
    if ctx.attrs["adjoint_a"]:
        a = a.conj().T
    if ctx.attrs["adjoint_b"]:
        b = np.conj(b).T
    if a.shape[1] != b.shape[0]:
        raise _invalid(
            f"Cannot multiply A and B because inner dimension does not match: {a.shape[1]} vs. "
            f"{b.shape[0]}.  Did you forget a transpose?  Dimensions of A: {list(a.shape)}.  "
            f"Dimensions of B: {list(b.shape)}"
        )
    return np.asarray(a @ b, dtype=b.dtype)


@register_kernel("SparseTensorDenseAdd")
def sparse_tensor_dense_add(ctx, a_indices, a_values, a_shape, b):
    shape = np.asarray(a_shape, np.int64).reshape(-1)
    if tuple(shape) != b.shape:
        raise _invalid(f"Dimensions of a_shape {_fmt(shape)} and b {list(b.shape)} must match")
    out = np.array(b, copy=True).reshape(-1)
    np.add.at(out, linear_index(a_indices, shape, "a_indices"), a_values)
    return out.reshape(b.shape)


def _reduce_groups(indices, values, shape, axes, ufunc, identity):
    """(reduced values over every output position, positions holding entries, output shape)."""
    shape = np.asarray(shape, np.int64).reshape(-1)
    rank = shape.size
    axes = np.asarray(axes, np.int64).reshape(-1)
    if ((axes < -rank) | (axes >= rank)).any():
        raise _invalid(f"Invalid reduction dimension {axes.tolist()}, for input with {rank} dims.")
    reduced = np.zeros(rank, bool)
    reduced[axes % rank if rank else axes] = True
    kept = shape[~reduced]
    idx = np.asarray(indices, np.int64)
    linear_index(idx, shape, "indices")
    out = np.full(int(np.prod(kept)), identity, values.dtype)
    pos = linear_index(idx[:, ~reduced], kept) if idx.size else np.zeros(0, np.int64)
    ufunc.at(out, pos, values)
    return out, pos, np.where(reduced, 1, shape), kept


def _reduce(ctx, indices, values, shape, axes, ufunc, identity):
    """Reduces the entries present per output position; a position without entries is 0 (TF
    zero-fills the output before reducing each group)."""
    out, pos, kept_dims, kept = _reduce_groups(indices, values, shape, axes, ufunc, identity)
    empty = np.ones(out.size, bool)
    empty[pos] = False
    out[empty] = 0
    return out.reshape(kept_dims if ctx.attrs["keep_dims"] else kept)


def _reduce_sparse(ctx, indices, values, shape, axes, ufunc, identity):
    """The reduction as a SparseTensor holding only the positions that had entries."""
    out, pos, kept_dims, kept = _reduce_groups(indices, values, shape, axes, ufunc, identity)
    present = np.unique(pos)
    dims = kept_dims if ctx.attrs["keep_dims"] else kept
    out_indices = (
        np.stack(np.unravel_index(present, dims), axis=1)
        if len(dims)
        else (np.zeros((present.size, 0), np.int64))
    )
    return out_indices.astype(np.int64), out[present], np.asarray(dims, np.int64)


@register_kernel("SparseReduceSumSparse")
def sparse_reduce_sum_sparse(ctx, indices, values, shape, axes):
    return _reduce_sparse(ctx, indices, values, shape, axes, np.add, 0)


@register_kernel("SparseReduceMaxSparse")
def sparse_reduce_max_sparse(ctx, indices, values, shape, axes):
    lowest = -np.inf if values.dtype.kind == "f" else np.iinfo(values.dtype).min
    return _reduce_sparse(ctx, indices, values, shape, axes, np.maximum, lowest)


@register_kernel("SparseSlice")
def sparse_slice(ctx, indices, values, shape, start, size):
    shape = np.asarray(shape, np.int64).reshape(-1)
    start = np.asarray(start, np.int64).reshape(-1)
    size = np.asarray(size, np.int64).reshape(-1)
    if start.size != shape.size or size.size != shape.size:
        raise _invalid(
            f"Expected start and size of rank {shape.size}, got {start.size} and {size.size}"
        )
    indices = np.asarray(indices, np.int64).reshape(-1, shape.size)
    stop = np.minimum(start + size, shape)
    inside = np.all((indices >= start) & (indices < stop), axis=1)
    out_shape = np.maximum(stop - start, 0)
    return indices[inside] - start, values[inside], out_shape


@register_kernel("SparseSliceGrad")
def sparse_slice_grad(ctx, backprop_val_grad, input_indices, input_start, output_indices):
    shifted = np.asarray(output_indices, np.int64) + np.asarray(input_start, np.int64)
    where, found = _positions(np.asarray(input_indices, np.int64), shifted)
    grad = np.zeros(len(input_indices), backprop_val_grad.dtype)
    grad[found] = backprop_val_grad[where[found]]
    return grad


def _sparse_sparse(ufunc):
    """Element-wise max/min of two SparseTensors of one shape; a missing entry counts as 0."""

    def kernel(ctx, a_indices, a_values, a_shape, b_indices, b_values, b_shape):
        a_shape, b_shape = (np.asarray(x, np.int64).reshape(-1) for x in (a_shape, b_shape))
        if a_shape.shape != b_shape.shape or (a_shape != b_shape).any():
            raise _invalid(
                f"Operands' shapes do not match: got {_fmt(a_shape)} and {_fmt(b_shape)}"
            )
        lin_a = linear_index(a_indices, a_shape, "a_indices")
        lin_b = linear_index(b_indices, b_shape, "b_indices")
        pos, first = np.unique(np.concatenate([lin_a, lin_b]), return_index=True)
        a_full = np.zeros(len(pos), a_values.dtype)
        b_full = np.zeros(len(pos), a_values.dtype)
        a_full[np.searchsorted(pos, lin_a)] = a_values
        b_full[np.searchsorted(pos, lin_b)] = b_values
        all_indices = np.concatenate(
            [
                np.asarray(a_indices, np.int64).reshape(-1, a_shape.size),
                np.asarray(b_indices, np.int64).reshape(-1, a_shape.size),
            ]
        )
        return all_indices[first], ufunc(a_full, b_full)

    return kernel


register_kernel("SparseSparseMaximum")(_sparse_sparse(np.maximum))
register_kernel("SparseSparseMinimum")(_sparse_sparse(np.minimum))


@register_kernel("SparseReduceSum")
def sparse_reduce_sum(ctx, indices, values, shape, axes):
    return _reduce(ctx, indices, values, shape, axes, np.add, 0)


@register_kernel("SparseReduceMax")
def sparse_reduce_max(ctx, indices, values, shape, axes):
    lowest = -np.inf if values.dtype.kind == "f" else np.iinfo(values.dtype).min
    return _reduce(ctx, indices, values, shape, axes, np.maximum, lowest)


def _reorder(indices, values, shape):
    """Entries sorted into row-major order (stable), as TF's SparseTensor::Reorder."""
    order = np.argsort(linear_index(indices, shape), kind="stable")
    return np.asarray(indices, np.int64)[order], values[order], order


@register_kernel("SparseReorder")
def sparse_reorder(ctx, indices, values, shape):
    out_indices, out_values, _ = _reorder(indices, values, shape)
    return out_indices, out_values


@register_kernel("SparseConcat")
def sparse_concat(ctx, *args):
    n = ctx.attrs["N"]
    indices, values, shapes = args[:n], args[n : 2 * n], args[2 * n :]
    shapes = [np.asarray(s, np.int64).reshape(-1) for s in shapes]
    rank = shapes[0].size
    dim = ctx.attrs["concat_dim"]
    if not -rank <= dim < rank:
        raise _invalid(f"Concat dimension must be in range [{-rank}, {rank}), got {dim}")
    dim %= rank
    for i, s in enumerate(shapes):
        if s.size != rank or (np.delete(s, dim) != np.delete(shapes[0], dim)).any():
            raise _invalid(
                f"Input shapes must match: expected {_fmt(shapes[0])} for non-concat dims, got "
                f"{_fmt(s)} for input {i}"
            )
    offsets = np.concatenate([[0], np.cumsum([s[dim] for s in shapes])])
    moved = []
    for ind, off in zip(indices, offsets):
        ind = np.array(ind, np.int64).reshape(-1, rank)
        ind[:, dim] += off
        moved.append(ind)
    out_shape = shapes[0].copy()
    out_shape[dim] = offsets[-1]
    all_indices = np.concatenate(moved)
    all_values = np.concatenate(values)
    out_indices, out_values, _ = _reorder(all_indices, all_values, out_shape)
    return out_indices, out_values, out_shape


def _groups(indices: np.ndarray, shape: np.ndarray, last: int = 1) -> np.ndarray:
    """A group id per entry: entries sharing all but the last `last` index coordinates."""
    outer = np.asarray(indices, np.int64)[:, : indices.shape[1] - last]
    if outer.shape[1] == 0:
        return np.zeros(len(indices), np.int64)
    return np.unique(linear_index(outer, shape[: outer.shape[1]]), return_inverse=True)[1]


@register_kernel("SparseSoftmax")
def sparse_softmax(ctx, sp_indices, sp_values, sp_shape):
    shape = np.asarray(sp_shape, np.int64).reshape(-1)
    if shape.size < 2:
        raise _invalid(f"Input should have rank >= 2, but received shape: {_fmt(shape)}")
    linear_index(sp_indices, shape, "sp_indices")
    if sp_values.size == 0:
        return sp_values.copy()
    group = _groups(sp_indices, shape)
    peak = np.full(group.max() + 1, -np.inf, sp_values.dtype)
    np.maximum.at(peak, group, sp_values)
    e = np.exp(sp_values - peak[group])
    total = np.zeros(len(peak), sp_values.dtype)
    np.add.at(total, group, e)
    return (e / total[group]).astype(sp_values.dtype)


@register_kernel("SparseAdd")
def sparse_add(ctx, a_indices, a_values, a_shape, b_indices, b_values, b_shape, thresh):
    """TF's merge of two canonically ordered operands: an index present in both gets the sum,
    kept only if its magnitude is at least `thresh`; an index present in one is copied."""
    a_shape, b_shape = (np.asarray(s, np.int64).reshape(-1) for s in (a_shape, b_shape))
    if a_shape.shape != b_shape.shape or (a_shape != b_shape).any():
        raise _invalid(
            f"Operands do not have the same ranks; got shapes: {_fmt(a_shape)} and {_fmt(b_shape)}"
        )
    lin_a = linear_index(a_indices, a_shape, "a_indices")
    lin_b = linear_index(b_indices, b_shape, "b_indices")
    lin = np.concatenate([lin_a, lin_b])
    pos, first, inverse = np.unique(lin, return_index=True, return_inverse=True)
    sums = np.zeros(len(pos), a_values.dtype)
    np.add.at(sums, inverse.reshape(-1), np.concatenate([a_values, b_values]))
    in_both = np.isin(pos, lin_a) & np.isin(pos, lin_b)
    keep = ~in_both | (np.abs(sums) >= thresh)
    all_indices = np.concatenate([np.asarray(a_indices, np.int64), np.asarray(b_indices, np.int64)])
    return all_indices[first[keep]].reshape(-1, a_shape.size), sums[keep], a_shape


def _positions(entries: np.ndarray, within: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of `entries`, its row number in `within` and whether it is there."""
    if len(within) == 0 or len(entries) == 0:
        return np.zeros(len(entries), np.int64), np.zeros(len(entries), bool)
    both = np.concatenate([entries, within])
    dims = both.max(axis=0) + 1
    key_in, key = linear_index(entries, dims), linear_index(within, dims)
    order = np.argsort(key, kind="stable")
    at = np.clip(np.searchsorted(key[order], key_in), 0, len(key) - 1)
    return order[at], key[order][at] == key_in


@register_kernel("SparseAddGrad")
def sparse_add_grad(ctx, backprop_val_grad, a_indices, b_indices, sum_indices):
    out = []
    for ind in (a_indices, b_indices):
        where, found = _positions(np.asarray(ind, np.int64), np.asarray(sum_indices, np.int64))
        g = np.zeros(len(ind), backprop_val_grad.dtype)
        g[found] = backprop_val_grad[where[found]]
        out.append(g)
    return tuple(out)


@register_kernel("SparseReshape")
def sparse_reshape(ctx, input_indices, input_shape, new_shape):
    shape = np.asarray(input_shape, np.int64).reshape(-1)
    new = np.asarray(new_shape, np.int64).reshape(-1).copy()
    total = int(np.prod(shape))
    unknown = np.flatnonzero(new == -1)
    if len(unknown) > 1:
        raise _invalid(
            f"only one output dimension may be -1, not both {unknown[0]} and {unknown[1]}"
        )
    if (new < -1).any():
        raise _invalid(f"size {int(new[np.argmax(new < -1)])} must be non-negative")
    known = int(np.prod(np.delete(new, unknown)))
    if len(unknown):
        if known == 0 or total % known:
            raise _invalid(
                f"Input to reshape is a SparseTensor with {total} dense values, but the "
                f"requested shape requires a multiple of {known}"
            )
        new[unknown[0]] = total // known
    if int(np.prod(new)) != total:
        raise _invalid(
            f"Input to reshape is a tensor with {total} dense values, but the requested shape "
            f"has {int(np.prod(new))}"
        )
    lin = linear_index(input_indices, shape, "input_indices")
    out = np.stack(np.unravel_index(lin, new), axis=1) if new.size else lin[:, None][:, :0]
    return out.astype(np.int64).reshape(len(lin), new.size), new


@register_kernel("SparseFillEmptyRows")
def sparse_fill_empty_rows(ctx, indices, values, dense_shape, default_value):
    shape = np.asarray(dense_shape, np.int64).reshape(-1)
    if np.ndim(default_value) != 0:
        raise _invalid(f"default_value must be a scalar, saw: {list(np.shape(default_value))}")
    if shape.size == 0:
        raise _invalid("dense_shape must not be a scalar (rank 0)")
    indices = np.asarray(indices, np.int64).reshape(-1, shape.size)
    linear_index(indices, shape, "indices")
    rows = int(shape[0])
    counts = np.bincount(indices[:, 0], minlength=rows) if len(indices) else np.zeros(rows, int)
    empty = counts == 0
    # Entries ordered by row, the inserted default entry of an empty row at its row's place.
    new_rows = np.flatnonzero(empty)
    row_of = np.concatenate([indices[:, 0], new_rows])
    order = np.argsort(row_of, kind="stable")
    fill = np.zeros((len(new_rows), shape.size), np.int64)
    fill[:, 0] = new_rows
    out_indices = np.concatenate([indices, fill])[order]
    fill_values = np.full(len(new_rows), default_value, values.dtype)
    out_values = np.concatenate([values, fill_values])[order]
    reverse = np.empty(len(order), np.int64)
    reverse[order] = np.arange(len(order))
    return out_indices, out_values, empty, reverse[: len(indices)]


@register_kernel("SparseFillEmptyRowsGrad")
def sparse_fill_empty_rows_grad(ctx, reverse_index_map, grad_values):
    d_values = grad_values[reverse_index_map]
    used = np.zeros(len(grad_values), bool)
    used[reverse_index_map] = True
    return d_values, grad_values[~used].sum(dtype=grad_values.dtype)


@register_kernel("SparseSplit")
def sparse_split(ctx, split_dim, indices, values, shape):
    shape = np.asarray(shape, np.int64).reshape(-1)
    n = ctx.attrs["num_split"]
    dim = int(split_dim)
    if not -shape.size <= dim < shape.size:
        raise _invalid(
            f"Input split_dim should be between {-shape.size} and {shape.size}, got {dim}"
        )
    dim %= shape.size
    size = int(shape[dim])
    if n > size:
        raise _invalid(f"Input num_split should be between 1 and {size}, got {n}")
    # TF's split sizes: size // n each, the first size % n pieces one larger.
    sizes = np.full(n, size // n) + (np.arange(n) < size % n)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    indices = np.asarray(indices, np.int64).reshape(-1, shape.size)
    piece = np.searchsorted(starts, indices[:, dim], side="right") - 1
    out_ind, out_val, out_shape = [], [], []
    for k in range(n):  # a loop over the pieces, not the entries
        mine = piece == k
        ind = indices[mine].copy()
        ind[:, dim] -= starts[k]
        s = shape.copy()
        s[dim] = sizes[k]
        out_ind.append(ind)
        out_val.append(values[mine])
        out_shape.append(s)
    return tuple(out_ind + out_val + out_shape)


def _cwise(fn):
    def kernel(ctx, sp_indices, sp_values, sp_shape, dense):
        shape = np.asarray(sp_shape, np.int64).reshape(-1)
        if dense.ndim > shape.size or any(
            d not in (1, s) for d, s in zip(dense.shape[::-1], shape[::-1])
        ):
            raise _invalid(
                f"SparseDenseBinaryOpShared broadcasts dense to sparse only; got incompatible "
                f"shapes: [{_fmt(shape)}] vs. [{list(dense.shape)}]"
            )
        full = np.broadcast_to(dense, tuple(shape)).reshape(-1)
        return fn(sp_values, full[linear_index(sp_indices, shape, "sp_indices")])

    return kernel


register_kernel("SparseDenseCwiseMul")(_cwise(np.multiply))
register_kernel("SparseDenseCwiseAdd")(_cwise(np.add))


def _divide(x, y):
    if x.dtype.kind in "iu":
        if (y == 0).any():
            raise _invalid("Integer division by zero")
        return (np.abs(x) // np.abs(y) * np.sign(x) * np.sign(y)).astype(x.dtype)  # truncates
    return np.divide(x, y)


register_kernel("SparseDenseCwiseDiv")(_cwise(_divide))

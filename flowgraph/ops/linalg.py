"""Matrix ops (Table 1 "Matrix operations"): products, inverses, determinants, Cholesky,
solves, diagonals and bands, with TF1's signatures.

`__all__` holds TF1's top-level names (`tf.matmul`, `tf.matrix_inverse`, `tf.diag`, ...);
`LINALG` maps the `tf.linalg.*` names onto the same functions (`tf.linalg.inv`,
`tf.linalg.det`, ...). Note that `tf.diag` is the rank-doubling Diag op while `tf.linalg.diag`
is MatrixDiag, as in TensorFlow.
"""

from __future__ import annotations

import numbers

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import constant, constant_value, convert_to_tensor
from flowgraph.ops import math as math_ops
from flowgraph.ops import reduction
from flowgraph.ops.math import name_scope

__all__ = [
    "cholesky",
    "diag",
    "diag_part",
    "eye",
    "matmul",
    "matrix_band_part",
    "matrix_determinant",
    "matrix_diag",
    "matrix_diag_part",
    "matrix_inverse",
    "matrix_set_diag",
    "matrix_solve",
    "matrix_transpose",
    "matrix_triangular_solve",
    "qr",
    "tensordot",
    "trace",
]


def _op(op_type, inputs, name=None, **attrs):
    return apply_op(op_type, inputs, name=name, **attrs).outputs[0]


def matmul(
    a,
    b,
    transpose_a=False,
    transpose_b=False,
    adjoint_a=False,
    adjoint_b=False,
    a_is_sparse=False,
    b_is_sparse=False,
    name=None,
):
    """The matrix product a @ b: MatMul for matrices, BatchMatMulV2 (batch dims broadcast) when
    either input has rank > 2 or unknown rank. `adjoint_*` also conjugates; `*_is_sparse` are
    hints that select no other algorithm here (BLAS is used either way).

    Example: tf.matmul(x, w, transpose_b=True)
    """
    if transpose_a and adjoint_a:
        raise ValueError("Only one of transpose_a and adjoint_a can be True.")
    if transpose_b and adjoint_b:
        raise ValueError("Only one of transpose_b and adjoint_b can be True.")
    with name_scope(name, "MatMul", [a, b]) as scope:
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, name="b", preferred_dtype=a.dtype.base_dtype)
        ranks = (a.shape.ndims, b.shape.ndims)
        if None in ranks or max(ranks) > 2:
            # BatchMatMul has only adjoints: transpose == adjoint of the conjugate.
            if transpose_a:
                a, adjoint_a = math_ops.conj(a), True
            if transpose_b:
                b, adjoint_b = math_ops.conj(b), True
            return _op("BatchMatMulV2", [a, b], scope, adj_x=adjoint_a, adj_y=adjoint_b)
        if adjoint_a:
            a, transpose_a = math_ops.conj(a), True
        if adjoint_b:
            b, transpose_b = math_ops.conj(b), True
        return _op("MatMul", [a, b], scope, transpose_a=transpose_a, transpose_b=transpose_b)


# -- tensordot ------------------------------------------------------------------------------
def _tensordot_axes(axes, rank_a: int, rank_b: int) -> tuple[list, list]:
    if isinstance(axes, numbers.Integral) or (isinstance(axes, np.ndarray) and axes.ndim == 0):
        n = int(axes)
        if n < 0:
            raise ValueError(f"'axes' must be at least 0, got {n}.")
        if n > rank_a or n > rank_b:
            raise ValueError(
                f"'axes' must not be larger than the number of dimensions of tensor: {n}"
            )
        return list(range(rank_a - n, rank_a)), list(range(n))
    if isinstance(axes, (list, tuple, np.ndarray)) and len(axes) == 2:
        a_axes, b_axes = axes
        a_axes = [int(a_axes)] if np.ndim(a_axes) == 0 else [int(i) for i in a_axes]
        b_axes = [int(b_axes)] if np.ndim(b_axes) == 0 else [int(i) for i in b_axes]
        if len(a_axes) != len(b_axes):
            raise ValueError(
                f"Different number of contraction axes 'a' and 'b', {len(a_axes)} != {len(b_axes)}."
            )
        return [i % rank_a for i in a_axes], [i % rank_b for i in b_axes]
    raise ValueError(f"'axes' must be an integer or have length 2, got {axes!r}.")


def _flatten_for_matmul(x, axes: list, contract_first: bool):
    """Transposes x so the contracted axes come last (or first) and reshapes it to a matrix;
    returns (matrix, static free dims, free dims tensor or None)."""
    rank = x.shape.ndims
    free = [i for i in range(rank) if i not in axes]
    perm = axes + free if contract_first else free + axes
    dims = x.shape.as_list()
    free_dims = [dims[i] for i in free]
    if perm != list(range(rank)):
        x = _op("Transpose", [x, constant(np.array(perm, np.int32))])
    if x.shape.is_fully_defined():
        prod_free = int(np.prod(free_dims, dtype=np.int64))
        prod_axes = int(np.prod([dims[i] for i in axes], dtype=np.int64))
        shape = [prod_axes, prod_free] if contract_first else [prod_free, prod_axes]
        return _op("Reshape", [x, constant(np.array(shape, np.int32))]), free_dims, None
    full = _op("Shape", [x])
    n_axes = len(axes)
    split = n_axes if contract_first else len(free)
    head = _op("StridedSlice", [full, [0], [split], [1]])
    tail = _op("StridedSlice", [full, [split], [rank], [1]])
    head_prod = reduction.reduce_prod(head, axis=[0], keepdims=True)
    tail_prod = reduction.reduce_prod(tail, axis=[0], keepdims=True)
    matrix_shape = _op("ConcatV2", [[head_prod, tail_prod], 0])
    free_tensor = tail if contract_first else head
    return _op("Reshape", [x, matrix_shape]), free_dims, free_tensor


def tensordot(a, b, axes, name=None):
    """Sums a * b over the given axes: `axes=n` contracts a's last n with b's first n axes;
    `axes=[a_axes, b_axes]` names them. Built from Transpose, Reshape and MatMul.

    Example: tf.tensordot(x, w, axes=[[2], [0]])  # [B, T, D] x [D, K] -> [B, T, K]
    """
    with name_scope(name, "Tensordot", [a, b]) as scope:
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, name="b", preferred_dtype=a.dtype.base_dtype)
        if a.shape.ndims is None or b.shape.ndims is None:
            raise ValueError("tensordot needs inputs of known rank")
        a_axes, b_axes = _tensordot_axes(axes, a.shape.ndims, b.shape.ndims)
        a_mat, a_free, a_free_t = _flatten_for_matmul(a, a_axes, contract_first=False)
        b_mat, b_free, b_free_t = _flatten_for_matmul(b, b_axes, contract_first=True)
        product = _op("MatMul", [a_mat, b_mat])
        if a_free_t is None and b_free_t is None:
            shape = constant(np.array(a_free + b_free, np.int32))
        else:
            parts = [
                t if t is not None else constant(np.array(d, np.int32))
                for t, d in ((a_free_t, a_free), (b_free_t, b_free))
            ]
            shape = _op("ConcatV2", [parts, 0])
        out = _op("Reshape", [product, shape], scope)
        out.set_shape(a_free + b_free)
        return out


# -- inverses, determinants, decompositions, solves ---------------------------------------------
def matrix_inverse(input, adjoint=False, name=None):
    """The inverse of each square matrix in [..., M, M] (of its adjoint if `adjoint`); a
    singular matrix fails at run time with InvalidArgumentError."""
    return _op("MatrixInverse", [input], name, adjoint=adjoint)


def matrix_determinant(input, name=None):
    """The determinant of each square matrix in [..., M, M]; the result has shape [...]."""
    return _op("MatrixDeterminant", [input], name)


def slogdet(input, name=None):
    """(sign, log|det|) of each square matrix, without overflow for large determinants."""
    return apply_op("LogMatrixDeterminant", [input], name=name).outputs


def logdet(matrix, name=None):
    """log(det(matrix)) of Hermitian positive-definite matrices, via Cholesky."""
    with name_scope(name, "logdet", [matrix]) as scope:
        chol = cholesky(matrix)
        log_diag = math_ops.log(math_ops.real(matrix_diag_part(chol)))
        total = reduction.reduce_sum(log_diag, axis=[-1])
        return math_ops.multiply(constant(2, dtype=total.dtype), total, name=scope)


def cholesky(input, name=None):
    """The lower-triangular L with L @ L^H = input, for Hermitian positive-definite matrices
    (only the lower triangle is read); otherwise InvalidArgumentError at run time."""
    return _op("Cholesky", [input], name)


def matrix_solve(matrix, rhs, adjoint=False, name=None):
    """X with matrix @ X = rhs (adjoint(matrix) @ X = rhs if `adjoint`), batched."""
    return _op("MatrixSolve", [matrix, rhs], name, adjoint=adjoint)


def matrix_triangular_solve(matrix, rhs, lower=True, adjoint=False, name=None):
    """X with matrix @ X = rhs using only the lower (or upper) triangle of `matrix`."""
    return _op("MatrixTriangularSolve", [matrix, rhs], name, lower=lower, adjoint=adjoint)


# -- diagonals and bands ------------------------------------------------------------------------
def diag(diagonal, name=None):
    """A rank-2k tensor with `diagonal` (rank k) on its diagonal: out[i, j, i, j] = d[i, j]."""
    return _op("Diag", [diagonal], name)


def diag_part(input, name=None):
    """The inverse of `diag`: a rank-2k tensor of shape s + s gives its diagonal of shape s."""
    return _op("DiagPart", [input], name)


def _only_main_diagonal(function: str, **args) -> None:
    """MatrixDiagV2's extra arguments (other diagonals, padding) are not implemented."""
    defaults = {"k": 0, "num_rows": -1, "num_cols": -1, "padding_value": 0}
    for key, value in args.items():
        if not isinstance(value, (numbers.Number, np.ndarray)) or np.any(value != defaults[key]):
            raise errors.UnimplementedError(
                None,
                None,
                f"{function}: argument {key}={value!r} is not supported (only {defaults[key]})",
            )


def matrix_diag(diagonal, name="diag", k=0, num_rows=-1, num_cols=-1, padding_value=0):
    """Batched diagonal matrices: [..., N] -> [..., N, N] with the input on the diagonal."""
    _only_main_diagonal(
        "matrix_diag", k=k, num_rows=num_rows, num_cols=num_cols, padding_value=padding_value
    )
    return _op("MatrixDiag", [diagonal], name)


def matrix_diag_part(input, name="diag_part", k=0, padding_value=0):
    """The main diagonals of a batch of matrices: [..., M, N] -> [..., min(M, N)]."""
    _only_main_diagonal("matrix_diag_part", k=k, padding_value=padding_value)
    return _op("MatrixDiagPart", [input], name)


def matrix_set_diag(input, diagonal, name="set_diag", k=0):
    """A copy of `input` whose main diagonals are replaced by `diagonal` ([..., min(M, N)])."""
    _only_main_diagonal("matrix_set_diag", k=k)
    return _op("MatrixSetDiag", [input, diagonal], name)


def matrix_band_part(input, num_lower, num_upper, name=None):
    """Zeroes everything outside a band: keeps num_lower subdiagonals and num_upper
    superdiagonals (a negative count keeps that whole triangle).

    Example: tf.matrix_band_part(x, -1, 0)  # the lower triangle
    """
    return _op("MatrixBandPart", [input, num_lower, num_upper], name)


def trace(x, name=None):
    """The sum of the main diagonal of each matrix in [..., M, N]."""
    with name_scope(name, "Trace", [x]) as scope:
        return reduction.reduce_sum(matrix_diag_part(x), [-1], name=scope)


def _static_int(value):
    """A Python int from an int or a constant-valued tensor, else None."""
    if isinstance(value, numbers.Integral):
        return int(value)
    known = constant_value(value) if hasattr(value, "op") else None
    return None if known is None or np.ndim(known) else int(known)


def eye(num_rows, num_columns=None, batch_shape=None, dtype=dtypes.float32, name=None):
    """Identity matrices: [*batch_shape, num_rows, num_columns] with ones on the diagonal.

    Example: tf.eye(2, batch_shape=[3])  # three 2x2 identity matrices
    """
    dtype = dtypes.as_dtype(dtype)
    with name_scope(name, "eye", [num_rows, num_columns]) as scope:
        square = num_columns is None
        num_columns = num_rows if square else num_columns
        rows, cols = _static_int(num_rows), _static_int(num_columns)
        batch = [] if batch_shape is None else batch_shape
        batch_static = [_static_int(d) for d in batch] if isinstance(batch, (list, tuple)) else None
        if (
            rows is not None
            and cols is not None
            and batch_static is not None
            and None not in batch_static
        ):
            if rows < 0 or cols < 0:
                raise ValueError("num_rows and num_columns must be non-negative integers.")
            ones = constant(np.ones(batch_static + [min(rows, cols)], dtype.as_numpy_dtype))
            if rows == cols:
                return _op("MatrixDiag", [ones], scope)
            zeros = constant(np.zeros(batch_static + [rows, cols], dtype.as_numpy_dtype))
            return _op("MatrixSetDiag", [zeros, ones], scope)
        # Sizes known only at run time: Fill the ones and zeros from shape tensors.
        rows_t = math_ops.cast(num_rows, dtypes.int32)
        cols_t = math_ops.cast(num_columns, dtypes.int32)
        batch_t = math_ops.cast(
            batch if batch_static != [] else np.zeros(0, np.int32), dtypes.int32
        )
        size = math_ops.minimum(rows_t, cols_t)
        diag_shape = _op("ConcatV2", [[batch_t, _op("Pack", [[size]])], 0])
        ones = _op("Fill", [diag_shape, constant(1, dtype=dtype)])
        if square:
            return _op("MatrixDiag", [ones], scope)
        full_shape = _op("ConcatV2", [[batch_t, _op("Pack", [[rows_t, cols_t]])], 0])
        zeros = _op("Fill", [full_shape, constant(0, dtype=dtype)])
        return _op("MatrixSetDiag", [zeros, ones], scope)


def matrix_transpose(a, name="matrix_transpose", conjugate=False):
    """Swaps the last two axes of a (batch of) matrices; conjugates too if `conjugate`."""
    with name_scope(name, "matrix_transpose", [a]) as scope:
        a = convert_to_tensor(a, name="a")
        rank = a.shape.ndims
        if rank is not None:
            if rank < 2:
                raise ValueError(
                    f"Argument 'a' should be a (batch) matrix, with rank >= 2.  Found: {a.shape}"
                )
            perm = constant(np.array(list(range(rank - 2)) + [rank - 1, rank - 2], np.int32))
        else:
            r = _op("Rank", [a])
            lead = _op("Range", [0, math_ops.subtract(r, 2), 1])
            last = _op("Pack", [[math_ops.subtract(r, 1), math_ops.subtract(r, 2)]])
            perm = _op("ConcatV2", [[lead, last], 0])
        op_type = "ConjugateTranspose" if conjugate and a.dtype.is_complex else "Transpose"
        return _op(op_type, [a, perm], scope)


def adjoint(matrix, name=None):
    """The conjugate transpose of the last two axes."""
    return matrix_transpose(matrix, name=name or "adjoint", conjugate=True)


def qr(input, full_matrices=False, name=None):
    """(q, r) with input = q @ r for each inner matrix: q orthonormal columns, r upper
    triangular."""
    return tuple(apply_op("Qr", [input], name=name, full_matrices=full_matrices).outputs)


LINALG = {  # tf.linalg.<key> -> function
    "matmul": matmul,
    "tensordot": tensordot,
    "inv": matrix_inverse,
    "det": matrix_determinant,
    "slogdet": slogdet,
    "logdet": logdet,
    "cholesky": cholesky,
    "solve": matrix_solve,
    "triangular_solve": matrix_triangular_solve,
    "diag": matrix_diag,
    "diag_part": matrix_diag_part,
    "set_diag": matrix_set_diag,
    "band_part": matrix_band_part,
    "tensor_diag": diag,
    "tensor_diag_part": diag_part,
    "trace": trace,
    "eye": eye,
    "qr": qr,
    "transpose": matrix_transpose,
    "matrix_transpose": matrix_transpose,
    "adjoint": adjoint,
}

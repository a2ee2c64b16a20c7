"""CPU kernels for the matrix row of Table 1: products on BLAS (np.matmul), inverses,
decompositions and solves on LAPACK (np.linalg, scipy.linalg), and diagonal/band helpers.

All of them take `[..., M, N]` batches in one library call; none loops over elements. LAPACK has
no half precision, so float16 is computed in float32 and rounded back, as TF's Eigen kernels do.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import scipy.linalg

from flowgraph.core import dtypes, errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.sharding import parallel_for


def _shape_str(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def _adjoint(m: np.ndarray) -> np.ndarray:
    m = np.swapaxes(m, -1, -2)
    return np.conj(m) if m.dtype.kind == "c" else m


# -- products -----------------------------------------------------------------------------------
@register_kernel("MatMul", intra_op=True)
def matmul(ctx, a, b):
    if np.ndim(a) != 2 or np.ndim(b) != 2:
        raise _invalid(f"In[{0 if np.ndim(a) != 2 else 1}] is not a matrix")
    if ctx.attrs["transpose_a"]:
        a = a.T
    if ctx.attrs["transpose_b"]:
        b = b.T
    if a.shape[1] != b.shape[0]:
        raise _invalid(
            f"Matrix size-incompatible: In[0]: {_shape_str(a.shape)}, In[1]: {_shape_str(b.shape)}"
        )
    return sharded_matmul(ctx, a, b)


# A BLAS product (float, complex) of fewer multiply-adds runs whole on the calling thread: about
# 1 ms of one core. Its blocks would each be a fraction of a millisecond, and a block whose
# thread the OS deschedules (another process on the core, as on any shared machine) holds up
# the whole product for a time slice of several ms. W6b's 256^3 products on 2 cores (load 2.4):
# 49 ms sharded against 43 ms whole, and 80 against 74 ms with a busy core.
MIN_BLAS_SHARD_MACS = 50_000_000
# NumPy's integer products do not use BLAS and cost ~10x more per multiply-add.
_INTEGER_MAC_COST = 10
# Blocks per core, whatever the pool: two, so that a thread slowed by a busy core takes fewer of
# them (as runtime/threadpool.py's SHARDS_PER_THREAD); one where a core's share is long beside
# a time slice of the OS (several ms), which a stalled block then costs in proportion little,
# while every block re-packs the shared operand. One core, CPU time, 2048^3 sgemm in 1, 2, 4
# row blocks: 157.3, 157.1, 159.2 ms; 256x1024x1024 in column blocks: 4.86, 4.93, 5.01 ms.
_CORES = os.cpu_count() or 1
_LONG_SHARE_MACS = 500_000_000  # ~10 ms of one core
# ... but with one block per core a product takes as long as its slowest thread, and threads
# differ: W7 (2048^3 in two row blocks on 2 cores, load 7-12) had blocks of the same work take
# 74 to 89 ms of CPU in one step, and a helper start 0.1 to 7 ms after the caller. So a long
# product keeps 1/TAIL_SHARE of its work for a tail of TAIL_TILES_PER_CORE tiles per core,
# claimed by whichever thread is free first. A tile cuts the band of rows (columns) left over
# across the other dimension, so the tiles together re-pack the shared operand once more and
# each re-packs only its band's part of the other. W7 on 2 cores, 8 fresh processes each,
# interleaved (load 12-14), the gap between the two threads' ends, median (p90) of steps 3-13:
# 2 blocks 6.7 (18.9) ms; a tail of 4 tiles of 128 x 512: 1.6 (4.2) ms, for the same CPU per
# step (163.0 and 162.8 ms); the median of each process' median step 90.1 -> 86.7 ms. A tail of
# 8 tiles of 256 x 256 balanced as well (1.6, p90 2.6 ms) for 1.8 ms more CPU: each tile
# re-packs its band's rows of the other operand, so fewer, wider tiles cost less.
TAIL_SHARE = 16
TAIL_TILES_PER_CORE = 2


def _block_count(n: int, macs: float) -> tuple[int, bool]:
    """(blocks of range(n), whether each core's share is long) for a product of `macs`
    multiply-adds cut along n: 1 below MIN_BLAS_SHARD_MACS."""
    long = macs >= _LONG_SHARE_MACS * _CORES
    return min(n, (1 if long else 2) * _CORES, int(2 * macs // MIN_BLAS_SHARD_MACS)), long


def _cuts(lo: int, hi: int, count: int) -> list[tuple[int, int]]:
    bounds = [lo + (hi - lo) * i // count for i in range(count + 1)]
    return list(itertools.pairwise(bounds))


def _run_tiles(ctx, tiles: list, macs: float, fn) -> None:
    """fn(*tile) for every tile, each once, claimed one at a time in order by the threads of
    the device's pool that take part (the caller included; all inline without a device).
    Whichever thread is free takes the next tile, whatever share of range(len(tiles)) the pool
    handed it, so the pool's grouping of shards never binds a tile to a thread."""
    if len(tiles) == 1:
        fn(*tiles[0])
        return
    claim = itertools.count().__next__  # atomic under the GIL

    def take(lo: int, hi: int) -> None:
        while (i := claim()) < len(tiles):
            fn(*tiles[i])

    parallel_for(ctx, len(tiles), macs / len(tiles), take)


def blas_blocks(ctx, n: int, macs_per_unit: float, fn) -> None:
    """fn(lo, hi) over blocks of range(n) (rows of a product) on the device's pool, each block
    one library call; one call of fn(0, n) below MIN_BLAS_SHARD_MACS.

    The blocks depend only on the work and the machine's core count, never on the pool's size
    or on which of its workers are idle: a product's rounding depends on where its operands are
    cut (OpenBLAS's Haswell sgemm computes the last rows of each call with other micro-kernels;
    runtime/blas.py chooses it), and the same program must give the same bits on every run and
    in constant folding. The threads the pool has free take whole blocks (_run_tiles)."""
    macs = n * macs_per_unit
    blocks, _ = _block_count(n, macs)
    if blocks <= 1:
        fn(0, n)
        return
    _run_tiles(ctx, _cuts(0, n, blocks), macs, fn)


def product_tiles(m: int, n: int, macs: float) -> list[tuple[int, int, int, int]]:
    """(row lo, row hi, column lo, column hi) of each block of an m x n product (`macs`
    multiply-adds), in the order threads claim them: blocks of rows when m >= n, else of
    columns (see sharded_matmul), and for a long product the tail tiles (TAIL_SHARE) last.
    Fixed by the shape and the core count alone (see blas_blocks)."""
    rows = m >= n
    units, other = (m, n) if rows else (n, m)
    blocks, long = _block_count(units, macs)
    pieces = min(TAIL_TILES_PER_CORE * _CORES, other)
    band = units // TAIL_SHARE if long and blocks > 1 and pieces > 1 else 0
    cuts = [(lo, hi, 0, other) for lo, hi in _cuts(0, units - band, max(1, blocks))]
    if band:
        cuts += [(units - band, units, lo, hi) for lo, hi in _cuts(0, other, pieces)]
    return cuts if rows else [(r0, r1, c0, c1) for c0, c1, r0, r1 in cuts]


def sharded_matmul(ctx, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b in blocks on the device's pool (`product_tiles`), one BLAS call per block writing
    its part of the result in place. BLAS packs the operand a block shares again for every
    block, so the split runs along the larger operand: blocks of rows of `a` when it has more
    rows than `b` has columns (each block re-packs `b`), else blocks of columns of `b` (each
    re-packs `a`). Measured on one core, 4 blocks: 256x784 @ 784x1024 in row blocks 5.1 ms,
    column blocks 4.4 ms, whole 4.3 ms; LeNet's fc1 (64x3136 @ 3136x1024) 8.9, 5.3 and 5.2 ms."""
    m, k = a.shape
    n = b.shape[1]
    dtype = np.result_type(a, b)
    macs = m * k * n * (1 if dtype.kind in "fc" else _INTEGER_MAC_COST)
    if macs < MIN_BLAS_SHARD_MACS:  # skip the blocks' bookkeeping
        return np.matmul(a, b)
    out = np.empty((m, n), dtype)

    def tile(r0: int, r1: int, c0: int, c1: int) -> None:
        np.matmul(a[r0:r1], b[:, c0:c1], out=out[r0:r1, c0:c1])

    _run_tiles(ctx, product_tiles(m, n, macs), macs, tile)
    return out


def _batch_matmul(broadcast: bool):
    def kernel(ctx, x, y):
        for i, m in enumerate((x, y)):
            if np.ndim(m) < 2:
                raise _invalid(f"In[{i}] ndims must be >= 2: {np.ndim(m)}")
        if ctx.attrs["adj_x"]:
            x = _adjoint(x)
        if ctx.attrs["adj_y"]:
            y = _adjoint(y)
        if x.shape[-1] != y.shape[-2]:
            raise _invalid(
                f"In[0] mismatch In[1] shape: {x.shape[-1]} vs. {y.shape[-2]}: "
                f"{_shape_str(x.shape)} {_shape_str(y.shape)}"
            )
        if not broadcast and x.shape[:-2] != y.shape[:-2]:
            raise _invalid(
                f"In[0] and In[1] must have the same batch dimensions: "
                f"{_shape_str(x.shape)} vs. {_shape_str(y.shape)}"
            )
        try:
            return _sharded_batch_matmul(ctx, x, y)
        except ValueError:
            raise _invalid(
                f"In[0] and In[1] must have compatible batch dimensions: "
                f"{_shape_str(x.shape)} vs. {_shape_str(y.shape)}"
            ) from None

    return kernel


def _sharded_batch_matmul(ctx, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """np.matmul of [..., M, K] by [..., K, N] with the (broadcast) batch in blocks on the
    device's pool; a single matrix is split by rows instead."""
    batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    count = int(np.prod(batch))
    if count <= 1:
        if x.ndim == 2 and y.ndim == 2:
            return sharded_matmul(ctx, x, y)
        return np.matmul(x, y)
    m, k, n = x.shape[-2], x.shape[-1], y.shape[-1]
    x = np.broadcast_to(x, (*batch, m, k)).reshape(count, m, k)
    y = np.broadcast_to(y, (*batch, k, n)).reshape(count, k, n)
    out = np.empty((count, m, n), np.result_type(x, y))

    def blocks(lo: int, hi: int) -> None:
        np.matmul(x[lo:hi], y[lo:hi], out=out[lo:hi])

    parallel_for(ctx, count, m * k * n, blocks)
    return out.reshape(*batch, m, n)


register_kernel("BatchMatMul", intra_op=True)(_batch_matmul(broadcast=False))
register_kernel("BatchMatMulV2", intra_op=True)(_batch_matmul(broadcast=True))


# -- inverses, determinants, decompositions, solves ---------------------------------------------
def _lapack(x: np.ndarray) -> np.ndarray:
    """The input in a type LAPACK computes in (float16 -> float32)."""
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _check_square(x, what: str = "Input") -> None:
    if np.ndim(x) < 2:
        raise _invalid(f"{what} must have rank >= 2, got {np.ndim(x)}")
    if x.shape[-1] != x.shape[-2]:
        raise _invalid(f"{what} matrix must be square, got {_shape_str(x.shape)}")


@register_kernel("MatrixInverse", expensive=True)
def matrix_inverse(ctx, x):
    _check_square(x)
    a = _lapack(x)
    if ctx.attrs["adjoint"]:
        a = _adjoint(a)
    try:
        return np.linalg.inv(a).astype(x.dtype, copy=False)
    except np.linalg.LinAlgError:
        raise _invalid("Input is not invertible.") from None


@register_kernel("MatrixDeterminant", expensive=True)
def matrix_determinant(ctx, x):
    _check_square(x)
    return np.asarray(np.linalg.det(_lapack(x))).astype(x.dtype, copy=False)


@register_kernel("LogMatrixDeterminant", expensive=True)
def log_matrix_determinant(ctx, x):
    _check_square(x)
    sign, logdet = np.linalg.slogdet(_lapack(x))
    return np.asarray(sign).astype(x.dtype), np.asarray(logdet).astype(x.dtype)


@register_kernel("Cholesky", expensive=True)
def cholesky(ctx, x):
    """Reads only the lower triangle, like TF; a non positive-definite input is an error."""
    _check_square(x)
    try:
        return np.linalg.cholesky(_lapack(x)).astype(x.dtype, copy=False)
    except np.linalg.LinAlgError:
        raise _invalid(
            "Cholesky decomposition was not successful. The input might not be valid."
        ) from None


def _check_solve(matrix, rhs) -> None:
    _check_square(matrix)
    if np.ndim(rhs) != np.ndim(matrix):
        raise _invalid(
            f"Input matrix and right-hand side must have the same rank, got "
            f"{np.ndim(matrix)} != {np.ndim(rhs)}"
        )
    if matrix.shape[:-2] != rhs.shape[:-2]:
        raise _invalid(
            f"All input tensors must have the same outer dimensions: "
            f"{_shape_str(matrix.shape)} vs. {_shape_str(rhs.shape)}"
        )
    if matrix.shape[-1] != rhs.shape[-2]:
        raise _invalid(
            f"Input matrix and right-hand side must have the same number of rows: "
            f"{matrix.shape[-1]} vs. {rhs.shape[-2]}"
        )


@register_kernel("MatrixSolve", expensive=True)
def matrix_solve(ctx, matrix, rhs):
    _check_solve(matrix, rhs)
    a = _lapack(matrix)
    if ctx.attrs["adjoint"]:
        a = _adjoint(a)
    try:
        return np.linalg.solve(a, _lapack(rhs)).astype(rhs.dtype, copy=False)
    except np.linalg.LinAlgError:
        raise _invalid("Input matrix is not invertible.") from None


@register_kernel("MatrixTriangularSolve", expensive=True)
def matrix_triangular_solve(ctx, matrix, rhs):
    """Uses only the lower (or upper) triangle of `matrix`; the rest is ignored, as in TF."""
    _check_solve(matrix, rhs)
    if matrix.shape[-1] and not np.all(np.diagonal(matrix, axis1=-2, axis2=-1)):
        raise _invalid("Input matrix is not invertible.")
    if matrix.size == 0 or rhs.size == 0:
        return np.zeros(rhs.shape, rhs.dtype)
    out = scipy.linalg.solve_triangular(
        _lapack(matrix),
        _lapack(rhs),
        lower=ctx.attrs["lower"],
        trans="C" if ctx.attrs["adjoint"] else "N",
        check_finite=False,
    )
    return out.astype(rhs.dtype, copy=False)


# -- diagonals and bands ------------------------------------------------------------------------
_POD = dtypes.NUMERIC + (dtypes.bool_,)


@register_kernel("Diag")
def diag(ctx, d):
    """A rank-k diagonal becomes a rank-2k tensor with `d` on its (multi-index) diagonal."""
    d = np.asarray(d)
    n = d.size
    out = np.zeros((n, n), d.dtype)
    out[np.arange(n), np.arange(n)] = d.reshape(-1)
    return out.reshape(d.shape + d.shape)


@register_kernel("DiagPart")
def diag_part(ctx, x):
    x = np.asarray(x)
    k = x.ndim // 2
    if x.ndim == 0 or x.ndim % 2 or x.shape[:k] != x.shape[k:]:
        raise _invalid(
            f"Invalid shape {_shape_str(x.shape)}: dimensions i and i + rank/2 must match"
        )
    n = int(np.prod(x.shape[:k], dtype=np.int64))
    return x.reshape(n, n).diagonal().reshape(x.shape[:k]).copy()


@register_kernel("MatrixDiag", dtypes_=_POD)
def matrix_diag(ctx, d):
    d = np.asarray(d)
    if d.ndim < 1:
        raise _invalid("diagonal must be at least 1-dim, got a scalar")
    n = d.shape[-1]
    out = np.zeros(d.shape + (n,), d.dtype)
    idx = np.arange(n)
    out[..., idx, idx] = d
    return out


@register_kernel("MatrixDiagPart", dtypes_=_POD)
def matrix_diag_part(ctx, x):
    if np.ndim(x) < 2:
        raise _invalid(f"input must be at least 2-dim, received shape: {_shape_str(np.shape(x))}")
    return np.diagonal(x, axis1=-2, axis2=-1).copy()


@register_kernel("MatrixSetDiag", dtypes_=_POD)
def matrix_set_diag(ctx, x, d):
    if np.ndim(x) < 2:
        raise _invalid(f"input must be at least 2-dim, received shape: {_shape_str(np.shape(x))}")
    k = min(x.shape[-2:])
    want = x.shape[:-2] + (k,)
    if np.shape(d) != want:
        raise _invalid(
            f"diagonal must have shape {_shape_str(want)}, got {_shape_str(np.shape(d))}"
        )
    out = np.array(x, copy=True)
    idx = np.arange(k)
    out[..., idx, idx] = d
    return out


@register_kernel("MatrixBandPart", dtypes_=_POD)
def matrix_band_part(ctx, x, num_lower, num_upper):
    """Keeps entries with i - j <= num_lower and j - i <= num_upper (negative: keep that half)."""
    if np.ndim(x) < 2:
        raise _invalid(f"input must be at least 2-dim, received shape: {_shape_str(np.shape(x))}")
    m, n = x.shape[-2:]
    lower, upper = int(num_lower), int(num_upper)
    if lower > m:
        raise _invalid(
            f"num_lower must be negative or less or equal to number of rows ({m}) got: {lower}"
        )
    if upper > n:
        raise _invalid(
            f"num_upper must be negative or less or equal to number of columns ({n}) got: {upper}"
        )
    offset = np.arange(m)[:, None] - np.arange(n)[None, :]  # i - j
    keep = np.ones((m, n), bool)
    if lower >= 0:
        keep &= offset <= lower
    if upper >= 0:
        keep &= -offset <= upper
    return np.where(keep, x, np.zeros((), x.dtype))


@register_kernel("Qr", expensive=True)
def qr(ctx, x):
    """QR decomposition of each inner matrix; `full_matrices` selects the complete Q."""
    if np.ndim(x) < 2:
        raise _invalid(f"Input must have rank >= 2, got {np.ndim(x)}")
    q, r = np.linalg.qr(_lapack(x), mode="complete" if ctx.attrs["full_matrices"] else "reduced")
    return q.astype(x.dtype, copy=False), r.astype(x.dtype, copy=False)

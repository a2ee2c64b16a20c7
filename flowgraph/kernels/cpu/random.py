"""CPU kernels for random ops: TensorFlow's own streams (Philox4x32-10, philox.py, converted
by random_distributions.py), so seeded programs print TensorFlow's numbers.

TF shares the kernel of a stateful op among all executors of a Session, so one node draws one
sequence no matter which fetches a run names. Likewise the generator lives in the device's
resource manager (which belongs to one Session) under the node's name, and `ctx.state` caches
it. Seeds (seed, seed2) = (0, 0) mean OS entropy; any other pair makes a fresh Session replay
the same sequence. Each call reserves as many Philox blocks as TF's kernel does, so the second
`Session.run` of a node continues exactly where TF's would."""

from __future__ import annotations

import math
import os

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu import loops
from flowgraph.kernels.cpu import random_distributions as dist
from flowgraph.kernels.cpu.philox import GuardedPhilox
from flowgraph.kernels.sharding import parallel_for

_PHILOX = "_philox_generators"
_FLOATS = [dtypes.float16, dtypes.float32, dtypes.float64]
_PHILOX_FLOATS = [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]
_MASK64 = (1 << 64) - 1
# TF's kernels reserve this many Philox blocks per output value (random_op.cc), an upper bound
# on what rejection sampling may use, so the stream of a call never overlaps the next call's.
RESERVED_BLOCKS_PER_OUTPUT = 256


def philox(ctx) -> GuardedPhilox:
    """The node's Philox generator (one per node and Session), keyed by its seed attrs."""
    if ctx.state is None:
        seed, seed2 = ctx.attrs.get("seed", 0), ctx.attrs.get("seed2", 0)
        ctx.state = ctx.resources.lookup_or_create(
            _PHILOX, ctx.name, lambda: GuardedPhilox(seed, seed2)
        )
    return ctx.state


def _shape(shape) -> tuple:
    shape = np.asarray(shape)
    if shape.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, f"shape must be a vector of {{int32,int64}}, got shape {list(shape.shape)}"
        )
    dims = tuple(shape.tolist())  # Python ints: checked and multiplied without NumPy calls
    if any(d < 0 for d in dims):
        raise errors.InvalidArgumentError(
            None, None, f"Dimension sizes must be non-negative, got {list(dims)}"
        )
    return dims


def _fill(ctx, shape, convert, per_block: int) -> np.ndarray:
    """TF's FillPhiloxRandom: output group g (`per_block` values) comes from block counter + g;
    the call reserves RESERVED_BLOCKS_PER_OUTPUT blocks per value."""
    size = _shape(shape)
    n = int(np.prod(size))
    stream = philox(ctx).reserve_outputs(n, RESERVED_BLOCKS_PER_OUTPUT)
    words = stream.blocks(np.arange(-(-n // per_block))).reshape(-1)
    return convert(words)[:n].reshape(size)


def _per_block(dtype) -> int:
    """Values per Philox block (4 uint32s): two 64-bit values, four narrower ones."""
    return 2 if np.dtype(dtype).itemsize == 8 else 4


# Random mantissa bits of a uniform value, and the type the compiled loop writes it in (exact:
# half and bfloat16 are rounded from float32 without error).
_UNIFORM_BITS = {
    np.dtype(np.float16): (10, np.float32),
    np.dtype(dist.bfloat16): (7, np.float32),
    np.dtype(np.float32): (23, np.float32),
    np.dtype(np.float64): (52, np.float64),
}
# Cost units (kernels/sharding.py) of one Philox block with its conversion: ~5 ns.
_BLOCK_COST = 250


@register_kernel("RandomUniform", dtypes_=_PHILOX_FLOATS, type_attr="dtype")
def random_uniform(ctx, shape):
    """Uniform in [0, 1): random mantissa bits under 1.0's exponent, minus 1 (never 1.0),
    written by one compiled loop from the counters (philox_loops.philox_uniform); a large
    tensor is cut into runs of blocks on the device's pool (value v is always from block
    v // values-per-block, so the numbers do not depend on the cut)."""
    dt = np.dtype(ctx.attrs["dtype"].as_numpy_dtype)
    size = _shape(shape)
    n = math.prod(size)
    stream = philox(ctx).reserve_outputs(n, RESERVED_BLOCKS_PER_OUTPUT)
    bits, loop_dtype = _UNIFORM_BITS[dt]
    out = np.empty(n, loop_dtype)
    per = _per_block(dt)

    def blocks(lo: int, hi: int) -> None:
        stream.uniform(out[lo * per : hi * per], bits, lo)

    parallel_for(ctx, -(-n // per), _BLOCK_COST, blocks)
    return out.astype(dt, copy=False).reshape(size)


@register_kernel("RandomStandardNormal", dtypes_=_PHILOX_FLOATS, type_attr="dtype")
def random_standard_normal(ctx, shape):
    """Box-Muller normals; half and bfloat16 are computed in float32 and rounded, as in TF."""
    dt = np.dtype(ctx.attrs["dtype"].as_numpy_dtype)
    return _fill(ctx, shape, lambda w: dist.normal(w, dt), _per_block(dt))


@register_kernel("TruncatedNormal", dtypes_=_PHILOX_FLOATS, type_attr="dtype")
def truncated_normal(ctx, shape):
    """Standard normals below 2 in magnitude, TF's stream: output groups of four (two for
    double), group g drawing from blocks counter + g * 256 on (TF's FillPhiloxRandomTask for
    variable-sample distributions); half and bfloat16 are drawn in float32 and rounded."""
    dt = np.dtype(ctx.attrs["dtype"].as_numpy_dtype)
    size = _shape(shape)
    n = int(np.prod(size))
    stream = philox(ctx).reserve_outputs(n, RESERVED_BLOCKS_PER_OUTPUT)
    per_group = 2 if dt == np.float64 else 4
    skip = per_group * RESERVED_BLOCKS_PER_OUTPUT // 4  # blocks between group starts
    groups = -(-n // per_group)

    def block_words(group_ids, j):
        return stream.blocks(group_ids.astype(np.int64) * skip + j)

    values = dist.truncated_normal_groups(block_words, groups, per_group, dt)
    return values.reshape(-1)[:n].astype(dt).reshape(size)


@register_kernel("RandomUniformInt", dtypes_=[dtypes.int32, dtypes.int64], type_attr="Tout")
def random_uniform_int(ctx, shape, minval, maxval):
    """Integers uniform in [minval, maxval): TF's stream, the raw bits modulo the range."""
    if np.ndim(minval) or np.ndim(maxval):
        raise errors.InvalidArgumentError(
            None,
            None,
            "minval and maxval must be scalars, got shapes "
            f"{list(np.shape(minval))} and {list(np.shape(maxval))}",
        )
    size = _shape(shape)
    out = np.dtype(ctx.attrs["Tout"].as_numpy_dtype)
    n = int(np.prod(size))
    if n == 0:
        return np.zeros(size, out)
    if minval >= maxval:
        raise errors.InvalidArgumentError(None, None, f"Need minval < maxval: {minval} >= {maxval}")
    lo, hi = int(minval), int(maxval)
    return _fill(ctx, shape, lambda w: dist.uniform_int(w, lo, hi, out), _per_block(out))


@register_kernel("RandomShuffle")
def random_shuffle(ctx, value):
    """A random permutation of `value` along its first dimension: TF's Fisher-Yates over
    n - 1 uint32s of the node's Philox stream (reserved 32 bits at a time)."""
    value = np.asarray(value)
    if value.ndim == 0 or value.shape[0] <= 1:
        return value
    n = value.shape[0]
    words = philox(ctx).reserve32(n - 1).uint32s(n - 1)
    perm = np.arange(n, dtype=np.int64)
    loops.compiled("fisher_yates")(words, perm)
    return value[perm]


def _intra_op_threads(ctx) -> int:
    """The kernel's device's intra-op thread count (the machine's cores by default)."""
    threads = getattr(getattr(ctx, "device", None), "intra_op_threads", 0)
    return int(threads or os.cpu_count() or 1)


def _multinomial_shards(batch: int, samples: int, classes: int, threads: int) -> list:
    """The first rows of the shards TF's Multinomial kernel splits its batch into (Eigen's
    parallelFor cost model over `threads` intra-op threads): each shard draws its rows in order
    from its own place in the stream, so the split decides the numbers."""
    cost = int(50 * (samples * math.log(classes) / math.log(2) + classes)) if classes else 0
    if batch <= 1 or threads <= 1:
        return [0]
    wanted = int((batch * cost - 100000) / 100000 + 0.9)
    if min(threads, max(1, wanted)) == 1:
        return [0]
    block_size_f = 40000 / cost if cost else float(batch)
    block = min(batch, max(-(-batch // (4 * threads)), int(block_size_f)))
    largest = min(batch, 2 * block)
    count = -(-batch // block)

    def efficiency(blocks):
        return blocks / (-(-blocks // threads) * threads)

    best = efficiency(count)
    previous = count
    while best < 1.0 and previous > 1:
        coarser = -(-batch // (previous - 1))
        if coarser > largest:
            break
        coarser_count = -(-batch // coarser)
        previous = coarser_count
        if efficiency(coarser_count) + 0.01 >= best:
            block, count = coarser, coarser_count
            best = max(best, efficiency(coarser_count))
    return list(range(0, batch, block))


@register_kernel("Multinomial", constraints={"T": tuple(dtypes.REAL_NUMBERS)})
def multinomial(ctx, logits, num_samples):
    """For each row of `logits` [batch, classes], `num_samples` class indices drawn from
    softmax(row), TF's stream: a uniform double per sample times the row's unnormalized CDF,
    located by binary search (upper bound); non-finite logits are never drawn."""
    if logits.ndim != 2:
        raise errors.InvalidArgumentError(
            None, None, f"logits should be a matrix, got shape {list(logits.shape)}"
        )
    n = int(num_samples)
    if n < 0:
        raise errors.InvalidArgumentError(None, None, f"num_samples should be nonnegative, got {n}")
    batch, classes = logits.shape
    if classes == 0 and batch * n:
        raise errors.InvalidArgumentError(None, None, "num_classes should be positive, got 0")
    out = ctx.attrs["output_dtype"].as_numpy_dtype
    if batch * n == 0:
        return np.zeros((batch, n), out)
    # TF reserves 256 blocks per output of each row's samples rounded up to 4, doubled on CPU
    # (a double takes two uint32s), then draws one double per sample, row after row (one
    # shard: TF's cost model keeps small batches on one thread; a batch TF splits across
    # threads draws differently there).
    rounded = (n + 3) // 4 * 4 * 2
    stream = philox(ctx).reserve_outputs(batch * rounded, RESERVED_BLOCKS_PER_OUTPUT)
    u = np.empty((batch, n))
    per_row = 2 * n  # uint32s
    starts = _multinomial_shards(batch, n, classes, _intra_op_threads(ctx))
    for first, last in zip(starts, starts[1:] + [batch]):
        skip = first * (n + 3) // 4  # TF skips this many blocks for a shard's first row
        count = (last - first) * per_row
        words = stream.blocks(skip + np.arange(-(-count // 4))).reshape(-1)[:count]
        u[first:last] = dist.uint64_to_double(words[0::2], words[1::2]).reshape(-1, n)
    z = logits.astype(np.float64)
    finite = np.isfinite(z)
    top = np.where(finite, z, -np.inf).max(axis=1, keepdims=True)
    weights = np.where(finite, np.exp(z - top), 0.0)
    cdf = np.cumsum(weights, axis=1)  # unnormalized, as TF's
    to_find = u * cdf[:, -1:]
    samples = np.empty((batch, n), np.int64)
    for row in range(batch):  # one searchsorted per row of samples
        samples[row] = np.searchsorted(cdf[row], to_find[row], side="right")
    return samples.astype(out)


@register_kernel("RandomGamma", dtypes_=_FLOATS)
def random_gamma(ctx, shape, alpha):
    """Gamma(alpha, 1) samples of shape `shape + alpha.shape`, TF's stream: output o (alpha
    by alpha) runs Marsaglia-Tsang (an exponential where alpha is 1) on the blocks from
    counter + 256 * o, each block read as two normals or two uniforms (double) as needed."""
    size = _shape(shape) + alpha.shape
    dt = alpha.dtype
    samples, alphas_n = int(np.prod(_shape(shape))), int(alpha.size)
    n = samples * alphas_n
    stream = philox(ctx).reserve_outputs(n, RESERVED_BLOCKS_PER_OUTPUT)
    if n == 0:
        return np.zeros(size, dt)
    per_output = np.repeat(alpha.reshape(-1).astype(np.float64), samples)  # alpha-major
    values = np.empty(n)
    pending = np.arange(n)
    blocks = 4
    gamma = loops.compiled("gamma")
    while pending.size:
        offsets = pending[:, None] * RESERVED_BLOCKS_PER_OUTPUT + np.arange(blocks)
        words = stream.blocks(offsets.reshape(-1)).reshape(pending.size, blocks, 4)
        normals = np.stack(dist.box_muller_double(*(words[..., i] for i in range(4))), axis=-1)
        uniforms = np.stack(
            [
                dist.uint64_to_double(words[..., 0], words[..., 1]),
                dist.uint64_to_double(words[..., 2], words[..., 3]),
            ],
            axis=-1,
        )
        done = np.empty(pending.size)
        short = gamma(per_output[pending], normals, uniforms, done)
        if short < 0:
            values[pending] = done
            break
        values[pending[:short]] = done[:short]
        pending = pending[short:]
        blocks *= 4
    # output o = a * samples + s goes to flat position s * len(alpha) + a
    out = values.reshape(alphas_n, samples).T.reshape(size)
    return out.astype(dt)


_POISSON_OUT = {
    np.dtype(np.float16): 65504.0,
    np.dtype(np.float32): float(np.finfo(np.float32).max),
    np.dtype(np.float64): float(np.finfo(np.float64).max),
    np.dtype(np.int32): float(2**31 - 1),
    np.dtype(np.int64): float(2**63 - 1),
}


def _poisson(ctx, shape, rate, out_dtype):
    """TF's RandomPoisson stream: output o (rate by rate: o = r * samples + s) draws from its
    own blocks at counter + 256 * o, computed in double (random_distributions.poisson)."""
    size = _shape(shape) + rate.shape
    samples, rates_n = int(np.prod(_shape(shape))), int(rate.size)
    out_dtype = np.dtype(out_dtype)
    if samples == 0:
        return np.zeros(size, out_dtype)
    rates = rate.reshape(-1).astype(np.float64)
    if np.any(np.isnan(rates)):
        raise errors.InvalidArgumentError(
            None, None, "random_poisson: a rate is NaN (TF's rejection loop would never end)"
        )
    stream = philox(ctx).reserve_outputs(samples * rates_n, RESERVED_BLOCKS_PER_OUTPUT)

    def blocks(ids, j):
        return stream.blocks(ids * RESERVED_BLOCKS_PER_OUTPUT + j)

    per_output = np.repeat(rates, samples)
    infinite = per_output == np.inf  # TF writes the type's infinity: inf, or 0 for integers
    per_output[infinite] = 0.0
    values = dist.poisson(blocks, per_output, _POISSON_OUT[out_dtype])
    values[infinite] = np.inf if out_dtype.kind == "f" else 0.0
    out = values.reshape(rates_n, samples).T.reshape(size)
    return out.astype(out_dtype)


@register_kernel("RandomPoissonV2")
def random_poisson(ctx, shape, rate):
    """Poisson(rate) samples of shape `shape + rate.shape`, in the output dtype; a negative
    rate gives 0, as in TF (Knuth's product is below exp(-rate) at once)."""
    return _poisson(ctx, shape, rate, ctx.attrs["dtype"].as_numpy_dtype)

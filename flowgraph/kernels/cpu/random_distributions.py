"""TensorFlow's conversions of Philox uint32s into values (core/lib/random/random_distributions.h),
vectorized: each function maps whole arrays of raw bits to whole arrays of samples.

Uniform floats are built by bit surgery rather than by division: random mantissa bits under the
exponent of 1.0 give a float in [1, 2), and subtracting 1 leaves [0, 1). So a float32 uses 23
bits of a uint32, a half 10 and a bfloat16 7 bits of the low 16, a double 52 bits of two uint32s
(the first is the high word). Normals come from the Box-Muller transform of two such uniforms.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from flowgraph.kernels.cpu import libm

bfloat16 = np.dtype(ml_dtypes.bfloat16)
_U32 = np.uint32
_U64 = np.uint64


def uint32_to_float(x: np.ndarray) -> np.ndarray:
    """float32 in [0, 1) from the low 23 bits of each uint32."""
    bits = (x & _U32(0x7FFFFF)) | _U32(127 << 23)
    return bits.view(np.float32) - np.float32(1.0)


def uint16_to_half(x: np.ndarray) -> np.ndarray:
    """float16 in [0, 1) from the low 10 bits of each uint32 (subtracted in half precision)."""
    bits = ((x & _U32(0x3FF)) | _U32(15 << 10)).astype(np.uint16)
    return bits.view(np.float16) - np.float16(1.0)


def uint16_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """bfloat16 in [0, 1) from the low 7 bits of each uint32 (exact: 1 + k/128 - 1)."""
    bits = ((x & _U32(0x7F)) | _U32(127 << 7)).astype(np.uint16)
    return (bits.view(bfloat16).astype(np.float32) - np.float32(1.0)).astype(bfloat16)


def uint64_to_double(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """float64 in [0, 1) from the low 52 bits of (x0 << 32 | x1): the first word is high."""
    bits = (x0.astype(_U64) << _U64(32)) | x1.astype(_U64)
    bits = (bits & _U64(0xFFFFFFFFFFFFF)) | _U64(1023 << 52)
    return bits.view(np.float64) - 1.0


def uniform(words: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Uniform [0, 1) values from raw uint32s in stream order: one word per value, two per
    double. `words` must hold enough words for the values wanted."""
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return uint64_to_double(words[0::2], words[1::2])
    if dtype == np.float32:
        return uint32_to_float(words)
    if dtype == np.float16:
        return uint16_to_half(words)
    if dtype == bfloat16:
        return uint16_to_bfloat16(words)
    raise TypeError(f"no uniform conversion to {dtype}")


_EPSILON = 1.0e-7
_TWO_PI = 2.0 * np.pi


def box_muller_float(x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two float32 standard normals per pair of uint32s, computed as TF's BoxMullerFloat does:
    u1 = max(uniform(x0), 1e-7), v1 = float(2 * pi * uniform(x1)) (a double product),
    r = sqrt(-2 log u1) in float32, then (r sin v1, r cos v1)."""
    u1 = np.maximum(uint32_to_float(x0), np.float32(_EPSILON))
    v1 = (_TWO_PI * uint32_to_float(x1).astype(np.float64)).astype(np.float32)
    r = np.sqrt(np.float32(-2.0) * libm.log(u1))
    sin, cos = libm.sincos(v1)
    return sin * r, cos * r


def box_muller_double(
    x0: np.ndarray, x1: np.ndarray, x2: np.ndarray, x3: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Two float64 standard normals per four uint32s (TF's BoxMullerDouble)."""
    u1 = np.maximum(uint64_to_double(x0, x1), _EPSILON)
    v1 = _TWO_PI * uint64_to_double(x2, x3)
    r = np.sqrt(-2.0 * libm.log(u1))
    sin, cos = libm.sincos(v1)
    return sin * r, cos * r


def normal(words: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Standard normals from raw uint32s in stream order: a float32 (half, bfloat16: computed
    in float32 and rounded) pair per two words, a double pair per four words."""
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        w = words.reshape(-1, 4)
        pair = box_muller_double(w[:, 0], w[:, 1], w[:, 2], w[:, 3])
    else:
        w = words.reshape(-1, 2)
        pair = box_muller_float(w[:, 0], w[:, 1])
    return np.stack(pair, axis=1).reshape(-1).astype(dtype)


def uniform_int(words: np.ndarray, lo: int, hi: int, dtype: np.dtype) -> np.ndarray:
    """Integers in [lo, hi): lo + (bits mod (hi - lo)), one uint32 per int32 value, a uint64
    of two words (the first low) per int64 value, as TF's UniformDistribution computes it."""
    dtype = np.dtype(dtype)
    if dtype == np.int64:
        bits = words[0::2].astype(_U64) | (words[1::2].astype(_U64) << _U64(32))
        span = _U64((int(hi) - int(lo)) & 0xFFFFFFFFFFFFFFFF)
    else:
        bits = words
        span = _U32((int(hi) - int(lo)) & 0xFFFFFFFF)
    offsets = (bits % span).astype(dtype)  # wraps like TF's static_cast for wide ranges
    with np.errstate(over="ignore"):
        return (offsets + dtype.type(lo)).astype(dtype)


def truncated_normal_groups(block_words, groups: int, per_group: int, dtype: np.dtype):
    """TF's TruncatedNormalDistribution over independent output groups: group g reads the
    uint32s of blocks block_words(g, j) for j = 0, 1, ... in order, turns them into normals by
    Box-Muller (two words per float32 normal pair, four per double pair) and keeps the first
    `per_group` with |x| < 2. Vectorized over groups, a few blocks at a time."""
    wide = np.float64 if dtype == np.float64 else np.float32
    out = np.empty((groups, per_group), wide)
    filled = np.zeros(groups, np.int64)
    pending = np.arange(groups)
    block = 0
    while pending.size:
        words = block_words(pending, block)  # uint32 [len(pending), 4]
        if wide == np.float64:
            pair = box_muller_double(words[:, 0], words[:, 1], words[:, 2], words[:, 3])
        else:
            pair = box_muller_float(
                np.concatenate([words[:, 0:1], words[:, 2:3]], 1).reshape(-1),
                np.concatenate([words[:, 1:2], words[:, 3:4]], 1).reshape(-1),
            )
        values = np.stack(pair, axis=-1).reshape(pending.size, -1)  # stream order
        keep = np.abs(values) < 2.0
        slot = filled[pending, None] + np.cumsum(keep, axis=1) - 1
        take = keep & (slot < per_group)
        rows = np.broadcast_to(pending[:, None], take.shape)[take]
        out[rows, slot[take]] = values[take]
        filled[pending] = np.minimum(filled[pending] + keep.sum(1), per_group)
        pending = pending[filled[pending] < per_group]
        block += 1
    return out


def _uniform_pair(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A block's two doubles in the order TF's Poisson kernel takes them: its UNIFORM macro
    counts down, so the second double (words 2, 3) comes first."""
    return uint64_to_double(words[:, 2], words[:, 3]), uint64_to_double(words[:, 0], words[:, 1])


def poisson(blocks, rates: np.ndarray, highest: float) -> np.ndarray:
    """TF's RandomPoisson samples, in double, for outputs whose rates are `rates`;
    `blocks(ids, j)` gives block j (uint32 [len(ids), 4]) of each output's own stream.

    Rates below 10: Knuth, multiplying uniforms until the product reaches exp(-rate) (two
    uniforms per block). Otherwise Hormann's transformed rejection, one block (u, v) per try.
    Each round is one vectorized step over the outputs still running."""
    rates = rates.astype(np.float64)
    out = np.empty(rates.size)
    knuth = np.flatnonzero(rates < 10)
    if knuth.size:
        _knuth(blocks, knuth, libm.exp(-rates[knuth]), highest, out)
    hormann = np.flatnonzero(~(rates < 10))
    if hormann.size:
        _hormann(blocks, hormann, rates[hormann], highest, out)
    return out


def _knuth(blocks, ids, limit, highest, out):
    prod = np.ones(ids.size)
    x = np.zeros(ids.size)
    live = np.arange(ids.size)  # positions into ids still multiplying
    j = 0
    while live.size:
        pair = _uniform_pair(blocks(ids[live], j))
        rows = np.arange(live.size)  # rows of this block still wanted
        for u in pair:
            prod[live] *= u[rows]
            stop = (prod[live] <= limit[live]) & (x[live] <= highest)
            out[ids[live[stop]]] = x[live[stop]]
            x[live[~stop]] += 1
            live, rows = live[~stop], rows[~stop]
        j += 1


def _hormann(blocks, ids, rate, highest, out):
    """Hormann's PTRD constants per rate, then rounds of (u, v) tries; a try is rejected when
    k is beyond the output type, k < 0, or the squeeze and the exact test both fail."""
    log_rate = libm.log(rate)
    b = 0.931 + 2.53 * np.sqrt(rate)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2.0)
    live = np.arange(ids.size)
    j = 0
    while live.size:
        u, v = _uniform_pair(blocks(ids[live], j))
        u = u - 0.5
        rl, al, bl = rate[live], a[live], b[live]
        us = 0.5 - np.abs(u)
        with np.errstate(divide="ignore", invalid="ignore"):
            k = np.floor((2.0 * al / us + bl) * u + rl + 0.43)
            ok = ~(k > highest)
            quick = ok & (us >= 0.07) & (v <= v_r[live])
            slow = ok & ~quick & ~((k < 0) | ((us < 0.013) & (v > us)))
            take = quick.copy()
            if np.any(slow):
                idx = np.flatnonzero(slow)
                s = libm.log(
                    v[idx] * inv_alpha[live[idx]] / (al[idx] / (us[idx] * us[idx]) + bl[idx])
                )
                t = -rl[idx] + k[idx] * log_rate[live[idx]] - libm.lgamma(k[idx] + 1.0)
                take[idx[s <= t]] = True
        out[ids[live[take]]] = k[take]
        live = live[~take]
        j += 1

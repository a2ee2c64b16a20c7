"""TensorFlow's Philox4x32-10 generator (kernels/cpu/philox.py) as compiled loops (numba;
kernels/cpu/loops.py compiles them): ten rounds of two 32x32->64-bit multiplies per 128-bit
block, which NumPy would run as about 80 whole-array passes (the digits CNN's 8192 dropout
draws: 0.3 ms -> 11 us).

Blocks are computed 256 at a time, each round one loop over them that LLVM vectorizes.
`philox4x32` and `philox4x32_at` return raw words for the distributions that reject or
combine them (random_distributions.py); `philox_uniform` writes uniform floats straight from
the words of consecutive blocks, with no counter array, no word array and no conversion passes
(RandomUniform, the dropout mask's draw).
"""

from __future__ import annotations

import numpy as np

_BLOCKS = 256  # blocks per batch of rounds: four 1 KiB word arrays stay in L1


def _philox_rounds(c0, c1, c2, c3, rows, k0, k1):
    """Philox4x32-10 in place on the first `rows` of four uint32 word arrays under the key
    (k0, k1): each round one loop over the rows, which LLVM vectorizes (32x32->64-bit
    multiplies in SIMD lanes), not a loop that runs the ten rounds of a row in registers
    (the digits CNN's 2048 dropout blocks: 28 -> 11 us)."""
    m0, m1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    w0, w1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
    shift = np.uint64(32)
    key0, key1 = np.uint32(k0), np.uint32(k1)
    for _ in range(10):
        for i in range(rows):
            p0 = np.uint64(c0[i]) * m0
            p1 = np.uint64(c2[i]) * m1
            x0 = np.uint32(p1 >> shift) ^ c1[i] ^ key0
            x2 = np.uint32(p0 >> shift) ^ c3[i] ^ key1
            c1[i], c3[i] = np.uint32(p1), np.uint32(p0)
            c0[i], c2[i] = x0, x2
        key0 = np.uint32(key0 + w0)
        key1 = np.uint32(key1 + w1)


def _counter_words(base, offset):
    """The four uint32 words (least significant first) of the 128-bit counter base + offset
    (base: uint32 [4]; offset: int64 >= 0), added mod 2**128: the low 64 bits wrap and carry."""
    low, shift = np.uint64(0xFFFFFFFF), np.uint64(32)
    base_lo = np.uint64(base[0]) | (np.uint64(base[1]) << shift)
    base_hi = np.uint64(base[2]) | (np.uint64(base[3]) << shift)
    word_lo = base_lo + np.uint64(offset)  # wraps mod 2**64
    word_hi = base_hi + np.uint64(word_lo < base_lo)  # and carries
    return (
        np.uint32(word_lo & low),
        np.uint32(word_lo >> shift),
        np.uint32(word_hi & low),
        np.uint32(word_hi >> shift),
    )


def _philox4x32(counters, k0, k1, out):
    """Philox4x32-10 of each row of `counters` (uint32 [n, 4]) under the key (k0, k1)."""
    c0, c1 = np.empty(_BLOCKS, np.uint32), np.empty(_BLOCKS, np.uint32)
    c2, c3 = np.empty(_BLOCKS, np.uint32), np.empty(_BLOCKS, np.uint32)
    for lo in range(0, counters.shape[0], _BLOCKS):
        rows = min(_BLOCKS, counters.shape[0] - lo)
        for i in range(rows):
            c0[i], c1[i] = counters[lo + i, 0], counters[lo + i, 1]
            c2[i], c3[i] = counters[lo + i, 2], counters[lo + i, 3]
        _philox_rounds(c0, c1, c2, c3, rows, k0, k1)
        for i in range(rows):
            out[lo + i, 0], out[lo + i, 1] = c0[i], c1[i]
            out[lo + i, 2], out[lo + i, 3] = c2[i], c3[i]


def _philox4x32_at(base, offsets, k0, k1, out):
    """`_philox4x32` of the 128-bit counters base + offsets[i] (base: uint32 [4], word 0 least
    significant; offsets: int64 >= 0), added in the loop instead of as ~10 NumPy passes over
    uint64 arrays (20 us for 2048 counters)."""
    c0, c1 = np.empty(_BLOCKS, np.uint32), np.empty(_BLOCKS, np.uint32)
    c2, c3 = np.empty(_BLOCKS, np.uint32), np.empty(_BLOCKS, np.uint32)
    for lo in range(0, offsets.shape[0], _BLOCKS):
        rows = min(_BLOCKS, offsets.shape[0] - lo)
        for i in range(rows):
            c0[i], c1[i], c2[i], c3[i] = _counter_words(base, offsets[lo + i])
        _philox_rounds(c0, c1, c2, c3, rows, k0, k1)
        for i in range(rows):
            out[lo + i, 0], out[lo + i, 1] = c0[i], c1[i]
            out[lo + i, 2], out[lo + i, 3] = c2[i], c3[i]


def _philox_uniform(base, start, k0, k1, mask, scale, out):
    """out[v] = the v-th uniform value in [0, 1) of the blocks at counters base + start,
    base + start + 1, ... (1-D `out`, float32 or float64). A float32 takes one word, in block
    order: (word & mask) * scale; a float64 two, the first the high one: (bits & mask) * scale.
    With mask = 2**m - 1 and scale = 2**-m that is exactly TF's bit surgery (the m random
    mantissa bits under 1.0's exponent, minus 1: the difference 1.f - 1 is exact), m = 23 for
    float32 (10 for half, 7 for bfloat16, rounded from float32 exactly), 52 for float64."""
    per = 2 if out.itemsize == 8 else 4  # values per block
    value = out.dtype.type  # int64 -> out's dtype, multiplied in it (scale is out's dtype)
    n = out.size
    shift = np.uint64(32)
    low, wide = np.uint32(mask), np.uint64(mask)
    c0, c1 = np.empty(_BLOCKS, np.uint32), np.empty(_BLOCKS, np.uint32)
    c2, c3 = np.empty(_BLOCKS, np.uint32), np.empty(_BLOCKS, np.uint32)
    blocks = (n + per - 1) // per
    for lo in range(0, blocks, _BLOCKS):
        rows = min(_BLOCKS, blocks - lo)
        for i in range(rows):
            c0[i], c1[i], c2[i], c3[i] = _counter_words(base, start + lo + i)
        _philox_rounds(c0, c1, c2, c3, rows, k0, k1)
        first = lo * per
        full = min(rows, (n - first) // per)  # blocks whose every value is wanted
        if per == 4:
            for i in range(full):
                v = first + 4 * i
                out[v] = value(np.int64(c0[i] & low)) * scale
                out[v + 1] = value(np.int64(c1[i] & low)) * scale
                out[v + 2] = value(np.int64(c2[i] & low)) * scale
                out[v + 3] = value(np.int64(c3[i] & low)) * scale
        else:
            for i in range(full):
                v = first + 2 * i
                out[v] = value(np.int64(((np.uint64(c0[i]) << shift) | c1[i]) & wide)) * scale
                out[v + 1] = value(np.int64(((np.uint64(c2[i]) << shift) | c3[i]) & wide)) * scale
        if full < rows:  # the last block: the values wanted of it
            words = (c0[full], c1[full], c2[full], c3[full])
            for k in range(n - first - full * per):
                if per == 4:
                    bits = np.uint64(words[k] & low)
                else:
                    bits = ((np.uint64(words[2 * k]) << shift) | words[2 * k + 1]) & wide
                out[first + full * per + k] = value(np.int64(bits)) * scale


FUNCTIONS = {
    "philox4x32": _philox4x32,
    "philox4x32_at": _philox4x32_at,
    "philox_uniform": _philox_uniform,
}
# Compiled (and inlined into their callers) before the loops.
HELPERS = ["_philox_rounds", "_counter_words"]

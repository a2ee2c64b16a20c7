"""Philox4x32-10, TensorFlow's counter-based generator, vectorized in NumPy.

Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11). One call maps a 128-bit
counter and a 64-bit key to four uint32s through ten rounds of two 32x32->64 multiplies; the
key is raised by two Weyl constants between rounds. Because the output is a pure function of
(key, counter), block i of a stream is computed directly from counter + i, so a whole tensor's
worth of blocks is one call of a compiled loop over the counters.

TensorFlow's conventions (core/lib/random/philox_random.h and guarded_philox_random.cc):

* `PhiloxRandom(seed, seed2)`: the key is `seed` (low word first) and counter words 2 and 3 are
  `seed2` (low word first); counter words 0 and 1 start at zero.
* A kernel keeps one generator for its lifetime (one per node and Session) and each call
  *reserves* samples: it takes a copy of the generator and skips the shared one by the number
  of 128-bit blocks it may use, so the next call (the next `Session.run`) starts after them.
* seed = seed2 = 0 means "nondeterministic": both are drawn from OS entropy.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from flowgraph.kernels.cpu.loops import compiled

_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
_MASK128 = (1 << 128) - 1


def philox4x32(counters: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    """Philox4x32-10 of each row of `counters` (uint32 [n, 4], word 0 least significant) under
    `key` (two uint32s): returns uint32 [n, 4], the four outputs of each block in order.

    Each block is ten rounds of c0, c1, c2, c3 <- hi(c2 * M1) ^ c1 ^ k0, lo(c2 * M1),
    hi(c0 * M0) ^ c3 ^ k1, lo(c0 * M0), the key raised by the Weyl constants between rounds;
    a compiled loop keeps a block in registers (kernels/cpu/loops.py: the digits CNN's 8192
    dropout draws take 28 us instead of 170 us as whole-array NumPy passes)."""
    out = np.empty((counters.shape[0], 4), np.uint32)
    counters = np.ascontiguousarray(counters, np.uint32)
    compiled("philox4x32")(counters, int(key[0]) & _MASK32, int(key[1]) & _MASK32, out)
    return out


class PhiloxStream:
    """A copy of a generator's position: `blocks(offsets)` computes the blocks at
    counter + offsets without moving anything (TF's `PhiloxRandom` value with `Skip`)."""

    def __init__(self, key: tuple[int, int], counter: int):
        self.key = key
        self.counter = counter

    def _base(self) -> np.ndarray:
        """The counter as four uint32 words, least significant first."""
        return np.array([(self.counter >> shift) & _MASK32 for shift in (0, 32, 64, 96)], np.uint32)

    def blocks(self, offsets) -> np.ndarray:
        """uint32 [n, 4]: the outputs of the blocks at counter + each offset."""
        offsets = np.ascontiguousarray(offsets, np.int64).reshape(-1)
        out = np.empty((offsets.size, 4), np.uint32)
        key0, key1 = int(self.key[0]) & _MASK32, int(self.key[1]) & _MASK32
        compiled("philox4x32_at")(self._base(), offsets, key0, key1, out)  # (philox_loops.py)
        return out

    def uniform(self, out: np.ndarray, bits: int, first_block: int = 0) -> None:
        """Fills `out` (1-D float32 or float64) with the uniform [0, 1) values of the blocks at
        counter + first_block, + first_block + 1, ...: each value `bits` random mantissa bits
        (float32: one word each, four per block; float64: two words, two per block), as TF's
        Uniform distribution (random_distributions.uniform) makes them from the same words."""
        key0, key1 = int(self.key[0]) & _MASK32, int(self.key[1]) & _MASK32
        mask, scale = (1 << bits) - 1, out.dtype.type(2.0**-bits)
        compiled("philox_uniform")(self._base(), first_block, key0, key1, mask, scale, out)

    def uint32s(self, n: int) -> np.ndarray:
        """The first n uint32 outputs in stream order (blocks 0, 1, ... flattened)."""
        return self.blocks(np.arange((n + 3) // 4)).reshape(-1)[:n]


def _entropy64() -> int:
    return int.from_bytes(os.urandom(8), "little")


class GuardedPhilox:
    """One kernel's generator: (seed, seed2) -> key and counter, and the reservations that
    make each call continue where the previous one stopped (TF's GuardedPhiloxRandom)."""

    def __init__(self, seed: int, seed2: int):
        if seed == 0 and seed2 == 0:
            seed, seed2 = _entropy64(), _entropy64()
        seed &= _MASK64
        seed2 &= _MASK64
        self.key = (seed & _MASK32, seed >> 32)
        self.counter = seed2 << 64  # words 2, 3 hold seed2; words 0, 1 start at 0
        self.lock = threading.Lock()

    def reserve128(self, blocks: int) -> PhiloxStream:
        """The stream at the current position; the shared position moves on by `blocks`."""
        with self.lock:
            stream = PhiloxStream(self.key, self.counter)
            self.counter = (self.counter + int(blocks)) & _MASK128
        return stream

    def reserve32(self, samples: int) -> PhiloxStream:
        return self.reserve128((int(samples) + 3) // 4)

    def reserve_outputs(self, count: int, multiplier: int) -> PhiloxStream:
        """TF's ReserveRandomOutputs: count * multiplier blocks (a conservative upper bound)."""
        return self.reserve128(int(count) * int(multiplier))

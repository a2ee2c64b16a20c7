"""FarmHash Fingerprint64 (farmhashna::Hash64), the hash behind TensorFlow's
StringToHashBucketFast and tf.fingerprint: bucket ids must equal TensorFlow's, or a model
trained there looks up the wrong embedding rows here.

A transcription of Google's farmhash.cc (MIT licence) on Python ints masked to 64 bits. It is
per string by nature (the loop is over a string's 64-byte blocks); kernels map it over a
tensor's elements.
"""

from __future__ import annotations

import struct

_M = (1 << 64) - 1
K0 = 0xC3A5C85C97CB3127
K1 = 0xB492B66FBE98F273
K2 = 0x9AE16A3B2F90404F


def _fetch64(s: bytes, i: int) -> int:
    return struct.unpack_from("<Q", s, i)[0]


def _fetch32(s: bytes, i: int) -> int:
    return struct.unpack_from("<I", s, i)[0]


def _rotate(v: int, shift: int) -> int:
    return v if shift == 0 else ((v >> shift) | (v << (64 - shift))) & _M


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _hash_len16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _M
    a ^= a >> 47
    b = ((v ^ a) * mul) & _M
    b ^= b >> 47
    return (b * mul) & _M


def _hash_len0to16(s: bytes, n: int) -> int:
    if n >= 8:
        mul = K2 + n * 2
        a = (_fetch64(s, 0) + K2) & _M
        b = _fetch64(s, n - 8)
        c = (_rotate(b, 37) * mul + a) & _M
        d = ((_rotate(a, 25) + b) * mul) & _M
        return _hash_len16(c, d, mul)
    if n >= 4:
        mul = K2 + n * 2
        a = _fetch32(s, 0)
        return _hash_len16((n + (a << 3)) & _M, _fetch32(s, n - 4), mul)
    if n > 0:
        y = s[0] + (s[n >> 1] << 8)
        z = n + (s[n - 1] << 2)
        return (_shift_mix(((y * K2) ^ (z * K0)) & _M) * K2) & _M
    return K2


def _hash_len17to32(s: bytes, n: int) -> int:
    mul = K2 + n * 2
    a = (_fetch64(s, 0) * K1) & _M
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * mul) & _M
    d = (_fetch64(s, n - 16) * K2) & _M
    return _hash_len16(
        (_rotate((a + b) & _M, 43) + _rotate(c, 30) + d) & _M,
        (a + _rotate((b + K2) & _M, 18) + c) & _M,
        mul,
    )


def _hash_len33to64(s: bytes, n: int) -> int:
    mul = K2 + n * 2
    a = (_fetch64(s, 0) * K2) & _M
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * mul) & _M
    d = (_fetch64(s, n - 16) * K2) & _M
    y = (_rotate((a + b) & _M, 43) + _rotate(c, 30) + d) & _M
    z = _hash_len16(y, (a + _rotate((b + K2) & _M, 18) + c) & _M, mul)
    e = (_fetch64(s, 16) * mul) & _M
    f = _fetch64(s, 24)
    g = ((y + _fetch64(s, n - 32)) * mul) & _M
    h = ((z + _fetch64(s, n - 24)) * mul) & _M
    return _hash_len16(
        (_rotate((e + f) & _M, 43) + _rotate(g, 30) + h) & _M,
        (e + _rotate((f + a) & _M, 18) + g) & _M,
        mul,
    )


def _weak_hash_len32_with_seeds(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = (_fetch64(s, i + k) for k in (0, 8, 16, 24))
    a = (a + w) & _M
    b = _rotate((b + a + z) & _M, 21)
    c = a
    a = (a + x + y) & _M
    b = (b + _rotate(a, 44)) & _M
    return (a + z) & _M, (b + c) & _M


def fingerprint64(s: bytes) -> int:
    """FarmHash Fingerprint64 of `s` as an unsigned 64-bit int."""
    n = len(s)
    if n <= 16:
        return _hash_len0to16(s, n)
    if n <= 32:
        return _hash_len17to32(s, n)
    if n <= 64:
        return _hash_len33to64(s, n)
    seed = 81
    x = seed
    y = (seed * K1 + 113) & _M
    z = (_shift_mix((y * K2 + 113) & _M) * K2) & _M
    v = (0, 0)
    w = (0, 0)
    x = (x * K2 + _fetch64(s, 0)) & _M
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    i = 0
    while True:
        x = (_rotate((x + y + v[0] + _fetch64(s, i + 8)) & _M, 37) * K1) & _M
        y = (_rotate((y + v[1] + _fetch64(s, i + 48)) & _M, 42) * K1) & _M
        x ^= w[1]
        y = (y + v[0] + _fetch64(s, i + 40)) & _M
        z = (_rotate((z + w[0]) & _M, 33) * K1) & _M
        v = _weak_hash_len32_with_seeds(s, i, (v[1] * K1) & _M, (x + w[0]) & _M)
        w = _weak_hash_len32_with_seeds(s, i + 32, (z + w[1]) & _M, (y + _fetch64(s, i + 16)) & _M)
        z, x = x, z
        i += 64
        if i == end:
            break
    mul = K1 + ((z & 0xFF) << 1)
    i = last64
    w0 = (w[0] + ((n - 1) & 63)) & _M
    v0 = (v[0] + w0) & _M
    w0 = (w0 + v0) & _M
    v, w = (v0, v[1]), (w0, w[1])
    x = (_rotate((x + y + v[0] + _fetch64(s, i + 8)) & _M, 37) * mul) & _M
    y = (_rotate((y + v[1] + _fetch64(s, i + 48)) & _M, 42) * mul) & _M
    x ^= (w[1] * 9) & _M
    y = (y + v[0] * 9 + _fetch64(s, i + 40)) & _M
    z = (_rotate((z + w[0]) & _M, 33) * mul) & _M
    v = _weak_hash_len32_with_seeds(s, i, (v[1] * mul) & _M, (x + w[0]) & _M)
    w = _weak_hash_len32_with_seeds(s, i + 32, (z + w[1]) & _M, (y + _fetch64(s, i + 16)) & _M)
    z, x = x, z
    return _hash_len16(
        (_hash_len16(v[0], w[0], mul) + _shift_mix(y) * K0 + z) & _M,
        (_hash_len16(v[1], w[1], mul) + x) & _M,
        mul,
    )

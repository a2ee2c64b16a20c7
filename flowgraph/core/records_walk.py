"""The frames of the TFRecords in a block of bytes, found and checked by one compiled pass
(numba): the record layout (FORMATS.md §1.1) puts each record's start after the previous one's
length, so finding them is a walk, one step per record, which in Python costs about as much as
everything else a reader thread does per record. The walk also checks both masked CRC-32Cs of
each record: two google_crc32c calls per record, their slices and the masking in NumPy took
about half of read_many's time, all of it holding the GIL that a training step on another
thread waits for. Here the CRCs are a table-driven loop (slicing by 8) with the GIL released:
read_many of 64 digits records (~300 bytes each) went from 55 to 33 us of CPU.
"""

from __future__ import annotations

import threading

import numpy as np

_lock = threading.Lock()
_compiled: list = []
_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected
_MASK_DELTA = 0xA282EAD8
_M32 = 0xFFFFFFFF


def crc_tables() -> np.ndarray:
    """The 8 tables of CRC-32C by slicing: tables[0] is the byte-at-a-time table, tables[k][b]
    the CRC of byte b followed by k zero bytes."""
    t = np.zeros((8, 256), np.int64)
    for b in range(256):
        crc = b
        for _ in range(8):
            crc = (crc >> 1) ^ (_POLY if crc & 1 else 0)
        t[0, b] = crc
    for k in range(1, 8):
        t[k] = (t[k - 1] >> 8) ^ t[0][t[k - 1] & 0xFF]
    return t


def _masked_crc(buf, start, stop, t):
    """TensorFlow's masked CRC-32C of buf[start:stop] (records.masked_crc32c)."""
    crc = np.int64(_M32)
    pos = start
    while pos + 8 <= stop:
        low = crc ^ (
            np.int64(buf[pos])
            | (np.int64(buf[pos + 1]) << 8)
            | (np.int64(buf[pos + 2]) << 16)
            | (np.int64(buf[pos + 3]) << 24)
        )
        crc = (
            t[7, low & 0xFF]
            ^ t[6, (low >> 8) & 0xFF]
            ^ t[5, (low >> 16) & 0xFF]
            ^ t[4, (low >> 24) & 0xFF]
            ^ t[3, buf[pos + 4]]
            ^ t[2, buf[pos + 5]]
            ^ t[1, buf[pos + 6]]
            ^ t[0, buf[pos + 7]]
        )
        pos += 8
    while pos < stop:
        crc = t[0, (crc ^ buf[pos]) & 0xFF] ^ (crc >> 8)
        pos += 1
    crc ^= _M32
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & _M32


def _walk(buf, pos, n, frames, t):
    """Fills frames[i] with (start, data length) of the records from `pos` that lie whole in
    `buf` and whose CRCs hold, at most `n`; returns how many. Stops at a length that runs past
    the buffer (or is negative: corrupt) or at a CRC that fails: the caller reads that record
    alone, which reports the failure or refills the buffer."""
    size = buf.shape[0]
    k = 0
    while k < n and pos + 12 <= size:
        length = np.int64(0)
        for b in range(8):
            length |= np.int64(buf[pos + b]) << (8 * b)
        end = pos + 12 + length
        if length < 0 or end + 4 > size:
            break
        length_crc = np.int64(0)
        data_crc = np.int64(0)
        for b in range(4):
            length_crc |= np.int64(buf[pos + 8 + b]) << (8 * b)
            data_crc |= np.int64(buf[end + b]) << (8 * b)
        if _masked_crc(buf, pos, pos + 8, t) != length_crc:
            break
        if _masked_crc(buf, pos + 12, end, t) != data_crc:
            break
        frames[k, 0] = pos
        frames[k, 1] = length
        k += 1
        pos = end + 4
    return k


def masked_crc(data: bytes) -> int:
    """_masked_crc of all of `data`, compiled (for tests: it must equal records.masked_crc32c)."""
    crc, _, tables = _kernels()
    return int(crc(np.frombuffer(data, np.uint8), 0, len(data), tables))


def walk(buf: np.ndarray, pos: int, n: int, frames: np.ndarray) -> int:
    """_walk compiled on first use (cached on disk by numba), with the GIL released."""
    _, compiled_walk, tables = _kernels()
    return compiled_walk(buf, pos, n, frames, tables)


def _kernels():
    if not _compiled:
        with _lock:
            if not _compiled:
                import numba

                jit = numba.njit(nogil=True, cache=True)
                crc = jit(_masked_crc)
                globals()["_masked_crc"] = crc  # numba resolves it by name when compiling _walk
                _compiled.extend((crc, jit(_walk), crc_tables()))
    return _compiled

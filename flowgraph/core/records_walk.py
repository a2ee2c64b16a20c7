"""The frames of the TFRecords in a block of bytes, found and checked by one compiled pass
(numba): the record layout (FORMATS.md §1.1) puts each record's start after the previous one's
length, so finding them is a walk, one step per record, which in Python costs about as much as
everything else a reader thread does per record. The walk also checks both masked CRC-32Cs of
each record: two google_crc32c calls per record, their slices and the masking in NumPy took
about half of read_many's time, all of it holding the GIL that a training step on another
thread waits for. Here the CRCs are a table-driven loop (slicing by 8) with the GIL released:
read_many of 64 digits records (~300 bytes each) went from 55 to 33 us of CPU.

Where the CPU has SSE4.2 (x86-64), the CRC is its crc32 instruction instead, 8 bytes a step
(the instruction google_crc32c and TensorFlow's crc32c use): 19 KB of records, I2's
read_up_to(64), in 2.2 us of CPU instead of 11. The table loop stays for other CPUs, and where
numba is told to compile for another CPU than this one (NUMBA_CPU_NAME).
"""

from __future__ import annotations

import threading

import numpy as np

_lock = threading.Lock()
_compiled: list = []
_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected
_MASK_DELTA = 0xA282EAD8
_M32 = 0xFFFFFFFF
CUT, BAD = -1, -2  # a compiled parser's answers (records.RecordFile.read_parsed)
_load_u64 = _crc32_u64 = _crc32_u8 = None  # byte_intrinsics', bound before _hw_crc compiles


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


def _table_crc(buf, start, stop, t):
    """TensorFlow's masked CRC-32C of buf[start:stop] (records.masked_crc32c), by tables."""
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


def _hw_crc(buf, start, stop, t):
    """_table_crc by SSE4.2's crc32 instruction (compiled only; `t` is unused)."""
    crc = np.uint64(_M32)
    pos = start
    while pos + 8 <= stop:
        crc = _crc32_u64(crc, _load_u64(buf, pos))
        pos += 8
    low = np.uint32(crc)
    while pos < stop:
        low = _crc32_u8(low, buf[pos])
        pos += 1
    masked = np.int64(low) ^ _M32
    return (((masked >> 15) | (masked << 17)) + _MASK_DELTA) & _M32


_masked_crc = _table_crc  # the variant _walk calls: rebound to the compiled one in _kernels


def _le(buf, pos, width):
    """The little-endian integer of buf[pos:pos + width] (width <= 8), as int64."""
    value = np.int64(0)
    for b in range(width):
        value |= np.int64(buf[pos + b]) << (8 * b)
    return value


def _walk(buf, pos, n, frames, t):
    """Fills frames[i] with (start, data length) of the records from `pos` that lie whole in
    `buf` and whose CRCs hold, at most `n`; returns how many. Stops at a length that runs past
    the buffer (or is negative: corrupt) or at a CRC that fails: the caller reads that record
    alone, which reports the failure or refills the buffer."""
    size = buf.shape[0]
    k = 0
    while k < n and pos + 12 <= size:
        length = _le(buf, pos, 8)
        end = pos + 12 + length
        if length < 0 or end + 4 > size:
            break
        if _masked_crc(buf, pos, pos + 8, t) != _le(buf, pos + 8, 4):
            break
        if _masked_crc(buf, pos + 12, end, t) != _le(buf, end, 4):
            break
        frames[k, 0] = pos
        frames[k, 1] = length
        k += 1
        pos = end + 4
    return k


def _cut_short(buf, pos, t):
    """True if the record at `pos` does not lie whole in `buf` but its length's CRC holds (or
    its length is cut too): more of the stream may complete it. False if it is corrupt."""
    size = buf.shape[0]
    if pos + 12 > size:
        return True
    length = _le(buf, pos, 8)
    if length < 0 or _masked_crc(buf, pos, pos + 8, t) != _le(buf, pos + 8, 4):
        return False
    return pos + 16 + length > size


def masked_crc(data: bytes) -> int:
    """_masked_crc of all of `data`, compiled (for tests: it must equal records.masked_crc32c)."""
    crc, _, tables, _ = _kernels()
    return int(crc(np.frombuffer(data, np.uint8), 0, len(data), tables))


def walk(buf: np.ndarray, pos: int, n: int, frames: np.ndarray) -> int:
    """_walk compiled on first use (cached on disk by numba), with the GIL released."""
    _, compiled_walk, tables, _ = _kernels()
    return compiled_walk(buf, pos, n, frames, tables)


def compiled_walk():
    """(_walk, _cut_short) compiled, for compiled callers (they take tables())."""
    return _kernels()[1], _kernels()[3]


def tables() -> np.ndarray:
    """The tables the compiled CRC takes (unused by the SSE4.2 one)."""
    return _kernels()[2]


def _kernels():
    """(masked CRC, walk, tables, cut_short), compiled on first use. numba resolves the
    functions _walk calls by their global names when it compiles it, so `_masked_crc` is
    rebound first."""
    if not _compiled:
        with _lock:
            if not _compiled:
                import numba

                jit = numba.njit(nogil=True, cache=True)
                tables = crc_tables()
                crc = _hardware_crc(jit, tables) or jit(_table_crc)
                g = globals()
                g["_masked_crc"], g["_le"] = crc, jit(_le)
                _compiled.extend((crc, jit(_walk), tables, jit(_cut_short)))
    return _compiled


def _hardware_crc(jit, tables):
    """_hw_crc compiled, where this CPU has SSE4.2 and numba compiles for it; else None.
    It is checked against google_crc32c once (a wrong build falls back to the tables)."""
    from flowgraph.core import byte_intrinsics, records

    if not byte_intrinsics.has_sse42():
        return None
    ops = byte_intrinsics.intrinsics()
    g = globals()
    g["_load_u64"], g["_crc32_u64"], g["_crc32_u8"] = ops.load_u64, ops.crc32_u64, ops.crc32_u8
    crc = jit(_hw_crc)
    sample = np.arange(37, dtype=np.uint8)
    ok = crc(sample, 0, sample.size, tables) == records.masked_crc32c(sample.tobytes())
    return crc if ok else None

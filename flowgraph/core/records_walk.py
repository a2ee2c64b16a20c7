"""The frames of the TFRecords in a block of bytes, found by one compiled pass (numba): the
record layout (FORMATS.md §1.1) puts each record's start after the previous one's length, so
finding them is a walk, one step per record, which in Python costs about as much as everything
else a reader thread does per record. The CRCs are checked by the caller (core/records.py),
with google_crc32c, which is faster than any loop compiled here.
"""

from __future__ import annotations

import threading

import numpy as np

_lock = threading.Lock()
_compiled: list = []


def _walk(buf, pos, n, frames):
    """Fills frames[i] with (start, data length, stored length CRC, stored data CRC) of the
    records from `pos` that lie whole in `buf`, at most `n`; returns how many. Stops at a
    length that runs past the buffer (or is negative: corrupt), which the caller reads alone."""
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
        frames[k, 0] = pos
        frames[k, 1] = length
        frames[k, 2] = length_crc
        frames[k, 3] = data_crc
        k += 1
        pos = end + 4
    return k


def walk(buf: np.ndarray, pos: int, n: int, frames: np.ndarray) -> int:
    """_walk compiled on first use (cached on disk by numba), with the GIL released."""
    if not _compiled:
        with _lock:
            if not _compiled:
                import numba

                _compiled.append(numba.njit(nogil=True, cache=True)(_walk))
    return _compiled[0](buf, pos, n, frames)

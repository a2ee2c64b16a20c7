"""A parse-only map's whole batch in one compiled call (issue 11, I2d).

example_wire.dense_records reads a batch's dense features with three compiled calls (a scan of
the records, then one decoding pass per key) and a few NumPy allocations around each. In the
thread that prefetches a training step's input, every Python-level step there holds the GIL
that the step's own kernels wait for when they return; a compiled call with the GIL released
overlaps the step for free. `Layout.parse` makes one nogil call that scans the records and
writes every key's values straight into one float32 and one int64 output array, preallocated
here; the Python side only slices them per key. The cases it reads, and the None it returns
for any other (the caller then runs the map's body, which gives TensorFlow's values and
errors), are example_wire's: the same scan decides them.
"""

from __future__ import annotations

import threading

import numpy as np

from flowgraph.kernels.cpu import example_wire

_lock = threading.Lock()
_compiled: dict = {}
_scan = _int64s = None  # example_wire's compiled helpers, bound before _parse_into compiles


def _parse_into(
    buf, starts, ends, keys, key_start, key_end, tags, sizes, is_float, offsets, spans, floats, ints
):
    """Scans records data[starts[r]:ends[r]] (example_wire._scan), then writes key k's values
    of record r at floats[r, offsets[k]:] (its packed float bytes; `floats` viewed as bytes)
    or ints[r, offsets[k]:] (its varints); False unless every record is the plain case with
    exactly sizes[k] values of each key."""
    if not _scan(buf, starts, ends, keys, key_start, key_end, tags, spans):
        return False
    for k in range(sizes.size):
        size, off = sizes[k], offsets[k]
        if is_float[k]:
            width, at = 4 * size, 4 * off
            for r in range(starts.size):
                s = spans[r, k, 0]
                if spans[r, k, 1] - s != width:
                    return False
                floats[r, at : at + width] = buf[s : s + width]
            continue
        if not _int64s(buf, spans, k, size, ints[:, off : off + size]):
            return False
    return True


def _kernel():
    """_parse_into compiled on first use, nogil (cached on disk by numba), calling
    example_wire's compiled scan and varint decoding."""
    if not _compiled:
        with _lock:
            if not _compiled:
                import numba

                scan, int64s, _ = example_wire._kernels()
                g = globals()
                g["_scan"], g["_int64s"] = scan, int64s
                _compiled["parse_into"] = numba.njit(nogil=True, cache=True)(_parse_into)
    return _compiled["parse_into"]


class Layout:
    """Where each key of an example_wire.Spec goes: columns of one float32 or one int64
    output array of a batch (float keys side by side in one, int64 keys in the other)."""

    __slots__ = ("columns", "is_float", "offsets", "sizes", "spec", "width")

    def __init__(self, sp: example_wire.Spec):
        self.spec = sp
        self.sizes = np.array(sp.sizes, np.int64)
        self.is_float = np.array(sp.floats, np.bool_)
        self.offsets = np.zeros(len(sp.sizes), np.int64)
        self.width = [0, 0]  # float32 columns, int64 columns
        for k, size in enumerate(sp.sizes):
            kind = 0 if sp.floats[k] else 1
            self.offsets[k] = self.width[kind]
            self.width[kind] += size
        self.columns = [
            (0 if f else 1, int(o), int(o) + s)
            for f, o, s in zip(sp.floats, self.offsets.tolist(), sp.sizes)
        ]

    def parse(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list | None:
        """Per key, an [n, size] array of the records' values; None if any record is not the
        plain case."""
        n = len(starts)
        sp = self.spec
        floats = np.empty((n, self.width[0]), "<f4")
        ints = np.empty((n, self.width[1]), np.int64)
        spans = np.empty((n, len(sp.sizes), 2), np.int64)
        ok = _kernel()(
            data, starts, ends, sp.key_buf, sp.key_start, sp.key_end, sp.tags, self.sizes,
            self.is_float, self.offsets, spans, floats.view(np.uint8), ints,
        )  # fmt: skip
        if not ok:
            return None
        arrays = (floats.astype(np.float32, copy=False), ints)
        out = []
        for kind, lo, hi in self.columns:
            a = arrays[kind]
            out.append(a if hi - lo == a.shape[1] else np.ascontiguousarray(a[:, lo:hi]))
        return out

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

`Layout.records` does the same for the fused reader (kernels/cpu/read_parse.py) straight from
a TFRecord file's read-ahead buffer: one nogil call frames the records and checks their CRCs
(records_walk's walk) and decodes them, so that a steady-state read_up_to makes no Chunk, no
frames array and no second call.
"""

from __future__ import annotations

import threading

import numpy as np

from flowgraph.core import records_walk
from flowgraph.kernels.cpu import example_wire

_lock = threading.Lock()
_compiled: dict = {}
# compiled helpers (example_wire's, records_walk's, byte_intrinsics'), bound before the functions
# here compile
_scan = _int64s = _walk = _cut_short = _copy_bytes = None
CUT, BAD = records_walk.CUT, records_walk.BAD


def _parse_into(
    buf, starts, ends, keys, key_start, key_end, tags, sizes, is_float, offsets, spans, floats, ints
):
    """Scans records data[starts[r]:ends[r]] (example_wire._scan), then writes key k's values
    of record r at floats[r, offsets[k]:] (its packed float bytes; `floats` viewed as bytes)
    or ints[r, offsets[k]:] (its varints); False unless every record is the plain case with
    exactly sizes[k] values of each key."""
    if not _scan(buf, starts, ends, keys, key_start, key_end, tags, spans):
        return False
    flat, row = floats.reshape(floats.size), floats.shape[1]
    for k in range(sizes.size):
        size, off = sizes[k], offsets[k]
        if is_float[k]:
            width, at = 4 * size, 4 * off
            for r in range(starts.size):
                s = spans[r, k, 0]
                if spans[r, k, 1] - s != width:
                    return False
                _copy_bytes(flat, r * row + at, buf, s, width)
            continue
        if not _int64s(buf, spans, k, size, ints[:, off : off + size]):
            return False
    return True


def _records_into(
    buf, pos, n, t, keys, key_start, key_end, tags, sizes, is_float, offsets, floats, ints
):
    """_parse_into of the n TFRecords from buf[pos:] (framed, CRCs checked, by records_walk's
    walk with its tables `t`); returns where the last one ends, CUT if they do not all lie
    whole in `buf`, BAD if a CRC fails or a record is not the plain case."""
    frames = np.empty((n, 2), np.int64)
    k = _walk(buf, pos, n, frames, t)
    if k < n:
        stop = pos if k == 0 else frames[k - 1, 0] + frames[k - 1, 1] + 16
        return CUT if _cut_short(buf, stop, t) else BAD
    starts = frames[:, 0] + 12
    ends = starts + frames[:, 1]
    spans = np.empty((n, sizes.size, 2), np.int64)
    if not _parse_into(
        buf, starts, ends, keys, key_start, key_end, tags, sizes, is_float, offsets, spans,
        floats, ints,
    ):  # fmt: skip
        return BAD
    return ends[n - 1] + 4


def _kernels() -> dict:
    """_parse_into and _records_into compiled on first use, nogil (cached on disk by numba),
    calling example_wire's compiled scan and varint decoding and records_walk's walk; and the
    CRC tables _records_into takes."""
    if not _compiled:
        with _lock:
            if not _compiled:
                import numba

                from flowgraph.core import byte_intrinsics

                jit = numba.njit(nogil=True, cache=True)
                scan, int64s, _ = example_wire._kernels()
                g = globals()
                g["_scan"], g["_int64s"] = scan, int64s
                g["_walk"], g["_cut_short"] = records_walk.compiled_walk()
                g["_copy_bytes"] = byte_intrinsics.intrinsics().copy_bytes
                g["_parse_into"] = parse_into = jit(_parse_into)
                compiled = {
                    "parse_into": parse_into,
                    "records_into": jit(_records_into),
                    "tables": records_walk.tables(),
                }
                _compiled.update(compiled)  # at once: readers test `_compiled` without the lock
    return _compiled


class Layout:
    """Where each key of an example_wire.Spec goes: columns of one float32 or one int64
    output array of a batch (float keys side by side in one, int64 keys in the other). With
    `dims` (per key, its shape in a record), the outputs are [n, *dims] (ParseExample's)."""

    __slots__ = ("args", "columns", "is_float", "min_record", "offsets", "sizes", "spec", "width")

    def __init__(self, sp: example_wire.Spec, dims: tuple | None = None):
        self.spec = sp
        self.sizes = np.array(sp.sizes, np.int64)
        self.is_float = np.array(sp.floats, np.bool_)
        self.offsets = np.zeros(len(sp.sizes), np.int64)
        self.width = [0, 0]  # float32 columns, int64 columns
        kinds = [0 if f else 1 for f in sp.floats]
        for k, size in enumerate(sp.sizes):
            self.offsets[k] = self.width[kinds[k]]
            self.width[kinds[k]] += size
        # per key: (float or int64 output, its columns, its shape in a record or None where
        # that is its row as it is, whether it is the whole output: no copy)
        self.columns = []
        for kind, lo, size, d in zip(kinds, self.offsets.tolist(), sp.sizes, dims or sp.sizes):
            shape = None if dims is None or d == (size,) else d
            self.columns.append((kind, lo, lo + size, shape, size == self.width[kind]))
        # the fewest bytes a plain TFRecord of these keys takes (its frame, 4 per float, at
        # least 1 per int64): `records` allocates no outputs for more records than fit
        self.min_record = 16 + 4 * self.width[0] + self.width[1]
        self.args = (sp.key_buf, sp.key_start, sp.key_end, sp.tags, self.sizes, self.is_float)

    def parse(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list | None:
        """Per key, an [n, size] array of the records' values ([n, *dims] with `dims`); None
        if any record is not the plain case."""
        n = len(starts)
        floats, ints = self._outputs(n)
        spans = np.empty((n, len(self.sizes), 2), np.int64)
        fn = (_compiled or _kernels())["parse_into"]
        ok = fn(data, starts, ends, *self.args, self.offsets, spans, floats, ints)
        return self._columns(floats, ints) if ok else None

    def records(self, buf: np.ndarray, pos: int, n: int) -> tuple[tuple | None, int]:
        """(a tuple of the values per key, as `parse` gives them, where the records end) of
        the n TFRecords from buf[pos:] (uint8); (None, CUT) if they do not all lie whole in
        `buf`, (None, BAD) if a CRC fails or a record is not the plain case."""
        if n * self.min_record > buf.size - pos:
            return None, CUT
        floats, ints = self._outputs(n)
        c = _compiled or _kernels()
        end = c["records_into"](buf, pos, n, c["tables"], *self.args, self.offsets, floats, ints)
        return (None, end) if end < 0 else (tuple(self._columns(floats, ints)), end)

    def _outputs(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The float32 output (as its bytes, which the compiled code copies) and the int64
        one of n records."""
        return np.empty((n, 4 * self.width[0]), np.uint8), np.empty((n, self.width[1]), np.int64)

    def _columns(self, floats: np.ndarray, ints: np.ndarray) -> list:
        """Per key, its columns of the outputs (the whole array where the key is the only one
        of its kind: no copy), in its shape."""
        values = floats.view("<f4")
        arrays = (values if _NATIVE_F4 else values.astype(np.float32), ints)
        out = []
        for kind, lo, hi, dims, whole in self.columns:
            a = arrays[kind] if whole else np.ascontiguousarray(arrays[kind][:, lo:hi])
            out.append(a if dims is None else a.reshape(len(a), *dims))
        return out


_NATIVE_F4 = np.dtype("<f4").isnative

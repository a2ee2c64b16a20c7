"""Packed string columns: a run's records kept as bounds in a byte buffer (issue 11, I2d).

A TFRecord source used to cut each record into a bytes object, and a shuffle buffer of them
gathered object pointers (a reference count each) for every batch: ~25 us per batch of 64 in
the thread that prefetches, holding the GIL a training step waits for, before parse_example
joined the same records back into one buffer to scan them. A `Packed` column keeps records
where a buffer has them, as (data, starts, ends): a source's where its read buffer has them,
a shuffle's in its `Arena`, where a batch's records are picked by indexing their bounds, not
by copying them; a map that only parses examples (dataset_parse.py) scans them where they lie.
Anything else asks the run for its columns, and gets the bytes objects it always got
(`Packed.strings`).
"""

from __future__ import annotations

import threading

import numpy as np

_lock = threading.Lock()
_compiled: dict = {}
_MIN_ARENA = 1 << 20  # bytes: an arena this size is compacted every ~50 batches of I2d
_EMPTY = np.empty(0, np.int64)  # no bounds (never written)
_SPAN_PER_STRING = 1024  # bytes a run's buffer may hold per string without being compacted


def string_column(values: list) -> np.ndarray:
    """A 1-D object array of `values` (bytes), never a 2-D array of their characters."""
    return np.fromiter(values, object, len(values))


class Packed:
    """`len(starts)` strings: string i is data[starts[i]:ends[i]] (uint8 data, int64 bounds;
    the bounds need not be adjacent or in order, as in a file buffer between record frames or
    in an arena). `data` is never written where a Packed's strings lie."""

    __slots__ = ("data", "ends", "starts")

    def __init__(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        self.data, self.starts, self.ends = data, starts, ends

    @classmethod
    def of_bytes(cls, records: list) -> Packed:
        lengths = np.fromiter(map(len, records), np.int64, len(records))
        ends = np.cumsum(lengths)
        return cls(np.frombuffer(b"".join(records), np.uint8), ends - lengths, ends)

    def __len__(self) -> int:
        return len(self.starts)

    def nbytes(self) -> int:
        """The bytes of the strings themselves."""
        return int((self.ends - self.starts).sum())

    def strings(self) -> np.ndarray:
        """The strings as a 1-D object array of bytes (a string column)."""
        view = memoryview(self.data)
        return string_column(
            [view[s:e].tobytes() for s, e in zip(self.starts.tolist(), self.ends.tolist())]
        )

    def compact(self) -> Packed:
        """The strings copied one after the other into a new buffer of just their bytes, by
        one compiled pass with the GIL released."""
        starts = np.empty(len(self), np.int64)
        ends = np.empty(len(self), np.int64)
        data = _kernel()(np.ascontiguousarray(self.data), self.starts, self.ends, starts, ends)
        return Packed(data, starts, ends)


def lean(p: Packed) -> Packed:
    """`p`, compacted where its buffer holds far more than its strings (an arena's records):
    where it holds more than _SPAN_PER_STRING bytes per string and twice their bytes. The
    first test costs no NumPy call: a source's run (its records and their frames) passes it."""
    if len(p.data) <= _SPAN_PER_STRING * len(p) or len(p.data) <= 2 * p.nbytes() + 64:
        return p
    return p.compact()


def concat(parts: list) -> Packed:
    """The strings of `parts` one after the other (a batch's runs): their buffers joined, each
    lean first."""
    if len(parts) == 1:
        return parts[0]
    parts = [lean(p) for p in parts]
    shift = np.cumsum([0] + [len(p.data) for p in parts[:-1]])
    return Packed(
        np.concatenate([p.data for p in parts]),
        np.concatenate([p.starts + s for p, s in zip(parts, shift.tolist())]),
        np.concatenate([p.ends + s for p, s in zip(parts, shift.tolist())]),
    )


class Arena:
    """The append-only buffer a shuffle keeps its packed records in. Runs are appended by one
    copy of their buffer each (a source's records with their frames between them); picking
    and keeping records only indexes their bounds. When a run does not fit, the live records
    move to a new buffer at least twice their size with the run (the old one stays valid for
    the Packeds that point into it)."""

    def __init__(self):
        self.data = np.zeros(0, np.uint8)
        self.fill = 0

    def shuffle(self, kept: Packed | None, runs: list, size: int, draws) -> tuple:
        """A shuffle buffer's moves (dataset_shuffle.py) for `draws` with the records of
        `runs` (Packeds) appended to those of `kept` as the buffer takes them: (the records
        drawn, the records kept), both in this arena. NumPy copies append the runs (a
        memcpy each: numba's slice copy goes byte by byte, ~10 us for a batch of I2d's
        against 0.7), each run where the last ends, without joining them first; then one
        nogil call replays the moves on record numbers and gathers the bounds of both, where
        the replay and gathering the bounds took some twenty NumPy calls with the GIL held."""
        runs = [lean(r) for r in runs]  # an arena's run is not copied whole
        need = sum([len(r.data) for r in runs])
        kept = self._room(kept, need)
        fill, data = self.fill, self.data
        if len(runs) == 1:
            (run,) = runs
            data[fill : fill + need] = run.data
            starts, ends = run.starts, run.ends
        else:
            starts, ends, at = [_EMPTY], [_EMPTY], fill
            for r in runs:
                data[at : at + len(r.data)] = r.data
                starts.append(r.starts + (at - fill))
                ends.append(r.ends + (at - fill))
                at += len(r.data)
            starts, ends = np.concatenate(starts), np.concatenate(ends)
        return self._moves(kept, starts, ends, fill, need, size, draws)

    def shuffle_span(self, kept: Packed | None, run: Packed | None, size: int, draws) -> tuple:
        """shuffle() of one run whose records lie in order in its buffer, from the first's
        start to the last's end (a TFRecord source's: Iterator.take_span): that span is
        copied as it is, and the kernel shifts the run's bounds to where it lands. No run:
        the draws take the kept records only."""
        if run is None:
            return self._moves(kept, _EMPTY, _EMPTY, 0, 0, size, draws)
        lo, hi = run.starts[0].item(), run.ends[-1].item()
        kept = self._room(kept, hi - lo)
        fill = self.fill
        self.data[fill : fill + hi - lo] = run.data[lo:hi]
        return self._moves(kept, run.starts, run.ends, fill - lo, hi - lo, size, draws)

    def _moves(self, kept, starts, ends, shift, need, size, draws) -> tuple:
        """The compiled moves of shuffle() for the run whose bounds `starts`, `ends` lie at
        arena[bound + shift], `need` bytes from the fill on."""
        k_starts, k_ends = (_EMPTY, _EMPTY) if kept is None else (kept.starts, kept.ends)
        data = self.data
        picked = np.empty((2, len(draws)), np.int64)
        out = np.empty((2, len(k_starts) + len(starts)), np.int64)
        m = _kernel("shuffle")(shift, k_starts, k_ends, starts, ends, size, draws, picked, out)
        self.fill += need
        return Packed(data, picked[0], picked[1]), Packed(data, out[0, :m], out[1, :m])

    def _room(self, kept: Packed | None, need: int) -> Packed | None:
        """Makes room for `need` more bytes: when they do not fit, the live records (`kept`)
        move to a new buffer at least twice their size with the bytes; returns them."""
        if self.fill + need <= len(self.data):
            return kept
        live = kept.compact() if kept is not None else None
        size = live.nbytes() if live is not None else 0
        self.data = np.empty(max(2 * (size + need), _MIN_ARENA), np.uint8)
        self.data[:size] = live.data if live is not None else 0
        self.fill = size
        return live


def _compact(data, starts, ends, out_starts, out_ends):
    """Copies string t of (data, starts, ends) after string t - 1 into the returned buffer,
    recording its bounds in out_starts[t], out_ends[t]."""
    total = 0
    for t in range(starts.shape[0]):
        total += ends[t] - starts[t]
    out = np.empty(total, np.uint8)
    pos = 0
    for t in range(starts.shape[0]):
        s, e = starts[t], ends[t]
        out_starts[t] = pos
        _copy_bytes(out, pos, data, s, e - s)
        pos += e - s
        out_ends[t] = pos
    return out


def _shuffle(shift, k_starts, k_ends, starts, ends, size, draws, picked, out):
    """Replays a shuffle buffer's moves for `draws` on record numbers (loops' shuffle_replay:
    the kept records', then the run's, whose bytes lie at arena[bound + shift]) and writes
    the bounds of the records drawn into picked[0], picked[1], and of those kept after them
    into out[0, :m], out[1, :m]; returns m."""
    length = k_starts.size
    numbers = np.empty(draws.size, np.intp)
    kept = np.empty(length + starts.size, np.intp)
    m = _replay(length, size, starts.size, draws, numbers, kept)
    for t in range(draws.size):
        _bounds_of(numbers[t], k_starts, k_ends, starts, ends, shift, picked, t)
    for t in range(m):
        _bounds_of(kept[t], k_starts, k_ends, starts, ends, shift, out, t)
    return m


def _bounds_of(i, k_starts, k_ends, starts, ends, shift, out, t):
    """out[:, t] = the arena bounds of record number i (a kept record's, else the run's)."""
    if i < k_starts.size:
        out[0, t], out[1, t] = k_starts[i], k_ends[i]
    else:
        j = i - k_starts.size
        out[0, t], out[1, t] = starts[j] + shift, ends[j] + shift


_FUNCTIONS = {"compact": _compact, "shuffle": _shuffle}
_replay = None  # loops' compiled shuffle_replay, bound before _shuffle compiles
_copy_bytes = None  # byte_intrinsics.intrinsics().copy_bytes, bound before _compact compiles


def _kernel(name: str = "compact"):
    """_compact or _shuffle compiled on first use (cached on disk by numba), nogil."""
    if name not in _compiled:
        with _lock:
            if name not in _compiled:
                import numba

                from flowgraph.core import byte_intrinsics
                from flowgraph.kernels.cpu import loops

                g = globals()
                g["_replay"] = loops.compiled("shuffle_replay")
                g["_copy_bytes"] = byte_intrinsics.intrinsics().copy_bytes
                if not hasattr(g["_bounds_of"], "py_func"):
                    g["_bounds_of"] = numba.njit(inline="always", cache=True)(_bounds_of)
                _compiled[name] = numba.njit(nogil=True, cache=True)(_FUNCTIONS[name])
    return _compiled[name]

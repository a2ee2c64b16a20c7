"""Dataset kernels that start a pipeline (§4.5): tensors and their slices, ranges, zips and
concatenations of datasets, Python generators (through library functions holding PyFuncs), and
files of records (TFRecord, text lines, fixed-length records; core/records.py reads them)."""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes, errors, records
from flowgraph.core.shapes import TensorShape
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.dataset_base import (
    Dataset,
    Function,
    Iterator,
    check_dataset,
    check_element,
    scalar,
)
from flowgraph.kernels.cpu.dataset_runs import Packed, Run, string_column


def _out(ctx):
    return ctx.attrs["output_types"], ctx.attrs["output_shapes"]


class _ListIterator(Iterator):
    """Elements computed on demand from an index: element(i) for i in range(n); with
    `columns`, columns(i, j) gives the run of elements i to j - 1 as new arrays."""

    def __init__(self, element, n, columns=None):
        self.element = element
        self.n = n
        self.i = 0
        self.columns = columns

    async def get_next(self):
        i = self.i
        if i >= self.n:
            return None
        self.i = i + 1
        return self.element(i)

    async def get_many(self, n):
        if self.columns is None:
            return await super().get_many(n)
        i = self.i
        if i >= self.n:
            return None
        self.i = j = min(self.n, i + n)
        return Run.of_columns(self.columns(i, j))


class TensorDataset(Dataset):
    def __init__(self, components, types, shapes):
        super().__init__(types, shapes)
        self.components = tuple(components)

    def make_iterator(self, env):
        return _ListIterator(lambda i: self.components, 1)


class SliceDataset(Dataset):
    def __init__(self, components, types, shapes):
        super().__init__(types, shapes)
        comps = [np.asarray(c) if t != dtypes.variant else c for c, t in zip(components, types)]
        n = None
        for i, c in enumerate(comps):
            if np.ndim(c) == 0:
                raise errors.InvalidArgumentError(
                    None, None, f"All components must be at least 1-dimensional (component {i})"
                )
            if n is None:
                n = len(c)
            elif len(c) != n:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"All components must have the same size in the 0th dimension: component 0 "
                    f"has {n}, component {i} has {len(c)}",
                )
        self.components = comps
        self.n = n

    def make_iterator(self, env):
        comps = self.components
        columns = None
        if comps and all(isinstance(c, np.ndarray) and c.dtype.kind not in "SU" for c in comps):
            columns = lambda i, j: [c[i:j].copy() for c in comps]
        return _ListIterator(lambda i: tuple(c[i] for c in comps), self.n, columns)


@register_kernel("TensorDataset")
def tensor_dataset(ctx, *components):
    return TensorDataset(components, ctx.attrs["Toutput_types"], ctx.attrs["output_shapes"])


@register_kernel("TensorSliceDataset")
def tensor_slice_dataset(ctx, *components):
    return SliceDataset(components, ctx.attrs["Toutput_types"], ctx.attrs["output_shapes"])


class RangeDataset(Dataset):
    def __init__(self, start, stop, step, types, shapes):
        super().__init__(types, shapes)
        if step == 0:
            raise errors.InvalidArgumentError(None, None, "step must be a non-zero integer.")
        self.range = range(start, stop, step)
        self.dtype = types[0].as_numpy_dtype

    def make_iterator(self, env):
        r, dtype = self.range, self.dtype
        return _ListIterator(
            lambda i: (dtype(r[i]),), len(r), lambda i, j: [np.array(r[i:j], dtype)]
        )


@register_kernel("RangeDataset")
def range_dataset(ctx, start, stop, step):
    return RangeDataset(
        scalar(start, "start"), scalar(stop, "stop"), scalar(step, "step"), *_out(ctx)
    )


class ZipDataset(Dataset):
    def __init__(self, inputs, types, shapes):
        super().__init__(types, shapes)
        self.inputs = [check_dataset(d, "input_datasets") for d in inputs]

    def make_iterator(self, env):
        return _ZipIterator([d.make_iterator(env) for d in self.inputs])


class _ZipIterator(Iterator):
    def __init__(self, inputs):
        self.inputs = inputs

    async def get_next(self):
        out = []
        for it in self.inputs:
            element = await it.get_next()
            if element is None:
                return None
            out.extend(element)
        return tuple(out)

    def close(self):
        for it in self.inputs:
            it.close()


@register_kernel("ZipDataset")
def zip_dataset(ctx, *inputs):
    return ZipDataset(inputs, *_out(ctx))


class ConcatenateDataset(Dataset):
    def __init__(self, first, second, types, shapes):
        super().__init__(types, shapes)
        self.parts = [check_dataset(first), check_dataset(second, "another_dataset")]
        if [t for t in first.output_types] != [t for t in second.output_types]:
            raise errors.InvalidArgumentError(
                None, None, "input dataset and dataset to concatenate have different types"
            )

    def make_iterator(self, env):
        return _ChainIterator(env, iter(self.parts))


class _ChainIterator(Iterator):
    """The elements of each dataset of `datasets` (an iterator of Datasets) in turn."""

    def __init__(self, env, datasets):
        self.env = env
        self.datasets = datasets
        self.current = None

    async def get_next(self):
        while True:
            if self.current is None:
                ds = next(self.datasets, None)
                if ds is None:
                    return None
                self.current = ds.make_iterator(self.env)
            element = await self.current.get_next()
            if element is not None:
                return element
            self.current = None

    def close(self):
        if self.current is not None:
            self.current.close()


@register_kernel("ConcatenateDataset")
def concatenate_dataset(ctx, first, second):
    return ConcatenateDataset(first, second, *_out(ctx))


class GeneratorDataset(Dataset):
    """TF's GeneratorDataset: init_func makes a state, next_func(state) gives each element
    until it raises OutOfRangeError, finalize_func(state) runs at the end."""

    def __init__(self, funcs, types, shapes):
        super().__init__(types, shapes)
        self.funcs = funcs

    def make_iterator(self, env):
        init, nxt, fin = (f.instantiate(env) for f in self.funcs)
        return _GeneratorIterator(init, nxt, fin, self.output_types, self.output_shapes)


class _GeneratorIterator(Iterator):
    def __init__(self, init, nxt, fin, types, shapes):
        self.funcs = (init, nxt, fin)
        self.types, self.shapes = types, shapes
        self.state = None
        self.finished = False

    async def get_next(self):
        if self.finished:
            return None
        init, nxt, fin = self.funcs
        if self.state is None:
            self.state = init(())
        try:
            element = nxt(self.state)
        except errors.OutOfRangeError:
            self.finished = True
            fin(self.state)
            return None
        return check_element(element, self.types, self.shapes, "generator")


@register_kernel("GeneratorDataset")
def generator_dataset(ctx, *args):
    a = ctx.attrs
    counts = [len(a["Tinit_func_args"]), len(a["Tnext_func_args"])]
    init_args, next_args = args[: counts[0]], args[counts[0] : counts[0] + counts[1]]
    fin_args = args[counts[0] + counts[1] :]
    funcs = [
        Function(a["init_func"], init_args),
        Function(a["next_func"], next_args),
        Function(a["finalize_func"], fin_args),
    ]
    return GeneratorDataset(funcs, *_out(ctx))


# -- files --------------------------------------------------------------------------------------
_STRING = ([dtypes.string], [TensorShape([])])


class FileDataset(Dataset):
    """The records of each file in turn; `open_file(path)` returns an object with read()."""

    def __init__(self, filenames, open_file):
        super().__init__(*_STRING)
        names = np.asarray(filenames)
        if names.ndim > 1:
            raise errors.InvalidArgumentError(
                None, None, f"`filenames` must be a scalar or a vector, got {names.shape}"
            )
        self.filenames = [f.decode() if isinstance(f, bytes) else str(f) for f in names.ravel()]
        self.open_file = open_file

    def make_iterator(self, env):
        return _FileIterator(self.filenames, self.open_file)


class _FileIterator(Iterator):
    """A TFRecord file's records are cut ahead: up to _CUT_AHEAD of those lying whole in its
    read buffer at once (`ahead`, a Packed, served from `at`), so that a run costs a slice of
    their bounds and the walk that finds and checks them runs once per few runs, not per run. A bad
    record stops the cut; the records before it are served, then reading it raises."""

    def __init__(self, filenames, open_file):
        self.files = iter(filenames)
        self.open_file = open_file
        self.current = None
        self.ahead = None  # a Packed of the records cut ahead, served from `at`
        self.raw = None  # the bytes its data views
        self.at = 0

    async def get_next(self):
        while self._opened():
            if isinstance(self.current, records.RecordFile):
                if self._ready():
                    i, raw = self.at, self.raw
                    s, e = self.ahead.starts[i].item(), self.ahead.ends[i].item()
                    self._advance(i + 1)
                    return (np.array(raw[s:e], dtype=object),)
            else:
                record = self.current.read()
                if record is not None:
                    return (np.array(record, dtype=object),)
            self._close_current()
        return None

    async def get_many(self, n):
        """A run of the current file's next records: a TFRecord file's packed, other files'
        cut by one read where the file can (read_many), else read one by one."""
        while self._opened():
            if isinstance(self.current, records.RecordFile):
                packed = self._take(n)
                if packed is not None:
                    return Run.of_packed(packed)
            else:
                got = _read_many(self.current, n)
                if got:
                    return Run.of_columns([string_column(got)])
            self._close_current()
        return None

    def take_span(self, n):
        ahead, i = self.ahead, self.at
        if ahead is None or len(ahead.starts) - i < n:
            return None
        self._advance(i + n)
        return Packed(ahead.data, ahead.starts[i : i + n], ahead.ends[i : i + n])

    def _take(self, n: int) -> Packed | None:
        """Up to `n` next records of the current TFRecord file; None at its end."""
        if not self._ready():
            return None
        ahead, i = self.ahead, self.at
        j = self._advance(i + n)
        starts, ends = ahead.starts[i:j], ahead.ends[i:j]
        lo, hi = starts[0].item(), ends[-1].item()  # a view of just their part of the buffer
        return Packed(ahead.data[lo:hi], starts - lo, ends - lo)

    def _ready(self) -> bool:
        """Cuts records ahead unless some are left; False at the end of the current file."""
        if self.ahead is None:
            cut = _cut_ahead(self.current)
            if cut is None:
                return False
            self.raw, self.ahead, self.at = cut[0], cut[1], 0
        return True

    def _advance(self, j: int) -> int:
        """Moves past the records cut ahead up to j (at most all of them); returns where."""
        j = min(j, len(self.ahead))
        if j == len(self.ahead):
            self.ahead = self.raw = None
        self.at = j
        return j

    def _opened(self) -> bool:
        """Opens the next file unless one is open; False when no file is left."""
        if self.current is None:
            path = next(self.files, None)
            if path is None:
                return False
            self.current = self.open_file(path)
        return True

    def _close_current(self):
        self.current.close()
        self.current = None
        self.ahead = self.raw = None

    def close(self):
        if self.current is not None:
            self._close_current()


_CUT_AHEAD = 1024  # records cut ahead at most: each cut's walk checks their CRCs, compiled
# with the GIL released (~30 us for a whole read buffer of I2d's, ~850 records, by SSE4.2).
# Cutting 256 at a time spread that walk, but made one prefetch refill in two straddle two
# cuts, and each such run costs the shuffle above a pass of Python (~3 us per batch of I2d).


def _cut_ahead(f) -> tuple | None:
    """(bytes, a Packed of them): up to _CUT_AHEAD records lying whole in a TFRecord file's
    buffer, else the next one (read() refills the buffer, or raises for a bad record); None
    at the end of the file."""
    chunk = f.cut(_CUT_AHEAD)
    if chunk is None:
        record = f.read()
        if record is None:
            return None
        return record, Packed(np.frombuffer(record, np.uint8), _ZERO, np.array([len(record)]))
    buf, starts, lengths, _ = chunk
    return buf, Packed(np.frombuffer(buf, np.uint8), starts, starts + lengths)


_ZERO = np.zeros(1, np.int64)  # where a record read alone starts (never written)


def _read_many(f, n: int) -> list:
    """Up to `n` next records of an open file (fewer only at its end)."""
    if isinstance(f, records.FixedLengthFile):
        return f.read_many(n)
    out = []
    while len(out) < n:
        record = f.read()
        if record is None:
            break
        out.append(record)
    return out


def _opener(cls, *args):
    def open_file(path):
        try:
            return cls(path, *args)
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"{path}; No such file or directory") from None

    return open_file


def _compression(value) -> str:
    c = scalar(value, "compression_type")
    return records.check_compression(c.decode() if isinstance(c, bytes) else c)


def _check_buffer(buffer_size):
    if scalar(buffer_size, "buffer_size") < 0:
        raise errors.InvalidArgumentError(
            None, None, "`buffer_size` must be >= 0 (0 == no buffering)"
        )


@register_kernel("TFRecordDataset")
def tf_record_dataset(ctx, filenames, compression_type, buffer_size):
    _check_buffer(buffer_size)
    return FileDataset(filenames, _opener(records.RecordFile, _compression(compression_type)))


@register_kernel("TextLineDataset")
def text_line_dataset(ctx, filenames, compression_type, buffer_size):
    _check_buffer(buffer_size)
    return FileDataset(filenames, _opener(_TextLines, _compression(compression_type)))


class _TextLines(records.TextLineFile):
    def __init__(self, path, compression_type):
        super().__init__(path, compression_type)


def _fixed(filenames, header, record, footer, buffer_size, compression=""):
    _check_buffer(buffer_size)
    header, record, footer = (
        scalar(v, n)
        for v, n in ((header, "header_bytes"), (record, "record_bytes"), (footer, "footer_bytes"))
    )
    if header < 0 or footer < 0 or record <= 0:
        raise errors.InvalidArgumentError(
            None, None, "header_bytes and footer_bytes must be >= 0 and record_bytes > 0"
        )
    return FileDataset(filenames, _opener(_FixedRecords, record, header, footer, compression))


class _FixedRecords(records.FixedLengthFile):
    def __init__(self, path, record, header, footer, compression):
        super().__init__(path, record, header, footer, 0, compression)


@register_kernel("FixedLengthRecordDataset")
def fixed_length_record_dataset(ctx, filenames, header, record, footer, buffer_size):
    return _fixed(filenames, header, record, footer, buffer_size)


@register_kernel("FixedLengthRecordDatasetV2")
def fixed_length_record_dataset_v2(ctx, filenames, header, record, footer, buffer_size, comp):
    return _fixed(filenames, header, record, footer, buffer_size, _compression(comp))


@register_kernel("MatchingFiles")
def matching_files(ctx, pattern):
    """The sorted paths matching one glob pattern, or each of a vector of patterns."""
    import glob

    found = set()
    for p in np.asarray(pattern, dtype=object).ravel():
        found.update(glob.glob(p.decode() if isinstance(p, bytes) else str(p)))
    return np.array([f.encode() for f in sorted(found)], dtype=object).reshape(-1)

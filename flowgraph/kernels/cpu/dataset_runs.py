"""Runs: several consecutive elements of a dataset, the unit of `Iterator.get_many` (§4.5).

Why: a pipeline that batches (TFRecordDataset -> shuffle -> batch -> map(parse_example)) used
to move one element at a time through its chain of coroutines and stack 64 elements into each
batch: ~10 us of Python per element in the thread that prefetches, holding the GIL that the
training step waits for (issue 11, bench I2d). A run carries a batch's worth of elements per
call: a source cuts its records in one read, a shuffle draws all its random indices at once, a
batch takes a whole run as its batch.

A run holds its elements in either of two forms, and makes the other on first use:
`columns`, one array per component whose first axis counts the elements (what a batch is, and
what a source or a slice makes cheaply), or `elements`, a list of element tuples (what
per-element iterators produce, and what a shuffle buffer holds). A run of one string component
may instead be `packed` (dataset_packed.py: a TFRecord source's records left in its read
buffer), which shuffles, batches and parse-only maps keep; its columns are made on first use.
Elements of different shapes
stay a list until a batch stacks them, which then fails as batching them always did. Columns
are owned by the run (never views of a dataset's constants), so a batch may hand them on."""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.cpu.dataset_packed import Packed, string_column  # noqa: F401
from flowgraph.kernels.cpu.dataset_packed import concat as concat_packed


class Run:
    """`n` >= 1 consecutive elements; see the module docstring for its forms."""

    __slots__ = ("_columns", "_elements", "n", "packed")

    def __init__(self, n: int, columns=None, elements=None, packed=None):
        self.n = n
        self._columns = columns
        self._elements = elements
        self.packed = packed  # a Packed: the strings of a run of one string component

    @classmethod
    def of_columns(cls, columns) -> Run:
        return cls(len(columns[0]), tuple(columns), None)

    @classmethod
    def of_elements(cls, elements: list) -> Run:
        return cls(len(elements), None, elements)

    @classmethod
    def of_packed(cls, packed: Packed) -> Run:
        return cls(len(packed), None, None, packed)

    def part(self, start: int, stop: int) -> Run:
        """Elements start to stop - 1, in this run's form (views of its columns or bounds)."""
        if start == 0 and stop == self.n:
            return self
        if self.packed is not None:
            p = self.packed
            return Run.of_packed(Packed(p.data, p.starts[start:stop], p.ends[start:stop]))
        if self._columns is not None:
            return Run(stop - start, tuple(c[start:stop] for c in self._columns))
        return Run.of_elements(self._elements[start:stop])

    @property
    def has_columns(self) -> bool:
        return self._columns is not None or self.packed is not None

    @property
    def columns(self) -> tuple:
        if self._columns is None:
            if self.packed is not None:
                self._columns = (self.packed.strings(),)
            else:
                self._columns = stack(self._elements)
        return self._columns

    @property
    def elements(self) -> list:
        if self._elements is None:
            self._elements = split(self.columns, self.n)
        return self._elements


def packed_of(runs: list) -> Packed | None:
    """The strings of consecutive runs as one Packed when every run is packed; else None."""
    if len(runs) == 1:
        return runs[0].packed
    if not all(r.packed is not None for r in runs):
        return None
    return concat_packed([r.packed for r in runs])


def cut(runs: list, sizes: list) -> list:
    """Consecutive `runs` cut into lists of runs of sizes[0], sizes[1], ... elements (a run
    that straddles a cut is sliced; elements past the last are left out)."""
    groups, i, at = [], 0, 0  # the next element is runs[i]'s element `at`
    for size in sizes:
        group = []
        while size:
            run = runs[i]
            take = min(size, run.n - at)
            group.append(run.part(at, at + take))
            at += take
            size -= take
            if at == run.n:
                i, at = i + 1, 0
        groups.append(group)
    return groups


def split(columns, n: int) -> list:
    """The element tuples of `n` rows of `columns`. A string (object) component's element is a
    0-d object array, as a source makes it, not the bare bytes."""
    per_component = [
        [c[i, ...] for i in range(n)] if c.dtype == object and c.ndim == 1 else list(c)
        for c in columns
    ]
    return list(zip(*per_component)) if per_component else [()] * n


def concat(runs: list) -> tuple:
    """One batch from consecutive runs: their columns joined along the first axis."""
    if len(runs) == 1:
        return runs[0].columns
    if not all(r.has_columns for r in runs):
        return stack([e for r in runs for e in r.elements])
    first = runs[0].columns
    start = runs[0].n
    for r in runs[1:]:
        for i, (a, b) in enumerate(zip(first, r.columns)):
            if a.shape[1:] != b.shape[1:]:
                _different_shapes(i, a.shape[1:], start, b.shape[1:])
        start += r.n
    return tuple(np.concatenate(cols) for cols in zip(*(r.columns for r in runs)))


def _different_shapes(i, first, j, other):
    raise errors.InvalidArgumentError(
        None,
        None,
        f"Cannot batch tensors with different shapes in component {i}. First element had "
        f"shape {list(first)} and element {j} had shape {list(other)}.",
    )


def stack(elements, padded_shapes=None, padding_values=None) -> tuple:
    """One batch: each component's values stacked along a new first axis (padded if asked)."""
    if not elements:
        return ()
    out = []
    for i, values in enumerate(zip(*elements)):
        if padded_shapes is None:
            out.append(_stack_component(i, values))
        else:
            out.append(_pad(i, values, padded_shapes[i], padding_values[i]))
    return tuple(out)


def _stack_component(i, values) -> np.ndarray:
    try:
        shapes = [v.shape for v in values]
    except AttributeError:
        shapes = [np.shape(v) for v in values]
    first = shapes[0]
    if shapes.count(first) != len(shapes):
        j = next(j for j, s in enumerate(shapes) if s != first)
        _different_shapes(i, first, j, shapes[j])
    if first == () and all(type(v) is np.ndarray and v.dtype == object for v in values):
        return np.fromiter([v[()] for v in values], object, len(values))  # strings, quickly
    batch = np.stack(values)
    if batch.dtype.kind in "SU":  # strings stay object arrays of bytes
        batch = np.array(list(values), dtype=object)
    return batch


def _pad(i, values, padded_shape, padding_value):
    shapes = [np.shape(v) for v in values]
    rank = len(padded_shape)
    if any(len(s) != rank for s in shapes):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Component {i}: padded shape has rank {rank}, elements have ranks "
            f"{sorted({len(s) for s in shapes})}",
        )
    target = []
    for d, want in enumerate(padded_shape):
        longest = max(s[d] for s in shapes)
        if want < 0:
            target.append(longest)
        elif longest > want:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Attempted to pad to a smaller size than the input element: component {i}, "
                f"dimension {d}: padded size {want} < {longest}",
            )
        else:
            target.append(want)
    fill = np.asarray(padding_value)
    dtype = np.asarray(values[0]).dtype
    out = np.full([len(values)] + target, fill, dtype=object if dtype.kind in "OSU" else dtype)
    for j, v in enumerate(values):
        out[(j,) + tuple(slice(0, n) for n in np.shape(v))] = v
    return out

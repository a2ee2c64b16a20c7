"""Batching kernels of `tf.data` (§4.5): batch, padded_batch, unbatch. A batch takes runs of
elements from its input (dataset_runs.py), and hands a map that only parses examples its
records packed (get_records), or several batches' at once for a prefetch (get_runs_ahead)."""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.dataset_base import scalar
from flowgraph.kernels.cpu.dataset_runs import Packed, Run, concat, cut, packed_of, stack
from flowgraph.kernels.cpu.dataset_transforms import Unary, UnaryIterator


def _out(ctx):
    return ctx.attrs["output_types"], ctx.attrs["output_shapes"]


class BatchDataset(Unary):
    def __init__(
        self,
        input_dataset,
        batch_size,
        drop_remainder,
        types,
        shapes,
        padded_shapes=None,
        padding_values=None,
    ):
        super().__init__(input_dataset, types, shapes)
        if batch_size <= 0:
            raise errors.InvalidArgumentError(None, None, "Batch size must be greater than zero.")
        self.batch_size = batch_size
        self.drop_remainder = drop_remainder
        self.padded_shapes = padded_shapes
        self.padding_values = padding_values

    def make_iterator(self, env):
        return _BatchIterator(self.input.make_iterator(env), self)


class _BatchIterator(UnaryIterator):
    def __init__(self, input_iterator, ds):
        super().__init__(input_iterator)
        self.ds = ds

    async def get_next(self):
        runs = await self._runs()
        return None if runs is None else self._batch(runs)

    async def get_records(self):
        """The next batch as a Packed when its input's runs are packed records (which a map
        that only parses examples reads as they are), else as get_next gives it."""
        runs = await self._runs()
        return None if runs is None else self.records(runs)

    def records(self, runs):
        """A batch of `runs`, as get_records gives it."""
        packed = self.packed(runs)
        return packed if packed is not None else self._batch(runs)

    def packed(self, runs) -> Packed | None:
        """The records of `runs` as one Packed where they are all packed (and unpadded)."""
        return packed_of(runs) if self.ds.padded_shapes is None else None

    async def get_runs_ahead(self, k: int) -> tuple:
        """The next up to k batches' elements read at once (get_many of them all, so that
        each stage below makes one pass for them): (their runs, the batches' sizes, the
        error that stopped the read after a batch or None). The elements of the batch an
        error cuts are lost, as get_next loses them; an error before a batch is raised."""
        ds = self.ds
        size, want = ds.batch_size, k * ds.batch_size
        packed = self.input.take_packed(want)
        if packed is not None:
            return [Run.of_packed(packed)], [size] * k, None
        runs, got, error = [], 0, None
        while got < want:
            try:
                run = await self.input.get_many(want - got)
            except Exception as e:
                if got < size:
                    raise
                error = e
                break
            if run is None:
                break
            runs.append(run)
            got += run.n
        full, rest = divmod(got, size)
        sizes = [size] * full
        if rest and error is None and not ds.drop_remainder:
            sizes.append(rest)
        elif rest:
            runs = cut(runs, [got - rest])[0]
        return runs, sizes, error

    async def _runs(self) -> list | None:
        """The runs of the next batch's elements; None at the end (or a short last batch
        with drop_remainder)."""
        ds = self.ds
        packed = self.input.take_packed(ds.batch_size)
        if packed is not None:
            return [Run.of_packed(packed)]
        runs = []
        need = ds.batch_size
        while need:
            run = await self.input.get_many(need)
            if run is None:
                break
            runs.append(run)
            need -= run.n
        if not runs or (ds.drop_remainder and need):
            return None
        return runs

    def _batch(self, runs) -> tuple:
        ds = self.ds
        if ds.padded_shapes is not None:  # each element is padded: stacked one by one
            elements = [e for r in runs for e in r.elements]
            return stack(elements, ds.padded_shapes, ds.padding_values)
        return concat(runs)


@register_kernel("BatchDataset")
def batch_dataset(ctx, input_dataset, batch_size):
    return BatchDataset(input_dataset, scalar(batch_size, "batch_size"), False, *_out(ctx))


@register_kernel("BatchDatasetV2")
def batch_dataset_v2(ctx, input_dataset, batch_size, drop_remainder):
    return BatchDataset(
        input_dataset, scalar(batch_size, "batch_size"), bool(drop_remainder), *_out(ctx)
    )


@register_kernel("PaddedBatchDatasetV2")
def padded_batch_dataset(ctx, input_dataset, batch_size, *args):
    n = ctx.attrs["N"]
    padded = [np.asarray(s, dtype=np.int64) for s in args[:n]]
    values = list(args[n:-1])
    for i, v in enumerate(values):
        if np.ndim(v) != 0:
            raise errors.InvalidArgumentError(
                None, None, f"All padding values must be scalars; component {i} is not"
            )
    if any(p.ndim != 1 for p in padded):
        raise errors.InvalidArgumentError(None, None, "All padded shapes must be vectors")
    return BatchDataset(
        input_dataset,
        scalar(batch_size, "batch_size"),
        bool(args[-1]),
        ctx.attrs["Toutput_types"],
        ctx.attrs["output_shapes"],
        [p.tolist() for p in padded],
        values,
    )


class UnbatchDataset(Unary):
    def make_iterator(self, env):
        return _UnbatchIterator(self.input.make_iterator(env))


class _UnbatchIterator(UnaryIterator):
    def __init__(self, input_iterator):
        super().__init__(input_iterator)
        self.current = None
        self.i = self.n = 0

    async def get_next(self):
        if not await self._loaded():
            return None
        i = self.i
        self.i = i + 1
        return tuple(c[i] for c in self.current)

    async def get_many(self, n):
        if not await self._loaded():
            return None
        i, j = self.i, min(self.n, self.i + n)
        self.i = j
        return Run.of_columns([np.array(c[i:j]) for c in self.current])

    async def _loaded(self) -> bool:
        """Makes the next input element current once this one is used up; False at the end."""
        while self.i >= self.n:
            element = await self.input.get_next()
            if element is None:
                return False
            sizes = {np.shape(c)[0] if np.ndim(c) else None for c in element}
            if None in sizes or len(sizes) != 1:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    "Input element must have the same non-scalar batch size in each component.",
                )
            self.current, self.i, self.n = element, 0, sizes.pop()
        return True


@register_kernel("UnbatchDataset")
def unbatch_dataset(ctx, input_dataset):
    return UnbatchDataset(input_dataset, *_out(ctx))

"""Dataset kernels that transform one dataset (§4.5): applying library functions (map, filter,
flat_map, interleave), ordering (repeat, take, skip). Batching is in dataset_batch.py,
shuffling in dataset_shuffle.py, prefetching and parallel calls in dataset_parallel.py,
caching in dataset_cache.py."""

from __future__ import annotations

import collections

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.dataset_base import (
    AUTOTUNE,
    Dataset,
    ElementCheck,
    Function,
    Iterator,
    check_dataset,
    scalar,
)
from flowgraph.kernels.cpu.dataset_parse import recognize
from flowgraph.kernels.cpu.dataset_runs import Packed, Run, cut


def _out(ctx):
    return ctx.attrs["output_types"], ctx.attrs["output_shapes"]


class Unary(Dataset):
    """A dataset made from one input dataset."""

    def __init__(self, input_dataset, types, shapes):
        super().__init__(types, shapes)
        self.input = check_dataset(input_dataset)


class UnaryIterator(Iterator):
    def __init__(self, input_iterator):
        self.input = input_iterator

    def close(self):
        self.input.close()


# -- functions --------------------------------------------------------------------------------
class MapDataset(Unary):
    def __init__(self, input_dataset, func, types, shapes):
        super().__init__(input_dataset, types, shapes)
        self.func = func

    def make_iterator(self, env):
        fn = self.func.instantiate(env)
        return _MapIterator(
            self.input.make_iterator(env), fn, self, recognize(fn.body, fn.captured)
        )


class _MapIterator(UnaryIterator):
    """Calls the function per element, except where `parse` (dataset_parse.py) does what it
    does for a whole run: a batch's records (`get_next` of a batch that can hand them packed),
    several batches' records at once (`get_ahead`, for a prefetch) or a run of records under a
    batch (`get_many`). `leftover` holds the input elements of a run the parse could not
    read, mapped one by one before any further input."""

    def __init__(self, input_iterator, fn, ds, parse=None):
        super().__init__(input_iterator)
        self.fn = fn
        self.check = ElementCheck(ds.output_types, ds.output_shapes, "map function")
        self.parse = parse
        self.leftover = collections.deque()
        self.types = [t.as_numpy_dtype for t in ds.output_types]
        self.batches = (  # whether get_next takes a batch's records
            parse is not None and parse.batched and hasattr(input_iterator, "get_runs_ahead")
        )

    async def get_next(self):
        if self.leftover:
            element = self.leftover.popleft()
        elif self.batches:
            return self._map_batch(await self.input.get_records())
        else:
            element = await self.input.get_next()
        if element is None:
            return None
        return self.check(self.fn(element))

    def _map_batch(self, records):
        """The function's result for a batch as a batch's records() gives it (dataset_batch)."""
        if records is None:
            return None
        if isinstance(records, Packed):
            out = self.parse(records)
            if out is not None:
                return self.check(out)
            records = (records.strings(),)
        return self.check(self.fn(records))

    async def get_ahead(self, k):
        """Up to k batches mapped from one read of their records (the batch's get_runs_ahead)
        and, where they are all packed, one parse of them, whose outputs the batches slice;
        otherwise (a record the parse cannot read, other runs) batch by batch, as get_next
        maps them. A batch's error is its outcome; the batches after it are kept."""
        if k < 2 or not self.batches:
            return await super().get_ahead(k)
        batch = self.input
        runs, sizes, error = await batch.get_runs_ahead(k)
        if not sizes:
            return []
        records = batch.packed(runs)
        out = self.parse(records) if records is not None else None
        if out is not None:
            outcomes, lo, passed = [], 0, None  # passed: the size of a batch that passed
            for n in sizes:
                element = [a[lo : lo + n] for a in out]
                lo += n
                if n == passed or self.check.passes(element):  # slices of the same outputs
                    passed = n
                    outcomes.append((tuple(element), None))
                else:
                    outcomes.append(_outcome(self.check, element))
        else:
            outcomes = [
                _outcome(self._map_batch, batch.records(group)) for group in cut(runs, sizes)
            ]
        return outcomes if error is None else outcomes + [(None, error)]

    async def get_many(self, n):
        """A run parsed at once (see the class docstring), else the elements mapped one by one."""
        if self.parse is None or self.parse.batched or self.leftover:
            return await super().get_many(n)
        self.raise_deferred()
        run = await self.input.get_many(n)
        if run is None:
            return None
        if run.has_columns:  # never stacks elements only to parse them
            out = self.parse(run.packed if run.packed is not None else run.columns[0])
            if out is not None and [c.dtype for c in out] == self.types:
                return Run.of_columns(out)
        self.leftover.extend(run.elements)
        return await super().get_many(n)


def _outcome(fn, arg) -> tuple:
    """(fn(arg), None), or (None, the error it raised)."""
    try:
        return fn(arg), None
    except Exception as e:  # noqa: BLE001 (the consumer of this element raises it)
        return None, e


@register_kernel("MapDataset")
def map_dataset(ctx, input_dataset, *captured):
    return MapDataset(input_dataset, Function(ctx.attrs["f"], captured), *_out(ctx))


class FilterDataset(Unary):
    def __init__(self, input_dataset, predicate, types, shapes):
        super().__init__(input_dataset, types, shapes)
        self.predicate = predicate

    def make_iterator(self, env):
        return _FilterIterator(self.input.make_iterator(env), self.predicate.instantiate(env))


class _FilterIterator(UnaryIterator):
    def __init__(self, input_iterator, predicate):
        super().__init__(input_iterator)
        self.predicate = predicate

    async def get_next(self):
        while True:
            element = await self.input.get_next()
            if element is None:
                return None
            keep = self.predicate(element)
            if len(keep) != 1 or np.shape(keep[0]) != () or np.asarray(keep[0]).dtype != bool:
                raise errors.InvalidArgumentError(
                    None, None, "Filter predicate `f` must return a scalar bool."
                )
            if keep[0]:
                return element


@register_kernel("FilterDataset")
def filter_dataset(ctx, input_dataset, *captured):
    return FilterDataset(input_dataset, Function(ctx.attrs["predicate"], captured), *_out(ctx))


class FlatMapDataset(Unary):
    """`f` maps each element to a dataset; their elements follow each other (interleave with
    cycle_length 1) or alternate in blocks (cycle_length > 1)."""

    def __init__(self, input_dataset, func, cycle_length, block_length, types, shapes):
        super().__init__(input_dataset, types, shapes)
        if cycle_length == AUTOTUNE:
            cycle_length = 2
        if cycle_length <= 0 or block_length <= 0:
            raise errors.InvalidArgumentError(
                None, None, "cycle_length and block_length must be positive"
            )
        self.func = func
        self.cycle_length, self.block_length = cycle_length, block_length

    def make_iterator(self, env):
        return _InterleaveIterator(
            self.input.make_iterator(env),
            self.func.instantiate(env),
            env,
            self.cycle_length,
            self.block_length,
        )


class _InterleaveIterator(UnaryIterator):
    """TF's InterleaveDataset: a cycle of up to `cycle_length` open datasets; `block_length`
    elements from each in turn; an exhausted one is replaced by the next input's dataset."""

    def __init__(self, input_iterator, fn, env, cycle_length, block_length):
        super().__init__(input_iterator)
        self.fn, self.env = fn, env
        self.cycle = [None] * cycle_length
        self.block_length = block_length
        self.index = 0  # position in the cycle
        self.taken = 0  # elements taken from the current block
        self.input_done = False

    async def _open(self):
        element = await self.input.get_next()
        if element is None:
            self.input_done = True
            return None
        (ds,) = self.fn(element)
        return check_dataset(ds, "the result of the interleaved function").make_iterator(self.env)

    async def get_next(self):
        cycle = self.cycle
        while True:
            if self.input_done and all(it is None for it in cycle):
                return None
            it = cycle[self.index]
            if it is None and not self.input_done:
                it = cycle[self.index] = await self._open()
            if it is not None:
                element = await it.get_next()
                if element is not None:
                    self.taken += 1
                    if self.taken >= self.block_length:
                        self._advance()
                    return element
                cycle[self.index] = None  # refilled when the cycle comes back here (TF)
            self._advance()

    def _advance(self):
        self.taken = 0
        self.index = (self.index + 1) % len(self.cycle)

    def close(self):
        super().close()
        for it in self.cycle:
            if it is not None:
                it.close()


@register_kernel("FlatMapDataset")
def flat_map_dataset(ctx, input_dataset, *captured):
    return FlatMapDataset(input_dataset, Function(ctx.attrs["f"], captured), 1, 1, *_out(ctx))


@register_kernel("InterleaveDataset")
def interleave_dataset(ctx, input_dataset, *args):
    *captured, cycle, block = args
    return FlatMapDataset(
        input_dataset,
        Function(ctx.attrs["f"], captured),
        scalar(cycle, "cycle_length"),
        scalar(block, "block_length"),
        *_out(ctx),
    )


# -- order ----------------------------------------------------------------------------------
class RepeatDataset(Unary):
    def __init__(self, input_dataset, count, types, shapes):
        super().__init__(input_dataset, types, shapes)
        self.count = count

    def make_iterator(self, env):
        return _RepeatIterator(self.input, env, self.count)


class _RepeatIterator(Iterator):
    """`count` passes (forever if < 0); a pass that yields nothing ends the sequence."""

    def __init__(self, dataset, env, count):
        self.dataset, self.env = dataset, env
        self.count = count
        self.passes = 0
        self.current = None
        self.produced = False  # in the current pass

    async def get_next(self):
        return await self._next(lambda it: it.get_next())

    async def get_many(self, n):
        return await self._next(lambda it: it.get_many(n))

    def take_packed(self, n):
        got = self.current.take_packed(n) if self.current is not None else None
        if got is not None:
            self.produced = True
        return got

    async def _next(self, fetch):
        """What `fetch(pass_iterator)` yields (an element or a run), across pass boundaries."""
        while self.count < 0 or self.passes < self.count:
            if self.current is None:
                self.current = self.dataset.make_iterator(self.env)
                self.produced = False
            got = await fetch(self.current)
            if got is not None:
                self.produced = True
                return got
            if not self._pass_ended():
                return None
        return None

    def _pass_ended(self) -> bool:
        """Ends the current pass; False if it yielded nothing (then the sequence ends)."""
        self.current = None
        self.passes += 1
        return self.produced

    def close(self):
        if self.current is not None:
            self.current.close()


@register_kernel("RepeatDataset")
def repeat_dataset(ctx, input_dataset, count):
    return RepeatDataset(input_dataset, scalar(count, "count"), *_out(ctx))


_SKIP_ALL_RUN = 1024  # elements read per call by skip(-1), which reads the whole input


class TakeDataset(Unary):
    def __init__(self, input_dataset, count, skip, types, shapes):
        super().__init__(input_dataset, types, shapes)
        self.count, self.skip = count, skip

    def make_iterator(self, env):
        it = self.input.make_iterator(env)
        return (_SkipIterator if self.skip else _TakeIterator)(it, self.count)


class _TakeIterator(UnaryIterator):
    def __init__(self, input_iterator, count):
        super().__init__(input_iterator)
        self.left = count  # < 0: all

    async def get_next(self):
        if self.left == 0:
            return None
        element = await self.input.get_next()
        if element is not None and self.left > 0:
            self.left -= 1
        return element

    async def get_many(self, n):
        if self.left == 0:
            return None
        run = await self.input.get_many(n if self.left < 0 else min(n, self.left))
        if run is not None and self.left > 0:
            self.left -= run.n
        return run


class _SkipIterator(UnaryIterator):
    def __init__(self, input_iterator, count):
        super().__init__(input_iterator)
        self.skip = count  # < 0: all

    async def get_next(self):
        if not await self._skipped():
            return None
        return await self.input.get_next()

    async def get_many(self, n):
        if not await self._skipped():
            return None
        return await self.input.get_many(n)

    async def _skipped(self) -> bool:
        """Skips what is left to skip; False if the input ended meanwhile."""
        while self.skip != 0:
            run = await self.input.get_many(self.skip if self.skip > 0 else _SKIP_ALL_RUN)
            if run is None:
                self.skip = 0
                return False
            if self.skip > 0:
                self.skip -= run.n
        return True


@register_kernel("TakeDataset")
def take_dataset(ctx, input_dataset, count):
    return TakeDataset(input_dataset, scalar(count, "count"), False, *_out(ctx))


@register_kernel("SkipDataset")
def skip_dataset(ctx, input_dataset, count):
    return TakeDataset(input_dataset, scalar(count, "count"), True, *_out(ctx))

"""Dataset kernels that transform one dataset (§4.5): applying library functions (map, filter,
flat_map, interleave), grouping (batch, padded_batch, unbatch), ordering (shuffle, repeat,
take, skip). Prefetching and parallel calls are in dataset_parallel.py, caching in
dataset_cache.py."""

from __future__ import annotations

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
        return _MapIterator(self.input.make_iterator(env), self.func.instantiate(env), self)


class _MapIterator(UnaryIterator):
    def __init__(self, input_iterator, fn, ds):
        super().__init__(input_iterator)
        self.fn = fn
        self.check = ElementCheck(ds.output_types, ds.output_shapes, "map function")

    async def get_next(self):
        element = await self.input.get_next()
        if element is None:
            return None
        return self.check(self.fn(element))


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


# -- batching -----------------------------------------------------------------------------------
def stack(elements, padded_shapes=None, padding_values=None) -> tuple:
    """One batch: each component's values stacked along a new first axis (padded if asked)."""
    out = []
    for i, values in enumerate(zip(*elements)):
        first = np.shape(values[0])
        if padded_shapes is None:
            for j, v in enumerate(values):
                if np.shape(v) != first:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"Cannot batch tensors with different shapes in component {i}. First "
                        f"element had shape {list(first)} and element {j} had shape "
                        f"{list(np.shape(v))}.",
                    )
            batch = np.stack(values)
            if batch.dtype.kind in "SU":  # strings stay object arrays of bytes
                batch = np.array(list(values), dtype=object)
            out.append(batch)
        else:
            out.append(_pad(i, values, padded_shapes[i], padding_values[i]))
    return tuple(out)


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
        ds = self.ds
        elements = []
        get = self.input.get_next
        for _ in range(ds.batch_size):
            element = await get()
            if element is None:
                break
            elements.append(element)
        if not elements or (ds.drop_remainder and len(elements) < ds.batch_size):
            return None
        return stack(elements, ds.padded_shapes, ds.padding_values)


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
        while self.i >= self.n:
            element = await self.input.get_next()
            if element is None:
                return None
            sizes = {np.shape(c)[0] if np.ndim(c) else None for c in element}
            if None in sizes or len(sizes) != 1:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    "Input element must have the same non-scalar batch size in each component.",
                )
            self.current, self.i, self.n = element, 0, sizes.pop()
        i = self.i
        self.i = i + 1
        return tuple(c[i] for c in self.current)


@register_kernel("UnbatchDataset")
def unbatch_dataset(ctx, input_dataset):
    return UnbatchDataset(input_dataset, *_out(ctx))


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
        while self.count < 0 or self.passes < self.count:
            if self.current is None:
                self.current = self.dataset.make_iterator(self.env)
                self.produced = False
            element = await self.current.get_next()
            if element is not None:
                self.produced = True
                return element
            self.current = None
            self.passes += 1
            if not self.produced:
                return None
        return None

    def close(self):
        if self.current is not None:
            self.current.close()


@register_kernel("RepeatDataset")
def repeat_dataset(ctx, input_dataset, count):
    return RepeatDataset(input_dataset, scalar(count, "count"), *_out(ctx))


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


class _SkipIterator(UnaryIterator):
    def __init__(self, input_iterator, count):
        super().__init__(input_iterator)
        self.skip = count  # < 0: all

    async def get_next(self):
        while self.skip != 0:
            if await self.input.get_next() is None:
                self.skip = 0
                return None
            if self.skip > 0:
                self.skip -= 1
        return await self.input.get_next()


@register_kernel("TakeDataset")
def take_dataset(ctx, input_dataset, count):
    return TakeDataset(input_dataset, scalar(count, "count"), False, *_out(ctx))


@register_kernel("SkipDataset")
def skip_dataset(ctx, input_dataset, count):
    return TakeDataset(input_dataset, scalar(count, "count"), True, *_out(ctx))


class ShuffleDataset(Unary):
    """TF's shuffle: a buffer of `buffer_size` elements; each output is a uniformly random
    element of it, replaced by the next input. Seeds (0, 0) mean a random seed. With
    `reshuffle_each_iteration`, each new iterator (each epoch under repeat) draws a fresh
    seed from a generator seeded once, so the orders differ by epoch yet repeat run to run."""

    def __init__(self, input_dataset, buffer_size, seed, seed2, reshuffle, types, shapes):
        super().__init__(input_dataset, types, shapes)
        if buffer_size <= 0:
            raise errors.InvalidArgumentError(None, None, "buffer_size must be greater than zero.")
        self.buffer_size = buffer_size
        if seed == 0 and seed2 == 0:
            seeds = np.random.SeedSequence().generate_state(2)
        else:
            seeds = [seed & 0xFFFFFFFF, seed2 & 0xFFFFFFFF]
        self.seeds = [int(s) for s in seeds]
        self.reshuffle = reshuffle
        self.epoch = 0  # iterators made so far

    def make_iterator(self, env):
        epoch = self.epoch
        if self.reshuffle:
            self.epoch += 1
        rng = np.random.default_rng(np.random.SeedSequence(self.seeds, spawn_key=(epoch,)))
        return _ShuffleIterator(self.input.make_iterator(env), self.buffer_size, rng)


class _ShuffleIterator(UnaryIterator):
    def __init__(self, input_iterator, buffer_size, rng):
        super().__init__(input_iterator)
        self.buffer = []
        self.size = buffer_size
        self.rng = rng
        self.input_done = False

    async def get_next(self):
        buf = self.buffer
        while not self.input_done and len(buf) < self.size:
            element = await self.input.get_next()
            if element is None:
                self.input_done = True
            else:
                buf.append(element)
        if not buf:
            return None
        i = int(self.rng.integers(len(buf)))
        element = buf[i]
        buf[i] = buf[-1]
        buf.pop()
        return element


@register_kernel("ShuffleDataset")
def shuffle_dataset(ctx, input_dataset, buffer_size, seed, seed2):
    return ShuffleDataset(
        input_dataset,
        scalar(buffer_size, "buffer_size"),
        scalar(seed, "seed"),
        scalar(seed2, "seed2"),
        ctx.attrs["reshuffle_each_iteration"],
        *_out(ctx),
    )


@register_kernel("ShuffleAndRepeatDataset")
def shuffle_and_repeat_dataset(ctx, input_dataset, buffer_size, seed, seed2, count):
    shuffled = ShuffleDataset(
        input_dataset,
        scalar(buffer_size, "buffer_size"),
        scalar(seed, "seed"),
        scalar(seed2, "seed2"),
        True,
        *_out(ctx),
    )
    return RepeatDataset(shuffled, scalar(count, "count"), *_out(ctx))

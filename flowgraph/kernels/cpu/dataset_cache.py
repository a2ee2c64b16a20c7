"""Dataset.cache: the elements of the first complete pass kept in memory, or in a tensor bundle
file (TensorFlow's cache format, core/tensor_bundle.py) that later passes and later Sessions
read instead of recomputing the input."""

from __future__ import annotations

import os

from flowgraph.core import tensor_bundle
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.dataset_base import Iterator, scalar
from flowgraph.kernels.cpu.dataset_transforms import Unary, UnaryIterator


class CacheDataset(Unary):
    """Caches the elements in memory during the first complete pass; later iterators of this
    dataset read the cache."""

    def __init__(self, input_dataset, types, shapes):
        super().__init__(input_dataset, types, shapes)
        self.cache = None

    def make_iterator(self, env):
        if self.cache is not None:
            return _CachedIterator(self.cache)
        return _CachingIterator(self.input.make_iterator(env), self)


class _CachedIterator(Iterator):
    def __init__(self, cache):
        self.cache = cache
        self.i = 0

    async def get_next(self):
        if self.i >= len(self.cache):
            return None
        self.i += 1
        return self.cache[self.i - 1]


class _CachingIterator(UnaryIterator):
    def __init__(self, input_iterator, ds):
        super().__init__(input_iterator)
        self.ds = ds
        self.seen = []

    async def get_next(self):
        element = await self.input.get_next()
        if element is None:
            if self.ds.cache is None:
                self.ds.cache = self.seen
            return None
        self.seen.append(element)
        return element


def cache_key(index: int, component: int) -> str:
    """TensorFlow's key of one component of one cached element in the cache's tensor bundle."""
    return f"{index:7d}_{component}"


class FileCacheDataset(Unary):
    """Caches the elements in a tensor bundle at prefix `filename`, one tensor per component
    keyed by `cache_key`: the first complete pass writes it, and every iterator made once it
    exists reads it instead of the input. A pass that ends early leaves no cache."""

    def __init__(self, input_dataset, filename, types, shapes):
        super().__init__(input_dataset, types, shapes)
        self.filename = filename

    def make_iterator(self, env):
        if os.path.exists(tensor_bundle.index_filename(self.filename)):
            return _BundleReadIterator(self.filename, len(self.output_types))
        return _BundleWriteIterator(self.input.make_iterator(env), self.filename)


class _BundleReadIterator(Iterator):
    def __init__(self, prefix, n):
        self.reader = tensor_bundle.BundleReader(prefix)
        self.n = n
        self.i = 0

    async def get_next(self):
        reader = self.reader
        if reader is None or not reader.contains(cache_key(self.i, 0)):
            self.close()
            return None
        element = tuple(reader.lookup(cache_key(self.i, c)) for c in range(self.n))
        self.i += 1
        return element

    def close(self):
        if self.reader is not None:
            self.reader.close()
            self.reader = None


class _BundleWriteIterator(UnaryIterator):
    def __init__(self, input_iterator, prefix):
        super().__init__(input_iterator)
        self.writer = tensor_bundle.BundleWriter(prefix)
        self.i = 0

    async def get_next(self):
        try:
            element = await self.input.get_next()
        except BaseException:
            self.close()
            raise
        if self.writer is None:
            return element
        if element is None:
            self.writer.finish()
            self.writer = None
            return None
        for c, value in enumerate(element):
            self.writer.add(cache_key(self.i, c), value)
        self.i += 1
        return element

    def close(self):
        if self.writer is not None:
            self.writer.abort()
            self.writer = None
        super().close()


@register_kernel("CacheDataset")
def cache_dataset(ctx, input_dataset, filename):
    name = scalar(filename, "filename")
    name = name.decode() if isinstance(name, bytes) else name
    types, shapes = ctx.attrs["output_types"], ctx.attrs["output_shapes"]
    if name:
        return FileCacheDataset(input_dataset, name, types, shapes)
    return CacheDataset(input_dataset, types, shapes)

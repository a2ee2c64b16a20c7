"""GroupByWindowDataset (tf.data.experimental.group_by_window, and bucket_by_sequence_length
built on it): elements are grouped by an int64 key; a group whose size reaches its window size
is handed, as a dataset, to the reduce function, whose dataset's elements are emitted. At the
end of the input the remaining groups are reduced in increasing key order (TF's order)."""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.dataset_base import Dataset, Function, check_dataset
from flowgraph.kernels.cpu.dataset_sources import _ListIterator
from flowgraph.kernels.cpu.dataset_transforms import Unary, UnaryIterator


class _Window(Dataset):
    """The elements of one group, as the dataset the reduce function receives."""

    def __init__(self, elements, types, shapes):
        super().__init__(types, shapes)
        self.elements = elements

    def make_iterator(self, env):
        elements = self.elements
        return _ListIterator(lambda i: elements[i], len(elements))


class GroupByWindowDataset(Unary):
    def __init__(self, input_dataset, funcs, types, shapes):
        super().__init__(input_dataset, types, shapes)
        self.funcs = funcs

    def make_iterator(self, env):
        key, reduce, size = (f.instantiate(env) for f in self.funcs)
        return _GroupIterator(self.input.make_iterator(env), key, reduce, size, env, self.input)


class _GroupIterator(UnaryIterator):
    def __init__(self, input_iterator, key_fn, reduce_fn, size_fn, env, input_dataset):
        super().__init__(input_iterator)
        self.key_fn, self.reduce_fn, self.size_fn = key_fn, reduce_fn, size_fn
        self.env = env
        self.types, self.shapes = input_dataset.output_types, input_dataset.output_shapes
        self.groups: dict = {}  # key -> elements waiting for their window to fill
        self.sizes: dict = {}  # key -> window size
        self.current = None  # the iterator of the reduced window being emitted
        self.input_done = False

    def _scalar_int(self, out, what):
        if len(out) != 1 or np.shape(out[0]) != () or np.asarray(out[0]).dtype != np.int64:
            raise errors.InvalidArgumentError(None, None, f"{what} must return a scalar int64.")
        return int(out[0])

    def _reduce(self, key, elements):
        window = _Window(elements, self.types, self.shapes)
        (ds,) = self.reduce_fn([np.int64(key), window])
        self.current = check_dataset(ds, "the reduce_func's result").make_iterator(self.env)

    async def get_next(self):
        while True:
            if self.current is not None:
                element = await self.current.get_next()
                if element is not None:
                    return element
                self.current = None
            if self.input_done:
                if not self.groups:
                    return None
                key = min(self.groups)
                self._reduce(key, self.groups.pop(key))
                continue
            element = await self.input.get_next()
            if element is None:
                self.input_done = True
                continue
            key = self._scalar_int(self.key_fn(element), "key_func")
            if key not in self.sizes:
                size = self._scalar_int(self.size_fn([np.int64(key)]), "window_size_func")
                if size < 1:
                    raise errors.InvalidArgumentError(
                        None, None, f"Window size must be greater than zero, but got {size}."
                    )
                self.sizes[key] = size
            group = self.groups.setdefault(key, [])
            group.append(element)
            if len(group) == self.sizes[key]:
                self._reduce(key, self.groups.pop(key))

    def close(self):
        super().close()
        if self.current is not None:
            self.current.close()


@register_kernel("GroupByWindowDataset")
def group_by_window_dataset(ctx, input_dataset, *args):
    a = ctx.attrs
    n_key = len(a["Tkey_func_other_arguments"])
    n_reduce = len(a["Treduce_func_other_arguments"])
    funcs = [
        Function(a["key_func"], args[:n_key]),
        Function(a["reduce_func"], args[n_key : n_key + n_reduce]),
        Function(a["window_size_func"], args[n_key + n_reduce :]),
    ]
    return GroupByWindowDataset(input_dataset, funcs, a["output_types"], a["output_shapes"])

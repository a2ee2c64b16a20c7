"""Kernels that consume a whole dataset inside one step: `Dataset.reduce` (ReduceDataset: a
library function folds the elements into a state) and `get_single_element`. They are async
kernels (§5.3): if the dataset's iterator waits (a prefetch), the step's thread is released and
the kernel finishes on the thread that resumes it."""

from __future__ import annotations

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.dataset_base import Env, Function, check_dataset, drive


def _finish(ctx, done, coro):
    single = len(ctx.attrs["output_types"]) == 1

    def complete(value, error):
        if error is not None:
            done(None, error)
        else:
            done(value[0] if single else tuple(value))

    result = drive(coro, complete)
    if result is not None:
        complete(result.value, result.error)


async def _reduce(dataset, fn, state):
    it = dataset.make_iterator(fn.env)
    try:
        while True:
            element = await it.get_next()
            if element is None:
                return state
            state = fn(list(state) + list(element))
    finally:
        it.close()


class _Folder:
    """The reduce function with its captured values; called on state + element."""

    def __init__(self, bound, env):
        self.bound = bound
        self.env = env

    def __call__(self, args):
        return self.bound.body(args + self.bound.captured)


@register_kernel("ReduceDataset", async_=True)
def reduce_dataset(ctx, step, done, dataset, *args):
    n = len(ctx.attrs["Tstate"])
    state, captured = list(args[:n]), args[n:]
    env = Env(ctx.device)
    fold = _Folder(Function(ctx.attrs["f"], captured).instantiate(env), env)
    _finish(ctx, done, _reduce(check_dataset(dataset, "input_dataset"), fold, state))


async def _single(dataset, env):
    it = dataset.make_iterator(env)
    try:
        element = await it.get_next()
        if element is None:
            raise errors.InvalidArgumentError(None, None, "Dataset was empty.")
        if await it.get_next() is not None:
            raise errors.InvalidArgumentError(None, None, "Dataset had more than one element.")
        return element
    finally:
        it.close()


@register_kernel("DatasetToSingleElement", async_=True)
def dataset_to_single_element(ctx, step, done, dataset):
    _finish(ctx, done, _single(check_dataset(dataset, "dataset"), Env(ctx.device)))

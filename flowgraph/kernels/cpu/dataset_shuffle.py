"""Shuffling (§4.5; TF's ShuffleDataset): a buffer of `buffer_size` elements; each output is a
uniformly random element of it, replaced by the next input element.

The order is fixed by the seeds and by this algorithm, element by element (`get_next`): fill
the buffer up to buffer_size, draw i uniform in [0, length), output buffer[i], move the last
element into its place. `get_many` (under a batch) yields exactly the same elements: it reads
the input elements those calls would read, in runs; draws all the indices in one call (a
Generator's draws for an array of bounds equal its draws bound by bound); and replays the
moves on element numbers. While the input gives runs of columns of one layout, the buffer is
kept as columns too, so a batch costs two gathers instead of 64 element tuples made and stacked
again; while it gives packed runs (a TFRecord source's records, dataset_packed.py), the buffer
is packed in an arena: a run is copied in, and one nogil call (Arena.shuffle) replays the moves
and gathers the bounds of the records drawn and kept. In that state, where the source has the
records a batch needs cut ahead, `take_packed` does get_many's work in one step (a batch asks
for it first): a refill of I2d's prefetch then makes no runs at all.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu import dataset_packed, loops
from flowgraph.kernels.cpu.dataset_base import scalar
from flowgraph.kernels.cpu.dataset_runs import Run, split
from flowgraph.kernels.cpu.dataset_transforms import RepeatDataset, Unary, UnaryIterator

_RESERVE = 1024  # draws made at a time for a full buffer (see _ShuffleIterator._reserved)


def _out(ctx):
    return ctx.attrs["output_types"], ctx.attrs["output_shapes"]


class ShuffleDataset(Unary):
    """TF's shuffle. Seeds (0, 0) mean a random seed. With `reshuffle_each_iteration`, each new
    iterator (each epoch under repeat) draws a fresh seed from a generator seeded once, so the
    orders differ by epoch yet repeat run to run."""

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
    """The buffer is `buffer`, a list of element tuples, or, while `columns` is not None, those
    columns (one array per component, the list's order along the first axis), or, while
    `packed` is not None, that Packed (a single string component). Draws of a
    full buffer's bound are made ahead in `reserve`; the generator is put back where the
    draws used leave it (`_settle`) before any other draw."""

    def __init__(self, input_iterator, buffer_size, rng):
        super().__init__(input_iterator)
        self.buffer = []
        self.columns = None
        self.packed = None
        self.arena = None  # where a packed buffer's records lie (dataset_packed.Arena)
        self.size = buffer_size
        self.rng = rng
        self.input_done = False
        self.reserve = None  # draws of bound buffer_size made ahead; see _reserved
        self.snapshot = None  # the generator's state before `reserve` was drawn
        self.used = 0  # draws of `reserve` taken

    async def get_next(self):
        self.raise_deferred()
        buf = self._as_list()
        while not self.input_done and len(buf) < self.size:
            element = await self.input.get_next()
            if element is None:
                self.input_done = True
            else:
                buf.append(element)
        if not buf:
            return None
        self._settle()
        i = int(self.rng.integers(len(buf)))
        element = buf[i]
        buf[i] = buf[-1]
        buf.pop()
        return element

    async def get_many(self, n):
        """What `n` calls of get_next would return (see the module docstring). An input error
        stops the draws where get_next would have raised it; the elements drawn before it
        are returned and the next call raises it."""
        self.raise_deferred()
        length = self._length()
        runs, error = await self._read(self.size - length + n - 1)
        fed = sum(r.n for r in runs)
        draws = self._draw(length, n, fed, error)
        if self._packed_pool(runs):
            packed = [r.packed for r in runs]
            picked, self.packed = self.arena.shuffle(self.packed, packed, self.size, draws)
            return self._out(Run.of_packed(picked) if len(picked) else None, error)
        picked, kept = _replay(length, self.size, fed, draws)
        pool = self._pool_columns(runs)
        if pool is not None:
            self.columns = [c[kept] for c in pool]
            run = Run.of_columns([c[picked] for c in pool]) if len(picked) else None
        else:
            elements = self._as_list() + [e for r in runs for e in r.elements]
            self.buffer = [elements[i] for i in kept.tolist()]
            run = Run.of_elements([elements[i] for i in picked.tolist()]) if len(picked) else None
        return self._out(run, error)

    def take_packed(self, n):
        """get_many(n) in one step where it would read its input's records as one span (a
        TFRecord source's cut ahead: Iterator.take_span) into a packed buffer kept full, and
        draw from the reserve, or, once the input is done, draw all n from the buffer: the
        same records read, the same draws and moves, without the runs, their rebased bounds
        and the generic path's checks (issue 11, I2d). None, with nothing done, elsewhere."""
        kept = self.packed
        if kept is None or self._deferred is not None:
            return None
        if self.input_done:  # an epoch's last draws, from the buffer alone
            if len(kept) < n:
                return None
            span, draws = None, self._draw(len(kept), n, 0, None)
        else:
            span = self.input.take_span(self.size - len(kept) + n - 1)
            if span is None:
                return None
            draws = self._reserved(n)
        picked, self.packed = self.arena.shuffle_span(kept, span, self.size, draws)
        return picked

    def _out(self, run: Run | None, error) -> Run | None:
        """The run drawn; with none, the input's error now, else on the next call."""
        if run is None and error is not None:
            raise error
        self._deferred = error
        return run

    def _draw(self, length: int, n: int, fed: int, error) -> np.ndarray:
        """The slots drawn for the bounds of _bounds(...), as get_next draws them one by one;
        while every bound is the full buffer's (all but an epoch's last draws), from the
        reserve without making the bounds."""
        k = _draws(length, self.size, n, fed, error)
        if k and length + fed - k + 1 >= self.size:
            return self._reserved(k)
        self._settle()
        if not k:
            return np.empty(0, np.int64)
        return self.rng.integers(0, _bounds(length, self.size, n, fed, error))

    def _reserved(self, n: int) -> np.ndarray:
        """The next `n` draws of the full buffer's bound from `reserve`, drawn _RESERVE at a
        time: a Generator call costs ~10 us however few it draws."""
        if self.reserve is None or self.used + n > len(self.reserve):
            self._settle()
            self.snapshot = self.rng.bit_generator.state
            self.reserve = self.rng.integers(self.size, size=max(n, _RESERVE))
            self.used = 0
        used = self.used
        self.used = used + n
        return self.reserve[used : used + n]

    def _settle(self) -> None:
        """Puts the generator where the draws taken so far leave it (the reserve's unused
        draws are given back: the state before it, advanced by as many draws as were used).
        A reserve used up (as I2d's batches of 64 use 1024 draws) left it there already."""
        if self.reserve is not None:
            if self.used < len(self.reserve):
                self.rng.bit_generator.state = self.snapshot
                if self.used:
                    self.rng.integers(self.size, size=self.used)
            self.reserve = None

    async def _read(self, want: int) -> tuple[list, Exception | None]:
        """Runs of up to `want` input elements in all, and the error that stopped the reading,
        if any; the end of the input sets input_done."""
        runs, got = [], 0
        while not self.input_done and got < want:
            try:
                run = await self.input.get_many(want - got)
            except Exception as e:  # noqa: BLE001 (raised once the draws before it are made)
                return runs, e
            if run is None:
                self.input_done = True
            else:
                runs.append(run)
                got += run.n
        return runs, None

    def _length(self) -> int:
        if self.packed is not None:
            return len(self.packed)
        return len(self.columns[0]) if self.columns is not None else len(self.buffer)

    def _packed_pool(self, runs) -> bool:
        """Whether the buffer stays packed in the arena: it is packed (or empty) and every
        run is packed; otherwise a packed buffer becomes columns."""
        if all(r.packed is not None for r in runs) and (
            self.packed is not None or (runs and self.columns is None and not self.buffer)
        ):
            if self.arena is None:
                self.arena = dataset_packed.Arena()
            return True
        if self.packed is not None:
            self.columns, self.packed = [self.packed.strings()], None
        return False

    def _pool_columns(self, runs) -> list | None:
        """The buffer's columns followed by the runs', when all are columns of one layout;
        None otherwise (the buffer then stays, or becomes, a list)."""
        parts = [] if self.columns is None else [self.columns]
        if self.columns is None and self.buffer:
            return None
        for r in runs:
            if not r.has_columns:
                return None
            parts.append(r.columns)
        if not parts or not parts[0]:
            return None
        layout = [(c.dtype, c.shape[1:]) for c in parts[0]]
        if any([(c.dtype, c.shape[1:]) for c in p] != layout for p in parts[1:]):
            return None
        if len(parts) == 1:
            return list(parts[0])
        return [np.concatenate(cs) for cs in zip(*parts)]

    def _as_list(self) -> list:
        """The buffer as a list of element tuples (columns are split back into elements)."""
        if self.packed is not None:
            self.columns, self.packed = [self.packed.strings()], None
        if self.columns is not None:
            self.buffer = split(self.columns, len(self.columns[0]))
            self.columns = None
        return self.buffer


def _bounds(length: int, size: int, n: int, fed: int, error) -> np.ndarray:
    """The buffer's length at each of up to `n` draws, starting from `length`, when `fed`
    input elements are appended as get_next appends them: none once the buffer is empty, and
    none from the draw whose refill meets `error`. Refills top the buffer up while input is
    left, so before draw t it holds min(size, length + fed - t) elements; a refill meets the
    error at the first draw where that is below `size`."""
    k = _draws(length, size, n, fed, error)
    return np.minimum(size, length + fed - np.arange(k, dtype=np.int64))


def _draws(length: int, size: int, n: int, fed: int, error) -> int:
    """How many draws _bounds makes."""
    available = length + fed
    return min(n, available if error is None else max(0, available - size + 1))


def _replay(length: int, size: int, fed: int, draws: np.ndarray) -> tuple:
    """get_next's moves for `draws` on element numbers (0 to length - 1 the buffer's, then the
    `fed` input elements'): the numbers drawn, and the buffer's numbers afterwards in order
    (input elements an error left unfed at the end, as get_next would have appended them)."""
    picked = np.empty(len(draws), np.intp)
    kept = np.empty(length + fed, np.intp)
    m = loops.compiled("shuffle_replay")(length, size, fed, draws, picked, kept)
    return picked, kept[:m]


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

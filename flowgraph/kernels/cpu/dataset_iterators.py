"""Iterator kernels of `tf.data`: an iterator is a resource in the device's containers (§4.7)
holding the position in one dataset; `MakeIterator` (re)starts it, `IteratorGetNext` is an
asynchronous kernel (§5.3) taking the next element, OutOfRangeError at the end.

Requests to one iterator are served one at a time in arrival order (TF serializes them too);
a request whose element is not ready (a prefetch still producing) leaves a continuation and
returns. If its step is cancelled meanwhile (a timeout, Session.close), the request fails with
the step's error, and the element that arrives later is kept for the next request.
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from flowgraph.core import errors
from flowgraph.core.protos import ResourceHandleProto
from flowgraph.core.shapes import TensorShape
from flowgraph.kernels.base import library_of, register_kernel
from flowgraph.kernels.cpu.blocking import CancelHook
from flowgraph.kernels.cpu.dataset_base import Env, check_dataset, drive

_END_MESSAGE = "End of sequence"


class IteratorResource:
    """One iterator's state. `iterator` is None until initialized. Fields guarded by `lock`."""

    def __init__(self, container: str, name: str, types, shapes, device_name: str):
        self.container, self.name = container, name
        self.device_name = device_name
        self.types = list(types)
        self.shapes = [TensorShape(s) for s in shapes]
        self.lock = threading.Lock()
        self.iterator = None
        self.busy = False  # a request is being served
        self.requests = collections.deque()  # (step, done) waiting their turn
        self.orphans = collections.deque()  # elements whose requester was cancelled

    def check(self, types, shapes, what: str) -> None:
        """`types`/`shapes` (of a dataset or of an op's attrs) must fit this iterator's."""
        if list(types) != self.types:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"{what} has types {[t.name for t in types]} that do not match the iterator's "
                f"types {[t.name for t in self.types]}",
            )
        for s, want in zip(shapes, self.shapes):
            if not TensorShape(s).is_compatible_with(want):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"{what} has shapes {[str(TensorShape(x)) for x in shapes]} that are not "
                    f"compatible with the iterator's shapes {[str(x) for x in self.shapes]}",
                )

    def initialize(self, dataset, env: Env) -> None:
        new = dataset.make_iterator(env)
        with self.lock:
            old, self.iterator = self.iterator, new
            self.orphans.clear()
        if old is not None:
            old.close()

    def close(self) -> None:
        with self.lock:
            old, self.iterator = self.iterator, None
        if old is not None:
            old.close()

    # -- GetNext --------------------------------------------------------------------------
    def get_next(self, step, done) -> None:
        """done(element) with the next element, done(None) at the end, done(None, error).
        An element ready in a prefetch's buffer is taken under one acquisition of the lock
        (the training step's thread calls this once per step)."""
        with self.lock:
            if self.busy:
                self.requests.append((step, done))
                return
            it = self.iterator
            ready = it.poll() if it is not None and not self.orphans else None
            if ready is None:
                self.busy = True
        if ready is not None:
            done(*ready)
        else:
            self._serve(step, done)

    def _serve(self, step, done) -> None:
        while True:
            with self.lock:
                orphan = self.orphans.popleft() if self.orphans else None
            it = self.iterator
            if orphan is not None:  # an element whose requester was cancelled comes first
                done(orphan)
            elif it is None:
                done(
                    None,
                    errors.FailedPreconditionError(
                        None,
                        None,
                        "GetNext() failed because the iterator has not been "
                        "initialized. Ensure that you have run the initializer operation for this "
                        "iterator before getting the next element.",
                    ),
                )
            elif (ready := it.poll()) is not None:
                done(*ready)
            else:
                request = _Request(self, step, done)
                result = drive(it.get_next(), request.later)
                if result is None:  # waits: the request continues serving when it completes
                    request.arm()
                    return
                done(result.value, result.error)
            nxt = self._next_request()
            if nxt is None:
                return
            step, done = nxt

    def _next_request(self):
        with self.lock:
            if self.requests:
                return self.requests.popleft()
            self.busy = False
            return None


class _Request:
    """A GetNext that waits: completed by the iterator chain, or failed by a cancellation."""

    __slots__ = ("done", "finished", "hook", "lock", "resource")

    def __init__(self, resource, step, done):
        self.resource = resource
        self.done = done
        self.lock = threading.Lock()
        self.finished = False
        self.hook = CancelHook(step, self.cancel)

    def arm(self):
        self.hook.arm()

    def _claim(self) -> bool:
        with self.lock:
            if self.finished:
                return False
            self.finished = True
            return True

    def cancel(self, error):
        if self._claim():
            self.done(None, error)

    def later(self, element, error):
        self.hook.disarm()
        if self._claim():
            self.done(element, error)
        elif element is not None:
            with self.resource.lock:
                self.resource.orphans.append(element)
        nxt = self.resource._next_request()
        if nxt is not None:
            self.resource._serve(*nxt)


# -- kernels ----------------------------------------------------------------------------------
def _resource(ctx) -> IteratorResource:
    cached = ctx.state
    a = ctx.attrs
    container = a.get("container", "")
    if cached is not None:
        try:
            if ctx.resources.lookup(container, cached.name) is cached:
                return cached
        except errors.NotFoundError:
            pass
    name = a.get("shared_name") or ctx.name

    def factory():
        return IteratorResource(
            container, name, a["output_types"], a["output_shapes"], ctx.device.name
        )

    res = ctx.resources.lookup_or_create(container, name, factory)
    res.check(a["output_types"], a["output_shapes"], f"Iterator op '{ctx.name}'")
    ctx.state = res
    return res


register_kernel("IteratorV2")(lambda ctx: _resource(ctx))
register_kernel("Iterator")(lambda ctx: _resource(ctx))


@register_kernel("MakeIterator")
def make_iterator(ctx, dataset, iterator):
    dataset = check_dataset(dataset, "dataset")
    iterator.check(dataset.output_types, dataset.output_shapes, "The dataset")
    iterator.initialize(dataset, Env(ctx.device))


@register_kernel("OneShotIterator")
def one_shot_iterator(ctx):
    """Made and initialized by its first run: the dataset comes from `dataset_factory`."""
    res = _resource(ctx)
    with res.lock:
        ready = res.iterator is not None or res.busy
    if not ready:
        with _ONE_SHOT_LOCK:
            if res.iterator is None:
                body = library_of(ctx.device).instantiate(ctx.attrs["dataset_factory"], ctx.device)
                (dataset,) = body([])
                dataset = check_dataset(dataset, "the dataset_factory's result")
                res.check(dataset.output_types, dataset.output_shapes, "The dataset")
                res.initialize(dataset, Env(ctx.device))
    return res


_ONE_SHOT_LOCK = threading.Lock()  # one-shot iterators initialize one at a time


def _get_next(ctx, step, done, iterator):
    single = len(ctx.attrs["output_types"]) == 1

    def finish(element=None, error=None):
        if error is not None:
            done(None, error)
        elif element is None:
            done(None, errors.OutOfRangeError(None, None, _END_MESSAGE))
        else:
            done(element[0] if single else element)

    iterator.get_next(step, finish)


register_kernel("IteratorGetNext", async_=True)(_get_next)
register_kernel("IteratorGetNextSync", async_=True)(_get_next)


@register_kernel("IteratorToStringHandle")
def iterator_to_string_handle(ctx, iterator):
    """A serialized ResourceHandleProto naming the iterator (TF's feedable-iterator handle)."""
    proto = ResourceHandleProto(
        device=iterator.device_name,
        container=iterator.container,
        name=iterator.name,
        maybe_type_name="IteratorResource",
    )
    return np.array(proto.SerializeToString(), dtype=object)


@register_kernel("IteratorFromStringHandleV2")
def iterator_from_string_handle(ctx, handle):
    proto = ResourceHandleProto()
    try:
        proto.ParseFromString(bytes(np.asarray(handle, dtype=object).item()))
    except Exception:  # noqa: BLE001 (any malformed bytes)
        raise errors.InvalidArgumentError(
            None, None, "Could not parse an iterator handle from the string_handle"
        ) from None
    if proto.maybe_type_name != "IteratorResource":
        raise errors.InvalidArgumentError(None, None, "The string handle is not an iterator's")
    res = ctx.resources.lookup(proto.container, proto.name)
    if ctx.attrs["output_types"]:
        res.check(
            ctx.attrs["output_types"],
            ctx.attrs["output_shapes"] or res.shapes,
            "The feedable iterator",
        )
    return res

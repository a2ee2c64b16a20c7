"""A step as its kernels see it (TF's per-step state and OpKernelContext): the step id, the
rendezvous, per-step resources, stats, the deadline and the cancellation manager, the
(frame, iteration) tag of the node being run, and how a kernel's failure reads (the TF error
class, naming the node, its op and its device). The executor (executor.py) and the fixed
schedule (schedule.py) run steps; function calls (function.py) and workers make them."""

from __future__ import annotations

import queue
import threading
import time

import numpy as np

from flowgraph.core import errors
from flowgraph.core.cancellation import CancellationManager
from flowgraph.runtime.plan import NodeItem
from flowgraph.runtime.resources import StepContainer

_CONTAINER_LOCK = threading.Lock()


class Step:
    """The per-step state: its id, rendezvous, step-local resources, stats, deadline.

    A step kernel inside a loop receives a StepContext, which adds the (frame, iteration) tag
    of the node being run. `frame_id`/`iter_id` here are constants,
    the root frame's: kernels of the root iteration receive the Step itself as their context
    (one object less per step), as do callers that run kernels outside the executor."""

    __slots__ = (
        "_container",
        "cancellation",
        "deadline",
        "feeds_sent",
        "rendezvous",
        "resources",
        "stats",
        "step_id",
    )

    frame_id = 0
    iter_id = 0

    def __init__(
        self, step_id, rendezvous, stats=None, timeout_ms: int = 0, container=None, feeds_sent=True
    ):
        self.step_id = step_id
        self.rendezvous = rendezvous
        self.resources = {}  # a function call's arguments and results (kernels/functional.py)
        self.stats = stats
        self.cancellation = CancellationManager()  # Session.close, the deadline, a failure
        self.deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
        # Every client feed is in the rendezvous before the step starts (False for a partial
        # run, fed later): a fixed schedule (schedule.py) may then receive them in its order.
        self.feeds_sent = feeds_sent
        # The per-step resources (TensorArrays, stacks), made on first use; a function call
        # shares its caller's (TF's step_container), so a handle made outside resolves inside.
        self._container = container

    @property
    def container(self) -> StepContainer:
        """The step's resource container on every device of this worker."""
        container = self._container
        if container is None:
            with _CONTAINER_LOCK:  # two partitions may make their first TensorArray at once
                container = self._container
                if container is None:
                    container = self._container = StepContainer(f"__per_step_{self.step_id}")
        return container

    def end(self) -> None:
        """Drops the step's per-step resources: called once its kernels on this worker are done."""
        if self._container is not None:
            self._container.cleanup()
            self._container = None

    def left_clean(self) -> bool:
        """Whether this ended step left nothing behind: not cancelled, no cancellation
        callback, function-call value or rendezvous value left, so the next step of the same
        plan may reuse it with a new id and deadline (local_run.py) instead of making one."""
        cancellation = self.cancellation
        return (
            not cancellation.is_cancelled
            and not len(cancellation)
            and not self.resources
            and self.rendezvous.is_empty()
        )

    @property
    def cancelled(self) -> bool:
        return self.cancellation.is_cancelled

    def cancel(self, error: errors.OpError) -> None:
        """Ends the step: every pending async kernel (a Recv, a blocked dequeue) fails with
        `error` now, and so does every later Recv of the step."""
        self.cancellation.start_cancel(error)
        self.rendezvous.abort(error)

    def wait(self, completions):
        """The next completion; DeadlineExceededError once the step's deadline has passed."""
        if self.deadline is None:
            return completions.get()
        try:
            return completions.get(timeout=max(0.0, self.deadline - time.monotonic()))
        except queue.Empty:
            error = errors.DeadlineExceededError(
                None, None, "Timed out waiting for the step to finish"
            )
            self.cancel(error)
            raise error from None


class StepContext:
    """What a step kernel receives (TF's OpKernelContext, per execution): the services of its
    step and the tag of the node being run, `frame_id`:`iter_id`. The tag is the kernel's own,
    never a field of the shared Step, which the partitions of a step run concurrently."""

    __slots__ = ("frame_id", "iter_id", "step")

    def __init__(self, step: Step, frame_id: int, iter_id: int):
        self.step = step
        self.frame_id = frame_id
        self.iter_id = iter_id

    step_id = property(lambda self: self.step.step_id)
    rendezvous = property(lambda self: self.step.rendezvous)
    resources = property(lambda self: self.step.resources)
    container = property(lambda self: self.step.container)
    stats = property(lambda self: self.step.stats)
    cancelled = property(lambda self: self.step.cancelled)
    cancellation = property(lambda self: self.step.cancellation)
    deadline = property(lambda self: self.step.deadline)


def node_error(item: NodeItem, device_name: str, e: BaseException) -> BaseException:
    """The TF error class for a kernel failure, naming the node, its op and its device.

    KeyboardInterrupt and SystemExit (Ctrl-C or sys.exit inside a kernel) are not kernel
    failures: they are returned unchanged, so the step is cancelled and the caller gets them."""
    if not isinstance(e, Exception):
        return e
    if isinstance(e, errors.OpError):
        cls, msg = type(e), e.message
    elif isinstance(
        e,
        (
            ValueError,
            TypeError,
            IndexError,
            ZeroDivisionError,
            FloatingPointError,
            np.linalg.LinAlgError,
        ),
    ):
        cls, msg = errors.InvalidArgumentError, str(e)
    elif isinstance(e, MemoryError):
        cls, msg = errors.ResourceExhaustedError, f"OOM when running the kernel: {e}"
    else:
        cls, msg = errors.UnknownError, f"{type(e).__name__}: {e}"
    err = cls(
        None, None, f"{msg}\n\t [[node {item.node.name} (op: {item.node.op}) on {device_name}]]"
    )
    err.node_name = item.node.name
    err.__cause__ = e
    return err

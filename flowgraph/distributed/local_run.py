"""A signature's steps on the master's own in-process worker, without the request layers.

A Run crosses the master and the worker by request and response messages (RunStepRequest,
RunGraphRequest, their responses, a RunningStep and CallOptions per call) because in general
the worker is another process. When it is not, and the signature's plan is one RunGraph on
a worker that has no peers (a local Session, a one-task server's own clients), all that is
Python spent per run: an input thread's enqueue run paid ~17 us of layers around a ~50 us
kernel, 1:1 against the training step it shares the GIL with (issue 11, I2). A LocalRun,
made once per callable or per cached Run signature, goes from the client's feed values
straight to the worker's executor and back: the step keeps its id, deadline, cancellation
(Session.close and a closing worker end it as they end a RunGraph's step) and errors, and a
step that ended clean (nothing cancelled, no value or callback left behind) is reused by the
next run of the same signature, its rendezvous and cancellation manager with it.

Whenever the plan is not of that kind (several tasks, a traced or cost-measured step, a graph
that sends to a peer), or the session is closed, `__call__` returns None and the caller takes
the request path, which reports what it reports there; a plan dropped by Extend or a restart
is looked up again on the next run.
"""

from __future__ import annotations

import time

from flowgraph.core import errors
from flowgraph.distributed.worker import Worker, fetched
from flowgraph.runtime.partial_execution import Signature
from flowgraph.runtime.rendezvous import LocalRendezvous
from flowgraph.runtime.step import Step


class LocalRun:
    """Runs `sig` of MasterSession `session` with RunOptions `options` (None: none) in the
    calling thread; see the module docstring. Safe to call from many threads at once: each
    run takes its own step from the free list (list pop and append are atomic)."""

    __slots__ = (
        "_free",
        "feeds",
        "fetch_keys",
        "options",
        "plans",
        "session",
        "sig",
        "tasks",
        "timeout_ms",
        "version",
        "worker",
    )

    def __init__(self, session, sig: Signature, options=None):
        self.session = session
        self.sig = sig
        self.options = options
        self.timeout_ms = session.step_timeout_ms(options)
        self.version = None  # the session's plans_version when bound; None: never bound
        self.worker = None  # None: this signature takes the request path
        self._free: list[_Slot] = []

    def _bind(self) -> None:
        """Looks the plan up (made now if it is not) and decides whether it runs here."""
        session = self.session
        version = session.plans_version  # read first: a plan dropped meanwhile binds again
        plan = session.plan(self.sig, timeout_ms=self.timeout_ms)
        self.worker = None
        self._free = []
        if _runs_here(session, plan, self.options):
            call = plan.calls[0]
            self.worker = call.worker
            self.plans = call.worker.plans(call.graph_handle)
            self.tasks = plan.tasks
            self.feeds = tuple(call.feeds)
            self.fetch_keys = tuple(call.fetch_keys[k] for _, k in plan.fetch_slots)
        self.version = version

    def __call__(self, feed_values) -> list | None:
        """The fetched values in `sig.fetches` order, or None: take the request path."""
        session = self.session
        if session.closed:
            return None
        if self.version != session.plans_version:
            self._bind()
        worker = self.worker
        if worker is None:
            return None
        free = self._free
        try:
            slot = free.pop()
        except IndexError:
            slot = _Slot(self.tasks)
        step = slot.step
        step.step_id = session.next_step_id()
        if self.timeout_ms > 0:
            step.deadline = time.monotonic() + self.timeout_ms / 1000
        rendezvous = step.rendezvous
        for key, i in self.feeds:
            rendezvous.send(key, feed_values[i])
        running = session.running
        running.add(slot)  # Session.close aborts it (set.add/discard are atomic)
        try:
            worker.run_local(self.plans, step)
        except errors.OpError as e:
            if slot.error is not None:  # aborted (closed): its error, not the kernel's
                raise slot.error from e
            raise
        finally:
            running.discard(slot)
        out = [fetched(rendezvous, key) for key in self.fetch_keys]
        if slot.error is None and step.left_clean():
            free.append(slot)
        return out


class _Slot:
    """A reusable step of a LocalRun, as MasterSession.running sees it (like RunningStep):
    the `tasks` it runs on and `abort(error)`, which cancels it; `error` is then the step's."""

    __slots__ = ("error", "step", "tasks")

    def __init__(self, tasks: frozenset):
        self.tasks = tasks
        self.error: errors.OpError | None = None
        self.step = Step(0, LocalRendezvous())

    def abort(self, error: errors.OpError) -> None:
        if self.error is None:
            self.error = error
        self.step.cancel(error)


def _runs_here(session, plan, options) -> bool:
    """Whether `plan`'s steps run as a LocalRun: one call, to an in-process worker without
    peers (nothing to clean up on another task), untraced and unmeasured, no metadata."""
    if options is not None and (options.trace_level > 0 or options.output_partition_graphs):
        return False
    if session.cost_model is not None or len(plan.calls) != 1:
        return False
    call = plan.calls[0]
    return isinstance(call.worker, Worker) and call.worker.alone and not call.cleanup

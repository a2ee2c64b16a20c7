"""A master session's tasks failing (whitepaper §3.3, fault tolerance): the steps in flight,
which a health check (health.py) or a closing session aborts, and a task's restart, which the
session notices (new device incarnations), answers by registering its graphs there again, and
reports once as AbortedError naming the task.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING

from flowgraph.core import errors
from flowgraph.distributed import messages as m
from flowgraph.distributed.worker_cache import DeviceInfo, task_of

if TYPE_CHECKING:
    from flowgraph.distributed.step_plan import StepPlan


class RunningStep:
    """A step in flight: the tasks its plan runs on and its RunGraph calls' CallOptions.
    `abort(error)` cancels every call; `error` is then the step's failure, whatever the calls
    report (their cancellations), and `aborted` (a Future, made for steps of several calls) is
    done: the step stops waiting for calls to a peer that cannot answer (a hung task)."""

    __slots__ = ("aborted", "error", "opts", "tasks")

    def __init__(self, tasks: frozenset, opts: list):
        self.tasks = tasks
        self.opts = opts
        self.error: errors.OpError | None = None
        self.aborted: Future | None = None

    def abort(self, error: errors.OpError) -> None:
        if self.error is None:
            self.error = error
        for call_opts in self.opts:
            call_opts.start_cancel(error)
        if self.aborted is not None:
            with contextlib.suppress(InvalidStateError):  # aborted already, by another thread
                self.aborted.set_result(None)


class TaskFailures:
    """MasterSession's failure handling (a mixin: the session is the one class using it). It
    uses the session's `_lock` (guarding `devices`, `_plans` and `_restarts`), `_unreachable`
    (task -> the last failed health check's error until it answers one; dict operations are
    atomic), `tasks`, `running`, `handle`, `local_task`, `create_request`, `worker(task)`,
    `_drop(sig)`, and for a task back with other devices `nodes`, `placed`,
    `session_devices` and `_place_all`."""

    # -- failures ----------------------------------------------------------------------------------
    def observe(self, task: str, attributes) -> None:
        """`task` answered GetStatus with `attributes`. If its devices have a new incarnation
        it was restarted, empty: its worker session is made again and the plans that ran
        there are dropped (the next step plans and registers them again); if it came back
        with other devices, the nodes on devices it lost are placed again. The restart is
        reported once, as AbortedError: to the steps running there, else to the next step
        that runs there, so that a client learns its state there is gone."""
        self._unreachable.pop(task, None)
        fresh = {a.name: DeviceInfo.from_attributes(a) for a in attributes}
        with self._lock:
            mine = [d for d in self.devices if task_of(d.name) == task]
            if all(d.name in fresh and fresh[d.name].incarnation == d.incarnation for d in mine):
                return
            # first the new worker session: if the task is gone again, the next check retries
            self.worker(task).create_worker_session(self.create_request)
            error = errors.AbortedError(
                None,
                None,
                f"Task {task} was restarted: what it held (variables, queues) is gone. The "
                "step was aborted; the session registers its graphs again and runs the next "
                "one (initialize or restore the state first)",
            )
            if {d.name for d in mine} == set(fresh):
                self.devices = tuple(
                    fresh.get(d.name, d) if task_of(d.name) == task else d for d in self.devices
                )
                for sig, plan in list(self._plans.items()):
                    if task in plan.tasks:
                        self._drop(sig)
            else:  # it has other devices now: what was placed on the lost ones moves
                self._replace_devices(task, list(fresh.values()))
            self._restarts[task] = error
        aborted = [step for step in self.running.copy() if task in step.tasks]
        for step in aborted:
            step.abort(error)
        if aborted:
            with self._lock:
                self._restarts.pop(task, None)  # reported by the steps it aborted

    def _replace_devices(self, task: str, infos: list[DeviceInfo]) -> None:
        """`task` came back from a restart with other devices: they replace its old ones, and
        the nodes placed on a device that is gone are placed again (needs `_lock`). Each
        plan is dropped: the next step plans the new placement."""
        new = self.session_devices(task, infos)
        devices = []
        for d in self.devices:
            if task_of(d.name) != task:
                devices.append(d)
            elif new:  # the task's new devices take its old ones' place in the order
                devices.extend(new)
                new = []
        self.devices = tuple(devices + new)
        self.tasks = frozenset(task_of(d.name) for d in self.devices)
        names = {d.name for d in self.devices}
        gone = {name for name, n in self.placed.items() if n.device not in names}
        self.placed = self._place_all(self.nodes, gone)
        for sig in list(self._plans):
            self._drop(sig)

    def _report_restart(self, tasks: frozenset) -> None:
        """Raises, once, the AbortedError of a restart of one of `tasks` not yet reported."""
        with self._lock:
            restarted = [task for task in self._restarts if task in tasks]
            if restarted:
                raise self._restarts.pop(restarted[0])

    def task_unreachable(self, task: str, cause: errors.OpError) -> None:
        """A health check of `task` failed: the steps running there fail with
        UnavailableError naming it, at once, whatever they wait on; so does a step whose
        plan was being registered there (`_verdict`) until the task answers a check again."""
        error = errors.UnavailableError(
            None, None, f"Task {task} is unreachable (health check: {short(cause)})"
        )
        self._unreachable[task] = error
        for step in self.running.copy():
            if task in step.tasks:
                step.abort(error)

    def _verdict(self, error: errors.OpError) -> errors.OpError:
        """The error of a failed registration: a health check's verdict on a task of this
        session if there is one (its calls were ended because it hung: gRPC then reports
        CancelledError 'Channel closed'), else `error`."""
        transport = (errors.CancelledError, errors.UnavailableError, errors.DeadlineExceededError)
        if not isinstance(error, transport):
            return error
        for task, verdict in list(self._unreachable.items()):
            if task in self.tasks:
                return verdict
        return error

    def _step_error(self, plan: StepPlan, step: RunningStep, error: errors.OpError):
        """The error a failed step reports: a health check's verdict if one aborted it, else
        `error` or the restart that caused it (`_restart_error`)."""
        if step.error is not None:
            return step.error
        if isinstance(error, errors.AbortedError):
            return self._restart_error(plan.tasks, error)
        return error

    def _restart_error(self, tasks: frozenset, error: errors.AbortedError) -> errors.OpError:
        """A task that does not know this session's handles (AbortedError) may have been
        restarted: asks each of `tasks` for its incarnation, and returns the restart found
        (reported now) or else `error`."""
        for task in tasks - {self.local_task}:
            try:
                status = self.worker(task).get_status(m.GetStatusRequest())
                self.observe(task, status.device_attributes)
            except errors.OpError:
                continue  # down, or down again: the next step or check finds out
        try:
            self._report_restart(tasks)
        except errors.AbortedError as restart:
            return restart
        return error


def short(error: Exception) -> str:
    """The first line of an error's message."""
    text = getattr(error, "message", None) or str(error)
    return text.splitlines()[0] if text else type(error).__name__

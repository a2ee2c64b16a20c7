"""Health checks of a cluster's tasks (whitepaper §3.3, fault tolerance).

A step fails fast when a task it needs dies, because the RPCs to that task fail as soon as its
sockets close. A task that hangs (stopped, swapped out, cut off by the network) closes nothing:
without a check, the step would wait on it until a deadline or the transport's keepalive (15
s). So the master of each task asks every other task for its status (GetStatus) once a period,
`ConfigProto.experimental.health_check_period_ms` (flowgraph's field 1003; 1000 ms unless
set, off when negative), with a deadline of twice that period and at least MIN_DEADLINE_S.
A task that does not answer in time is unreachable: the running steps that need it are failed
with UnavailableError naming it. A task that answers with devices of a new incarnation was
restarted: its state is gone, and each session registers its graphs there again
(MasterSession.observe).

Workers check their sessions' masters the same way (a MasterWatch per session whose master is
on another task, at the period of the session's config, which CreateWorkerSession carries): a
master that does not answer in time may be hung mid-step, so the worker ends the session's
running steps (UnavailableError naming the master) and frees their rendezvous instead of
waiting for a CleanupGraph that may never come; a master of a new incarnation has lost the
session, which the worker then deletes.
"""

from __future__ import annotations

import logging
import threading

from flowgraph.core import errors
from flowgraph.core.protos import ConfigProto

logger = logging.getLogger(__name__)
DEFAULT_PERIOD_MS = 1000
MIN_DEADLINE_S = 2.0  # a busy task on a loaded machine still answers GetStatus within this


def period_ms(config) -> int:
    """The health-check period a session's ConfigProto asks for; <= 0: no checks."""
    period = config.experimental.health_check_period_ms
    return DEFAULT_PERIOD_MS if period == 0 else period


class HealthMonitor:
    """Checks the other tasks of one master's cluster for its open sessions, on one thread
    that runs while some session wants checks, at the shortest period they ask for.
    `_cond` guards `_sessions` and `_closed`."""

    def __init__(self, worker_cache, local_task: str):
        self._cache = worker_cache
        self._local_task = local_task
        self._cond = threading.Condition()
        self._sessions: dict = {}  # MasterSession -> its period in ms
        self._closed = False
        self._thread: threading.Thread | None = None

    def add(self, session) -> None:
        """Checks the tasks of `session` from now until `remove(session)`."""
        period = period_ms(session.config)
        if period <= 0:
            return
        with self._cond:
            self._sessions[session] = period
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="health-checks", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def remove(self, session) -> None:
        with self._cond:
            self._sessions.pop(session, None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._sessions:
                    self._cond.wait()
                if self._closed:
                    return
                period = min(self._sessions.values()) / 1000
                # a timer, not synchronization: the checks run once a period; close() wakes it
                self._cond.wait(period)
                if self._closed:
                    return
                sessions = list(self._sessions)
            if sessions:
                self.check(sessions, max(2 * period, MIN_DEADLINE_S))

    def check(self, sessions: list, deadline_s: float) -> None:
        """Asks the other tasks of `sessions` for their status at once, then tells each
        session what each of its tasks answered (`observe`) or that it did not
        (`task_unreachable`)."""
        tasks = sorted(frozenset().union(*(s.tasks for s in sessions)) - {self._local_task})
        waits = [(t, self._cache.get_worker(t).start_get_status(deadline_s)) for t in tasks]
        for task, wait in waits:
            mine = [session for session in sessions if task in session.tasks]
            try:
                status = wait()
            except errors.OpError as e:
                logger.info("health check of %s failed: %s", task, e.message)
                for session in mine:
                    session.task_unreachable(task, e)
                if isinstance(e, errors.DeadlineExceededError):  # hung: its sockets stay open
                    self._cache.reconnect(task)
                continue
            for session in mine:
                try:
                    session.observe(task, status.device_attributes)
                except errors.OpError as e:  # the task went away again while re-registering
                    logger.info("re-registering with %s failed: %s", task, e.message)


class MasterWatch:
    """The HealthMonitor's view of one worker session whose master is on another task: it
    has the `tasks`, `config`, `observe` and `task_unreachable` of a MasterSession, and acts
    on the worker (see the module docstring)."""

    def __init__(self, worker, handle: str, master_task: str, incarnation: int, config):
        self.tasks = frozenset([master_task])
        self.config = config if config is not None else ConfigProto()
        self._worker = worker
        self._handle = handle
        self._incarnation = incarnation % (1 << 64)  # (sent as a signed int64)

    def observe(self, task: str, device_attributes: list) -> None:
        if not (self._incarnation and device_attributes):
            return
        if device_attributes[0].incarnation % (1 << 64) != self._incarnation:
            self._worker.end_session(
                self._handle,
                errors.AbortedError(
                    None, None, f"The master of session {self._handle}, {task}, was restarted"
                ),
            )

    def task_unreachable(self, task: str, error: errors.OpError) -> None:
        self._worker.end_session_steps(
            self._handle,
            errors.UnavailableError(
                None,
                None,
                f"The master of session {self._handle}, {task}, did not answer its health "
                f"check: {error.message}",
            ),
        )

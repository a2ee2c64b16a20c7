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

Workers check their peers too (a PeerWatch per task that some registered graph receives
tensors from, whatever the number of graphs and sessions; PeerWatches keeps them): a step
blocked on a Recv from a hung peer would otherwise wait for the master's check to fail the
step, and a step whose peer restarted waits forever, since the new process sends under keys
of its new incarnation. A peer that does not answer in time ends the steps of the graphs that
receive from it (UnavailableError naming the peer and the checking worker), one with devices
of another incarnation than a graph's _Recv nodes name ends that graph's steps
(AbortedError); ending a step cancels its in-flight Recvs. A peer that refuses connections
needs no check: its transfers fail by themselves. Only receiving can block a step:
a peer that this worker sends to has nothing for it to wait on. The checks share the
HealthMonitor (and its one GetStatus per task and period) with the task's master sessions
and master watches.
"""

from __future__ import annotations

import logging
import threading

from flowgraph.core import errors
from flowgraph.core.protos import ConfigProto
from flowgraph.distributed.step_failures import short
from flowgraph.distributed.worker_cache import signed64, task_of

logger = logging.getLogger(__name__)
DEFAULT_PERIOD_MS = 1000
# A busy task on a loaded machine still answers GetStatus within this: 2 s was missed by a
# live task (a 2-core machine at load 12, its answer waiting on GIL hand-offs), which failed
# its step; with the default period a hung task is still found within 4 s.
MIN_DEADLINE_S = 3.0


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

    def add(self, session, period: int | None = None) -> None:
        """Checks the tasks of `session` from now until `remove(session)`, every `period` ms
        (its config's period if None); adding it again sets its period."""
        if period is None:
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
        """Stops the checks; `join` waits for a check in flight to end."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def join(self, timeout: float | None = None) -> None:
        """Waits for the loop to end after `close` (at most a check's deadline: close the
        worker cache first, which ends its GetStatus calls)."""
        with self._cond:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

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


class PeerWatch:
    """The HealthMonitor's view of one peer task that graphs registered on a worker receive
    from (see the module docstring): `graphs` maps each such graph handle to its period and
    the incarnations its _Recv nodes name by device of the peer (0: not named, learnt from
    the first answer). `lock` is its PeerWatches' and guards `graphs`."""

    def __init__(self, worker, task: str, lock: threading.Lock):
        self.tasks = frozenset([task])
        self.graphs: dict[str, tuple[int, dict[str, int]]] = {}
        self.lock = lock
        self._worker = worker

    def period(self) -> int:
        return min(period for period, _ in self.graphs.values())

    def observe(self, task: str, device_attributes: list) -> None:
        fresh = {a.name: signed64(a.incarnation) for a in device_attributes}
        with self.lock:
            stale = set()
            for handle, (_, expected) in self.graphs.items():
                for device, incarnation in expected.items():
                    if not incarnation and device in fresh:
                        expected[device] = fresh[device]
                    elif fresh.get(device) != incarnation:
                        stale.add(handle)
        if stale:
            self._worker.end_graph_steps(
                stale,
                errors.AbortedError(
                    None,
                    None,
                    f"Peer task {task} was restarted (a health check of {self._worker.task} "
                    "found devices of a new incarnation): the tensors the step receives from "
                    "it are lost",
                ),
            )

    def task_unreachable(self, task: str, error: errors.OpError) -> None:
        """Only a check that ran out of time ends steps: a peer that refuses connections is
        gone, its transfers fail by themselves, and a gRPC channel may keep failing calls for
        a while after the peer is back (its reconnect backoff), which would end new steps."""
        if not isinstance(error, errors.DeadlineExceededError):
            return
        with self.lock:
            graphs = set(self.graphs)
        self._worker.end_graph_steps(
            graphs,
            errors.UnavailableError(
                None,
                None,
                f"Peer task {task} is unreachable: it did not answer the health check of "
                f"{self._worker.task} ({short(error)})",
            ),
        )


class PeerWatches:
    """A worker's PeerWatches, one per peer task while some registered graph receives from it
    and its session asks for checks (the worker's `health` monitor runs them)."""

    def __init__(self, worker):
        self._worker = worker
        self._lock = threading.Lock()
        self._watches: dict[str, PeerWatch] = {}  # peer task -> its watch; guarded by _lock

    def add_graph(self, handle: str, period: int, peers: dict[str, dict[str, int]]) -> None:
        """Watches `peers` (recv_peers of graph `handle`) every `period` ms (off if <= 0)."""
        monitor = self._worker.health
        if monitor is None or period <= 0:
            return
        with self._lock:
            for task, incarnations in peers.items():
                watch = self._watches.get(task)
                if watch is None:
                    watch = self._watches[task] = PeerWatch(self._worker, task, self._lock)
                watch.graphs[handle] = (period, dict(incarnations))
                monitor.add(watch, watch.period())

    def remove_graphs(self, handles) -> None:
        """Stops watching for the graphs `handles` (deregistered, or their session deleted);
        a peer no graph receives from any more is no longer checked."""
        monitor = self._worker.health
        with self._lock:
            for task, watch in list(self._watches.items()):
                if not [h for h in handles if watch.graphs.pop(h, None)]:
                    continue
                if watch.graphs:
                    monitor.add(watch, watch.period())
                else:
                    del self._watches[task]
                    monitor.remove(watch)

    def watched(self) -> dict[str, frozenset]:
        """Peer task -> the graph handles that receive from it (for tests and debugging)."""
        with self._lock:
            return {task: frozenset(w.graphs) for task, w in self._watches.items()}


def recv_peers(nodes, task: str) -> dict[str, dict[str, int]]:
    """The tasks other than `task` that the _Recv nodes among `nodes` receive from, each with
    the incarnations those Recvs' keys name, by device."""
    peers: dict[str, dict[str, int]] = {}
    for node in nodes:
        if node.op != "_Recv" or node.attrs.get("client_terminated"):
            continue
        device = node.attrs["send_device"]
        peer = task_of(device)
        if peer != task:
            peers.setdefault(peer, {})[device] = node.attrs["send_device_incarnation"]
    return peers

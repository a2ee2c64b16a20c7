"""The master (whitepaper §3.3): receives the client's graph and Run requests and drives the
workers. Method names are TensorFlow's MasterService RPCs in snake case; requests and
responses are the in-memory messages of messages.py.

The master knows the workers through a worker cache (task name -> WorkerInterface), so the
same code serves a local Session (one in-process worker) and a cluster (in-process or gRPC
workers). Each session's graph, placement and signature cache live in a MasterSession
(master_session.py).
"""

from __future__ import annotations

import itertools
import os
import threading

from flowgraph.core import errors
from flowgraph.distributed import messages as m
from flowgraph.distributed.master_session import RUN_GRAPH_MARGIN_MS, MasterSession
from flowgraph.distributed.step_plan import StepPlan
from flowgraph.distributed.worker_cache import CallOptions
from flowgraph.runtime.partial_execution import Signature


class _PartialRun:
    """A partial run's bookkeeping on the master: which feeds and fetches are still owed
    (each may be given once) and the step's id and cancellation."""

    def __init__(self, plan: StepPlan, sig: Signature, step_id: int, timeout_ms: int = 0):
        self.plan = plan
        self.step_id = step_id
        self.feed_keys = dict(zip(sig.feeds, plan.feed_keys))
        self.fetch_keys = dict(zip(sig.fetches, plan.fetch_keys))
        self.fed: set[str] = set()
        self.fetched: set[str] = set()
        self.started = False
        # a call's RPCs wait a margin longer than the workers' deadline of its waits
        self.call_opts = CallOptions(timeout_ms + RUN_GRAPH_MARGIN_MS if timeout_ms > 0 else 0)
        self.lock = threading.Lock()  # one partial_run call of this step at a time

    def claim(self, feeds, fetches) -> None:
        """Marks `feeds` fed and `fetches` fetched; TF's errors for unknown or repeated ones."""
        for name in feeds:
            if name not in self.feed_keys:
                raise errors.InvalidArgumentError(
                    None, None, f"The feed {name} was not specified in partial_run_setup."
                )
            if name in self.fed:
                raise errors.InvalidArgumentError(
                    None, None, f"The feed {name} has already been fed."
                )
        for name in fetches:
            if name not in self.fetch_keys:
                raise errors.InvalidArgumentError(
                    None, None, f"The fetch {name} was not specified in partial_run_setup."
                )
            if name in self.fetched:
                raise errors.InvalidArgumentError(
                    None, None, f"The fetch {name} has already been fetched."
                )
        self.fed.update(feeds)
        self.fetched.update(fetches)

    def finished(self) -> bool:
        return len(self.fetched) == len(self.fetch_keys) and len(self.fed) == len(self.feed_keys)


class Master:
    """The master of one process. `_lock` guards `_sessions`, `_partial` and `_callables`.
    A master of a cluster over a network has a HealthMonitor (health.py) checking the other
    tasks for its sessions; an in-process one needs none."""

    def __init__(self, worker_cache, local_task: str, health=None):
        self.worker_cache = worker_cache
        self.local_task = local_task  # its devices come first in placement
        self.health = health
        self._sessions: dict[str, MasterSession] = {}
        self._partial: dict[str, tuple[MasterSession, _PartialRun]] = {}
        self._callables: dict[int, tuple[MasterSession, Signature, object]] = {}
        self._lock = threading.Lock()
        self._handles = itertools.count(1)
        self._nonce = os.urandom(4).hex()

    def _session(self, handle: str) -> MasterSession:
        session = self._sessions.get(handle)
        if session is None:
            raise errors.AbortedError(
                None, None, f"Session {handle} is not found. Possibly, this master has restarted."
            )
        return session

    def session(self, handle: str) -> MasterSession:
        """The MasterSession behind `handle` (for in-process callers and tests)."""
        return self._session(handle)

    # -- sessions ----------------------------------------------------------------------------
    def create_session(self, req: m.CreateSessionRequest) -> m.CreateSessionResponse:
        handle = f"session_{self._nonce}_{next(self._handles)}"
        session = MasterSession(handle, self.worker_cache, self.local_task, req.config)
        version = 0
        if req.graph_def is not None and (len(req.graph_def.node) or req.graph_def.library):
            version = session.extend(req.graph_def)
        with self._lock:
            self._sessions[handle] = session
        if self.health is not None:
            self.health.add(session)
        return m.CreateSessionResponse(session_handle=handle, graph_version=version)

    def extend_session(self, req: m.ExtendSessionRequest) -> m.ExtendSessionResponse:
        session = self._session(req.session_handle)
        if session.closed:
            raise RuntimeError("Attempted to use a closed Session.")
        version = session.extend(req.graph_def, req.replace)
        return m.ExtendSessionResponse(new_graph_version=version)

    def close_session(self, req: m.CloseSessionRequest) -> m.CloseSessionResponse:
        with self._lock:
            session = self._sessions.pop(req.session_handle, None)
            partial = [(h, s) for h, (sess, s) in self._partial.items() if sess is session]
            for h, _ in partial:
                del self._partial[h]
            self._callables = {k: v for k, v in self._callables.items() if v[0] is not session}
        if session is None:
            return m.CloseSessionResponse()
        if self.health is not None:
            self.health.remove(session)
        error = errors.CancelledError(None, None, "Session was closed during a partial run")
        for _, state in partial:
            state.call_opts.start_cancel(error)
        session.close()
        for _, state in partial:
            session.end_step(state.step_id)
        return m.CloseSessionResponse()

    def list_devices(self, req: m.ListDevicesRequest) -> m.ListDevicesResponse:
        local, remote = [], []
        for task in self.worker_cache.list_workers():
            attrs = self.worker_cache.get_worker(task).get_status(m.GetStatusRequest())
            (local if task == self.local_task else remote).extend(attrs.device_attributes)
        return m.ListDevicesResponse(local_device=local, remote_device=remote)

    def reset(self, req: m.ResetRequest) -> m.ResetResponse:
        """Closes every session of this master and drops the named resource containers (the
        default one if none) on every worker (TF's Session.reset)."""
        with self._lock:
            handles = list(self._sessions)
        for handle in handles:
            self.close_session(m.CloseSessionRequest(session_handle=handle))
        for task in self.worker_cache.list_workers():
            self.worker_cache.get_worker(task).cleanup_all(
                m.CleanupAllRequest(container=list(req.container))
            )
        return m.ResetResponse()

    # -- steps -------------------------------------------------------------------------------
    def run_step(self, req: m.RunStepRequest) -> m.RunStepResponse:
        """One step; `tensor` holds the fetches in `req.fetch` order."""
        session = self._session(req.session_handle)
        if req.partial_run_handle:
            return self._partial_run(session, req)
        feed = req.feed
        if feed:
            names, values = zip(*feed)
            sig = Signature(names, tuple(req.fetch), tuple(req.target))
        else:
            sig, values = Signature((), tuple(req.fetch), tuple(req.target)), ()
        out, metadata = session.run(sig, values, req.options)
        return m.RunStepResponse(list(zip(req.fetch, out)), metadata)

    def partial_run_setup(self, req: m.PartialRunSetupRequest) -> m.PartialRunSetupResponse:
        session = self._session(req.session_handle)
        if session.closed:
            raise RuntimeError("Attempted to use a closed Session.")
        sig = Signature(tuple(req.feed), tuple(req.fetch), tuple(req.target))
        plan = session.plan(sig, partial=True)
        timeout = session.config.operation_timeout_in_ms
        state = _PartialRun(plan, sig, session.next_step_id(), timeout)
        handle = f"partial_run_{state.step_id}"
        with self._lock:
            self._partial[handle] = (session, state)
        return m.PartialRunSetupResponse(partial_run_handle=handle)

    def _partial_run(self, session: MasterSession, req: m.RunStepRequest) -> m.RunStepResponse:
        handle = req.partial_run_handle
        with self._lock:
            entry = self._partial.get(handle)
        if entry is None or entry[0] is not session:
            raise errors.InvalidArgumentError(
                None, None, f"Must run 'setup' before performing partial runs! (handle {handle!r})"
            )
        state = entry[1]
        feeds = [name for name, _ in req.feed]
        with state.lock:
            state.claim(feeds, req.fetch)
            failed = True
            try:
                values = session.partial_run(
                    state, feeds, [v for _, v in req.feed], list(req.fetch)
                )
                failed = False
            finally:
                if failed or state.finished():  # (a failed call ended the step: it is over)
                    with self._lock:
                        self._partial.pop(handle, None)
                    session.end_step(state.step_id)
        return m.RunStepResponse(tensor=list(zip(req.fetch, values)))

    # -- callables ---------------------------------------------------------------------------
    def make_callable(self, req: m.MakeCallableRequest) -> m.MakeCallableResponse:
        """A callable (TF's CallableOptions): its signature is pruned, placed, partitioned and
        registered now, once; each RunCallable then runs that plan with the callable's
        RunOptions. The plan lives in the session's signature cache (master_session.py)."""
        session = self._session(req.session_handle)
        if session.closed:
            raise RuntimeError("Attempted to use a closed Session.")
        opts = req.options
        connections = tuple((c.from_tensor, c.to_tensor) for c in opts.tensor_connection)
        sig = Signature(tuple(opts.feed), tuple(opts.fetch), tuple(opts.target), connections)
        session.plan(sig)  # built (and its graphs registered) now, not on the first call
        handle = next(self._handles)
        with self._lock:
            self._callables[handle] = (session, sig, opts.run_options)
        return m.MakeCallableResponse(handle=handle)

    def run_callable(self, req: m.RunCallableRequest) -> m.RunCallableResponse:
        session = self._session(req.session_handle)
        sig, options = self._callable(session, req)
        if len(req.feed) != len(sig.feeds):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Callable {req.handle} takes {len(sig.feeds)} feeds, got {len(req.feed)}",
            )
        values, metadata = session.run(sig, list(req.feed), options)
        return m.RunCallableResponse(fetch=values, metadata=metadata)

    def local_run(self, session_handle: str, sig: Signature):
        """A LocalRun of `sig` (local_run.py): a Session of this process runs its cached
        signatures through it."""
        return self._session(session_handle).local_run(sig)

    def local_callable(self, req: m.RunCallableRequest):
        """A LocalRun of callable `req.handle` with its RunOptions (local_run.py); `req`'s
        feeds are not used."""
        session = self._session(req.session_handle)
        return session.local_run(*self._callable(session, req))

    def _callable(self, session: MasterSession, req) -> tuple:
        """(signature, RunOptions) of callable `req.handle` of `session`."""
        entry = self._callables.get(req.handle)
        if entry is None or entry[0] is not session:
            raise errors.InvalidArgumentError(
                None, None, f"No callable {req.handle} in session {req.session_handle}"
            )
        return entry[1], entry[2]

    def release_callable(self, req: m.ReleaseCallableRequest) -> m.ReleaseCallableResponse:
        with self._lock:
            entry = self._callables.get(req.handle)
            if entry is None or entry[0] is not self._session(req.session_handle):
                raise errors.InvalidArgumentError(
                    None, None, f"No callable {req.handle} in session {req.session_handle}"
                )
            del self._callables[req.handle]
        return m.ReleaseCallableResponse()

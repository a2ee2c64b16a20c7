"""The worker (whitepaper §3.3): owns one task's devices and their resource containers, keeps
the graphs the master registers, and runs a step of them per RunGraph.

Each registered graph is the task's share of one (feeds, fetches, targets) signature: its
partitions, one per device, compiled once into executor plans. A step's rendezvous is keyed by
its step id; it is made by the first RunGraph or RecvTensor of the step to arrive and torn down
by CleanupGraph, which the master sends once every worker of the step has finished (a peer
may still be receiving this worker's tensors after its own RunGraph returned). A graph that
sends nothing to another task is "self-contained": no peer can ask for its tensors, so its
step's rendezvous goes when its RunGraph ends and the master sends it no CleanupGraph
(StepPlan knows the same from the same nodes). A CleanupGraph that arrives while the step
runs (the master cancelled it) cancels it, and one that arrives first makes that step's
RunGraph fail: a master cancels a remote RunGraph that way. Values enter and leave a step by
rendezvous key (RunGraphRequest.send and .recv_key): the master's feeds and fetches. A step
ends at its deadline (RunGraphRequest.timeout_in_ms) here, not when the master's call gives
up: the master hears DeadlineExceededError once nothing of the step runs here any more (a
dequeue ended by the call's cancellation instead could take an element that the client's next
step enqueued after hearing the error). Method names are TensorFlow's WorkerService RPCs in
snake case.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import flowgraph.kernels.cpu
import flowgraph.opdefs  # noqa: F401  (registers the op library)
from flowgraph.core import errors
from flowgraph.core.protos import ConfigProto
from flowgraph.core.rendezvous_keys import parse_key
from flowgraph.distributed import health
from flowgraph.distributed import messages as m
from flowgraph.distributed.rendezvous import RemoteRendezvous
from flowgraph.distributed.worker_cache import CallOptions, task_of
from flowgraph.runtime import nodes as rt_nodes
from flowgraph.runtime.executor import ExecutorPlan, execute
from flowgraph.runtime.function import FunctionLibrary
from flowgraph.runtime.rendezvous import RendezvousMgr
from flowgraph.runtime.step import Step
from flowgraph.runtime.tracing import StepStatsCollector


class _PartialStep:
    """A step fed and fetched over several RunGraph calls: its executors run on their own
    thread from the first call on; `error` is their failure, `done` is set when they end."""

    def __init__(self, step: Step, call_opts: CallOptions | None):
        self.step = step
        self.call_opts = call_opts
        self.error: errors.OpError | None = None
        self.done = threading.Event()


class Worker:
    """One task's worker. `_lock` guards `_graphs`, `_sessions` and additions to `_partial`
    (removals are atomic pops); `_steps` (running steps by id) is touched only by atomic dict
    operations."""

    def __init__(self, task: str, devices: list, worker_cache=None):
        self.task = task  # /job:J/replica:0/task:T
        self.devices = devices
        self.device_by_name = {d.name: d for d in devices}
        self.functions = FunctionLibrary()  # GraphDef.library of registered graphs
        for d in devices:
            d.functions = self.functions
        self.worker_cache = worker_cache  # set by the cache that lists this worker
        self._lock = threading.Lock()
        self._sessions: dict[str, set] = {}  # session handle -> its graph handles
        self._graphs: dict[str, list[ExecutorPlan]] = {}  # graph handle -> plans
        self._graph_ids = itertools.count(1)
        self._steps: dict[int, Step] = {}  # running steps by id (cancelled by close)
        self._step_requests: dict[int, m.RunGraphRequest] = {}  # running step id -> its request
        self.health = None  # a HealthMonitor checking masters and peers on other tasks, if any
        self._watches: dict[str, object] = {}  # session handle -> its MasterWatch
        self._periods: dict[str, int] = {}  # session handle -> its health-check period (ms)
        self.peer_watches = health.PeerWatches(self)
        self._partial: dict[int, _PartialStep] = {}
        self._self_contained: set[str] = set()  # graph handles that send to no other task
        self._ended: OrderedDict[int, None] = OrderedDict()  # recently cleaned-up step ids
        self._pool: ThreadPoolExecutor | None = None
        self._attributes = [
            m.DeviceAttributes(
                name=d.name,
                device_type=d.device_type,
                incarnation=d.incarnation & 0xFFFFFFFFFFFFFFFF,
            )
            for d in devices
        ]

    @property
    def worker_cache(self):
        return self._worker_cache

    @worker_cache.setter
    def worker_cache(self, cache) -> None:
        """With peers, a step's rendezvous pulls their tensors (RemoteRendezvous); alone, the
        plain LocalRendezvous serves."""
        self._worker_cache = cache
        peers = cache is not None and len(cache.list_workers()) > 1
        self.rendezvous_mgr = RendezvousMgr(self._make_rendezvous if peers else None)

    @property
    def alone(self) -> bool:
        """No peers: no step of this worker exchanges tensors with another task."""
        return self.rendezvous_mgr.local

    def _make_rendezvous(self, step_id: int) -> RemoteRendezvous:
        return RemoteRendezvous(step_id, self.task + "/device:", self._worker_cache)

    # -- sessions and graphs -------------------------------------------------------------
    def get_status(self, req: m.GetStatusRequest | None = None) -> m.GetStatusResponse:
        return m.GetStatusResponse(device_attributes=list(self._attributes))

    def create_worker_session(
        self, req: m.CreateWorkerSessionRequest
    ) -> m.CreateWorkerSessionResponse:
        config = req.server_def.default_session_config if req.server_def else None
        with self._lock:
            self._sessions.setdefault(req.session_handle, set())
            self._periods[req.session_handle] = health.period_ms(config or ConfigProto())
        if req.master_task and req.master_task != self.task and self.health is not None:
            watch = health.MasterWatch(
                self, req.session_handle, req.master_task, req.master_incarnation, config
            )
            with self._lock:
                old = self._watches.get(req.session_handle)
                self._watches[req.session_handle] = watch
            if old is not None:
                self.health.remove(old)
            self.health.add(watch)
        return m.CreateWorkerSessionResponse()

    def delete_worker_session(
        self, req: m.DeleteWorkerSessionRequest
    ) -> m.DeleteWorkerSessionResponse:
        with self._lock:
            handles = self._sessions.pop(req.session_handle, ())
            for handle in handles:
                self._graphs.pop(handle, None)
                self._self_contained.discard(handle)
            watch = self._watches.pop(req.session_handle, None)
            self._periods.pop(req.session_handle, None)
        if watch is not None:
            self.health.remove(watch)
        if handles:
            self.peer_watches.remove_graphs(handles)
        return m.DeleteWorkerSessionResponse()

    def end_session_steps(self, handle: str, error: errors.OpError) -> None:
        """Ends the running steps of session `handle` with `error` (its master is unreachable)
        as its master's CleanupGraph would have."""
        for step_id, req in list(self._step_requests.items()):
            if req.session_handle == handle:
                self._end_step(step_id, error)

    def end_graph_steps(self, handles, error: errors.OpError) -> None:
        """Ends the running steps of the graphs `handles` with `error` (a peer they receive
        from is unreachable or was restarted): their in-flight Recvs are cancelled."""
        for step_id, req in list(self._step_requests.items()):
            if req.graph_handle in handles:
                self._end_step(step_id, error)

    def end_session(self, handle: str, error: errors.OpError) -> None:
        """Ends session `handle`'s steps and deletes it (its master lost it in a restart)."""
        self.end_session_steps(handle, error)
        self.delete_worker_session(m.DeleteWorkerSessionRequest(session_handle=handle))

    def register_graph(
        self, req: m.RegisterGraphRequest, timeout: float | None = None
    ) -> m.RegisterGraphResponse:
        """Compiles this task's partitions of a signature (every node carries its device).
        `timeout` bounds a remote worker's call; in process nothing waits on a peer."""
        gd = req.graph_def
        if gd is not None:
            self.functions.add(gd.library)
        nodes = req.nodes
        if nodes is None:  # from the wire
            nodes = [rt_nodes.from_node_def(nd) for nd in gd.node]
        parts: dict[str, list] = {}
        for node in nodes:
            parts.setdefault(node.device, []).append(node)
        plans = []
        for name, part in parts.items():
            device = self.device_by_name.get(name)
            if device is None:
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"RegisterGraph: node '{part[0].name}' is on {name!r}, not a device of "
                    f"task {self.task} ({', '.join(self.device_by_name)})",
                )
            plans.append(ExecutorPlan(part, device))
        peers = health.recv_peers(nodes, self.task)
        with self._lock:
            graphs = self._sessions.get(req.session_handle)
            if graphs is None:
                raise errors.AbortedError(
                    None, None, f"Session {req.session_handle} is not found on {self.task}"
                )
            handle = f"{req.session_handle}/{next(self._graph_ids)}"
            graphs.add(handle)
            self._graphs[handle] = plans
            if not any(sends_to_other_task(n, self.task) for n in nodes):
                self._self_contained.add(handle)
            if peers:  # (under _lock: a DeleteWorkerSession cannot come between)
                self.peer_watches.add_graph(handle, self._periods[req.session_handle], peers)
        return m.RegisterGraphResponse(graph_handle=handle)

    def deregister_graph(self, req: m.DeregisterGraphRequest) -> m.DeregisterGraphResponse:
        with self._lock:
            self._graphs.pop(req.graph_handle, None)
            self._self_contained.discard(req.graph_handle)
            self._sessions.get(req.session_handle, set()).discard(req.graph_handle)
        self.peer_watches.remove_graphs((req.graph_handle,))
        return m.DeregisterGraphResponse()

    def plans(self, handle: str) -> list[ExecutorPlan]:
        """The compiled partitions of graph `handle`; AbortedError if it is not registered."""
        plans = self._graphs.get(handle)
        if plans is None:
            raise errors.AbortedError(
                None, None, f"Graph handle {handle!r} is not found on {self.task}"
            )
        return plans

    # -- steps ---------------------------------------------------------------------------
    def run_graph(
        self, req: m.RunGraphRequest, call_opts: CallOptions | None = None
    ) -> m.RunGraphResponse:
        """Runs one step of a registered graph: puts `send` into the step's rendezvous, runs
        the partitions, returns the values under `recv_key`."""
        if call_opts is not None and call_opts.error is not None:
            raise call_opts.error  # cancelled before it arrived (its session closed)
        step_id = req.step_id
        if step_id in self._ended:
            raise errors.CancelledError(
                None, None, f"Step {step_id} was ended by its master before it ran on {self.task}"
            )
        plans = self.plans(req.graph_handle)
        if req.is_partial:
            return self._run_partial(req, plans, call_opts)
        if req.graph_handle in self._self_contained:
            try:
                return self._run_step(req, plans, call_opts)
            finally:
                self.rendezvous_mgr.cleanup(step_id)
        return self._run_step(req, plans, call_opts)

    def _run_step(self, req: m.RunGraphRequest, plans, call_opts) -> m.RunGraphResponse:
        step_id = req.step_id
        rendezvous = self.rendezvous_mgr.find(step_id)
        for key, value in req.send:
            rendezvous.send(key, value)
        opts = req.exec_opts
        traced = opts is not None and (opts.record_timeline or opts.record_costs)
        stats = StepStatsCollector(self.devices) if traced else None
        step = Step(step_id, rendezvous, stats, req.timeout_in_ms)
        self._steps[step_id] = step
        self._step_requests[step_id] = req
        if step_id in self._ended:  # its CleanupGraph came between the check and here
            step.cancel(errors.CancelledError(None, None, f"Step {step_id} was cancelled"))
        if call_opts is not None:
            call_opts.set_cancel_callback(step.cancel)
        try:
            self._execute(plans, step)
        finally:
            self._steps.pop(step_id, None)
            self._step_requests.pop(step_id, None)
            step.end()  # its TensorArrays and stacks go with it
            if call_opts is not None:
                call_opts.clear_cancel_callback()
        recv = [(key, fetched(rendezvous, key)) for key in req.recv_key]
        return m.RunGraphResponse(recv, stats.finish() if traced else None)

    def run_local(self, plans: list[ExecutorPlan], step: Step) -> None:
        """Runs `step` of a graph of this worker for its in-process master (local_run.py): a
        step that sends nothing to a peer, its feeds already in its own rendezvous. Listed in
        `_steps` while it runs, so that closing the worker cancels it."""
        steps, step_id = self._steps, step.step_id
        steps[step_id] = step
        try:
            self._execute(plans, step)
        finally:
            steps.pop(step_id, None)
            step.end()

    def _execute(self, plans: list[ExecutorPlan], step: Step) -> None:
        try:
            if len(plans) == 1:
                execute(plans[0], step)
            else:
                self._run_partitions(plans, step)
        except BaseException as e:
            if not isinstance(e, Exception):  # Ctrl-C while waiting: stop the step's work
                step.cancel(errors.CancelledError(None, None, "Step was interrupted"))
            raise

    def _run_partitions(self, plans: list[ExecutorPlan], step: Step) -> None:
        """Runs the partitions concurrently; the first real error wins over the
        cancellations it caused in the other partitions."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max(4, len(self.devices)), thread_name_prefix="partition"
                )
        futures = [self._pool.submit(execute, p, step) for p in plans]
        first_error = None
        for f in futures:
            try:
                f.result()
            except errors.OpError as e:
                if first_error is None or isinstance(first_error, errors.CancelledError):
                    first_error = e
        if first_error is not None:
            raise first_error

    def _run_partial(self, req, plans, call_opts) -> m.RunGraphResponse:
        """A partial run's call: the first starts the step's executors on a thread; each
        feeds `send` and waits for `recv_key`; the last waits for the executors to end."""
        with self._lock:
            state = self._partial.get(req.step_id)
            if state is None:
                step = Step(req.step_id, self.rendezvous_mgr.find(req.step_id), feeds_sent=False)
                state = self._partial[req.step_id] = _PartialStep(step, call_opts)
                start = True
            else:
                start = False
        step = state.step
        if start:
            if call_opts is not None:
                call_opts.set_cancel_callback(step.cancel)
            self._steps[step.step_id] = step
            self._step_requests[step.step_id] = req
            threading.Thread(
                target=self._partial_main,
                args=(state, plans),
                name=f"partial_run_{step.step_id}",
                daemon=True,
            ).start()
        for key, value in req.send:
            step.rendezvous.send(key, value)
        timeout = req.timeout_in_ms / 1000 if req.timeout_in_ms > 0 else None
        recv = [(key, _partial_fetch(state, key, timeout)) for key in req.recv_key]
        if req.is_last_partial_run:
            if not state.done.wait(timeout):
                _partial_timed_out(state, "the partial run's last call waited for its ops")
            with self._lock:
                self._partial.pop(req.step_id, None)
            if state.error is not None:
                raise state.error
        return m.RunGraphResponse(recv=recv)

    def _partial_main(self, state: _PartialStep, plans) -> None:
        try:
            self._execute(plans, state.step)
        except errors.OpError as e:
            state.error = e
            state.step.cancel(e)
        finally:
            self._steps.pop(state.step.step_id, None)
            self._step_requests.pop(state.step.step_id, None)
            state.step.end()
            if state.call_opts is not None:
                state.call_opts.clear_cancel_callback()
            state.done.set()

    def cleanup_graph(self, req: m.CleanupGraphRequest) -> m.CleanupGraphResponse:
        """Ends a step on this worker: its rendezvous goes, failing receivers still waiting."""
        self._end_step(
            req.step_id, errors.CancelledError(None, None, f"Step {req.step_id} was cancelled")
        )
        return m.CleanupGraphResponse()

    def _end_step(self, step_id: int, error: errors.OpError) -> None:
        """Cancels step `step_id` with `error` if it runs, drops its rendezvous, and refuses a
        RunGraph of it that comes later."""
        self._ended[step_id] = None
        while len(self._ended) > _ENDED_KEPT:
            self._ended.popitem(last=False)
        state = self._partial.pop(step_id, None) if self._partial else None
        if state is not None:
            state.step.cancel(error)
        step = self._steps.get(step_id)
        if step is not None:  # still running: its master cancelled it
            step.cancel(error)
        self.rendezvous_mgr.cleanup(step_id)

    def cleanup_all(self, req: m.CleanupAllRequest) -> m.CleanupAllResponse:
        """Drops the named resource containers on every device (the default one if none)."""
        for d in self.devices:
            for container in req.container or [""]:
                d.resource_mgr.cleanup(container)
        return m.CleanupAllResponse()

    # -- tensors for peers -----------------------------------------------------------------
    def recv_tensor_async(
        self, req: m.RecvTensorRequest, done, call_opts: CallOptions | None = None
    ) -> None:
        """`done(error, RecvTensorResponse)` once the step has produced the tensor. In process
        there is no transfer for `call_opts` to cancel: the receiver's rendezvous drops a reply
        that comes after its step ended."""
        key = req.rendezvous_key
        if not key.startswith(self.task + "/device:"):
            done(
                errors.InvalidArgumentError(
                    None, None, f"RecvTensor: {key!r} does not come from task {self.task}"
                ),
                None,
            )
            return

        def on_value(error, value, is_dead):
            if error is not None:
                done(error, None)
            else:
                done(None, m.RecvTensorResponse(None if is_dead else value, is_dead))

        self.rendezvous_mgr.find(req.step_id).recv_async(key, on_value)

    # -- lifetime --------------------------------------------------------------------------
    def close(self, error: errors.OpError | None = None) -> None:
        """Cancels running steps and releases the devices (pools, resource containers)."""
        error = error or errors.CancelledError(None, None, "Session has been closed.")
        for step in list(self._steps.values()):
            step.cancel(error)
        self.rendezvous_mgr.cleanup_all(error)
        for d in self.devices:
            d.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)


_ENDED_KEPT = 4096  # step ids a late RunGraph is refused for (cleanups of ~4096 steps back)


def sends_to_other_task(node, task: str) -> bool:
    """True for a _Send whose receiver is on another task than `task` (a peer's RecvTensor
    will ask for it); a client-terminated one stays with this task's RunGraph."""
    if node.op != "_Send" or node.attrs.get("client_terminated"):
        return False
    return task_of(node.attrs["recv_device"]) != task


def fetched(rendezvous, key: str):
    """The value the step left under `key`; errors name the fetched tensor."""
    got = rendezvous.try_take(key)
    if got is None:
        raise errors.InternalError(
            None, None, f"Fetch '{_tensor(key)}' was not produced by the step"
        )
    value, is_dead = got
    if is_dead:
        raise _dead(key)
    return value


def _partial_fetch(state: _PartialStep, key: str, timeout: float | None):
    """The value of fetch `key` of a partial run's call, waited for at most `timeout` seconds
    (its session's operation_timeout_in_ms, as TF bounds each PRun's waits)."""
    try:
        value, is_dead = state.step.rendezvous.recv(key, timeout)
    except errors.DeadlineExceededError:
        _partial_timed_out(state, f"fetch '{_tensor(key)}' was not produced")
    except errors.OpError:
        state.done.wait()
        if state.error is not None:
            raise state.error from None
        raise
    if is_dead:
        raise _dead(key)
    return value


def _partial_timed_out(state: _PartialStep, what: str):
    """Cancels a partial run's step whose call passed its deadline, and raises the deadline's
    error once its executors have ended (a cancelled step ends at once)."""
    error = errors.DeadlineExceededError(
        None,
        None,
        f"Timed out in a partial run: {what} within the session's operation_timeout_in_ms; "
        "the partial run was cancelled",
    )
    state.step.cancel(error)
    state.done.wait()
    raise error


def _dead(key: str) -> errors.OpError:
    return errors.InvalidArgumentError(
        None,
        None,
        f"Fetch '{_tensor(key)}' has no value: it is dead (computed only on an untaken branch "
        "of a cond)",
    )


def _tensor(key: str) -> str:
    return parse_key(key).tensor_name


__all__ = ["Worker", "task_of"]

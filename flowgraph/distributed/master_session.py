"""One session on the master (whitepaper §3.3, §4.2): the client's graph, placed over every
device of every worker the master knows, and the signature cache.

Per (feeds, fetches, targets) signature a StepPlan (step_plan.py) is built once: the graph
pruned to the signature with feed/fetch nodes on the client device, optimized, placed,
partitioned per device, and each task's partitions registered with its worker (one RegisterGraph
per worker per signature). A step is then one RunGraph per worker, run concurrently, followed by
one CleanupGraph per worker whose graph sends tensors to another task (worker.py). Each feed
goes in the RunGraphRequest of the worker that uses it and each fetch comes in the
RunGraphResponse of the worker that makes it, by rendezvous key (direct_terminals.py); a partial
run's all go through the client device's worker.
"""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from flowgraph.core import errors
from flowgraph.core.device_spec import parse
from flowgraph.core.protos import (
    ConfigProto,
    FunctionDefLibrary,
    GraphDef,
    RunMetadata,
    ServerDef,
    StepStats,
)
from flowgraph.distributed import messages as m
from flowgraph.distributed.local_run import LocalRun
from flowgraph.distributed.step_failures import RunningStep, TaskFailures, short
from flowgraph.distributed.step_plan import StepPlan, WorkerCall
from flowgraph.distributed.worker_cache import CallOptions, DeviceInfo, signed64, task_of
from flowgraph.runtime import nodes as rt_nodes
from flowgraph.runtime.cost_model import CostModel
from flowgraph.runtime.function import FunctionLibrary
from flowgraph.runtime.partial_execution import Signature
from flowgraph.runtime.placement import PlacementOptions, movable, place

# How much longer than a step's deadline its RunGraph calls wait: the worker ends the step at
# the deadline and answers (RunGraphRequest.timeout_in_ms), so the master's answer comes after
# the step has ended everywhere; only a worker that stopped answering makes the call expire.
# Less than remote.STEP_MARGIN_S: the client still hears the master, not its own call expiring.
RUN_GRAPH_MARGIN_MS = 2000


def _matches(spec, filters: list) -> bool:
    """ConfigProto.device_filters: with filters, a device (or a task) is the session's if
    some filter names it (fields a filter leaves out match anything)."""
    return not filters or any(f.is_compatible_with(spec) for f in filters)


class MasterSession(TaskFailures):
    """A session's graph, devices and signature cache. `_lock` guards `nodes`, `placed`,
    `_plans`, `library`, `devices` and `_restarts`; a plan is read without it (a dict get
    is atomic).
    `running` (the steps in flight) is changed only by atomic set operations (add, discard,
    copy)."""

    def __init__(self, handle: str, worker_cache, local_task: str, config: ConfigProto | None):
        self.handle = handle
        self.local_task = local_task
        self.config = config if config is not None else ConfigProto()
        self.worker_cache = worker_cache
        self._workers: dict[str, object] = {}
        devices = []
        self._filters = filters = [parse(f) for f in self.config.device_filters]
        tasks = worker_cache.list_workers()
        tasks.sort(key=lambda t: t != local_task)  # the master's own task is placed first
        # Workers on other tasks check this master's health at the session's period: they
        # learn its task, its incarnation (the local task's status, asked first) and config.
        self.create_request = create = m.CreateWorkerSessionRequest(
            handle, ServerDef(default_session_config=self.config), master_task=local_task
        )
        for task in tasks:
            local = task == local_task  # TF: the master's own devices are always the session's
            if not (local or _matches(parse(task), filters)):
                continue  # not waited for: a filtered-out task need not be up
            worker = self.worker(task)
            worker.create_worker_session(create)
            resp = worker.get_status(m.GetStatusRequest())
            if local and resp.device_attributes:
                create.master_incarnation = signed64(resp.device_attributes[0].incarnation)
            infos = [DeviceInfo.from_attributes(a) for a in resp.device_attributes]
            devices.extend(self.session_devices(task, infos))
        self.devices = tuple(devices)
        self.tasks = frozenset(task_of(d.name) for d in devices)  # what health checks check
        local = [d for d in devices if task_of(d.name) == local_task] or devices
        self.client_device = next((d for d in local if d.device_type == "CPU"), local[0])
        self.functions = FunctionLibrary()  # checks that a name keeps its definition
        self.library = FunctionDefLibrary()  # everything received, sent with each graph
        self.nodes: dict[str, rt_nodes.Node] = {}
        self.placed: dict[str, rt_nodes.Node] = {}  # every node with its stable device
        self.graph_version = 0
        self._plans: dict[Signature | tuple, StepPlan] = {}  # (sig, True): a partial run's
        self.plans_version = 0  # moves whenever a plan is dropped (a LocalRun binds again)
        self._restarts: dict[str, errors.OpError] = {}  # task -> restart not yet reported
        self._unreachable: dict[str, errors.OpError] = {}  # task -> failed check (step_failures)
        self._lock = threading.Lock()
        self._step_ids = itertools.count(int.from_bytes(os.urandom(6), "little") << 8)
        self.running: set[RunningStep] = set()  # cancelled by close and health checks
        self.closed = False
        self._pool: ThreadPoolExecutor | None = None
        experimental = self.config.experimental
        self.cost_model = (  # placement by simulated execution (§3.2.1), Recv scheduling (§5.2)
            CostModel(dict(experimental.device_speeds))
            if experimental.cost_model_placement or self.config.graph_options.enable_recv_scheduling
            else None
        )
        self._steps_run = 0  # for graph_options.build_cost_model(_after); guarded by _lock
        self._timeout = self.config.operation_timeout_in_ms  # a step's, unless RunOptions say

    def session_devices(self, task: str, infos: list[DeviceInfo]) -> list[DeviceInfo]:
        """The devices of `task` this session uses: all of the master's own task, those its
        config's device_filters match elsewhere."""
        local = task == self.local_task
        return [d for d in infos if local or _matches(d.spec, self._filters)]

    def worker(self, task: str):
        worker = self._workers.get(task)
        if worker is None:
            worker = self._workers[task] = self.worker_cache.get_worker(task)
        return worker

    def next_step_id(self) -> int:
        return next(self._step_ids)

    # -- Extend ------------------------------------------------------------------------------
    def extend(self, graph_def: GraphDef, replace: GraphDef | None = None) -> int:
        """Adds the nodes of `graph_def`; nodes in `replace` supersede same-named ones."""
        new = [rt_nodes.from_node_def(nd) for nd in graph_def.node]
        changed = [rt_nodes.from_node_def(nd) for nd in replace.node] if replace is not None else []
        self.functions.add(graph_def.library)
        with self._lock:
            nodes = dict(self.nodes)
            for n in new:
                if n.name in nodes:
                    raise errors.InvalidArgumentError(
                        None, None, f"Extend: node '{n.name}' already exists in the graph"
                    )
                nodes[n.name] = n
            for n in changed:
                nodes[n.name] = n
            _check_inputs(nodes, new + changed)
            self.nodes = nodes
            self.placed = self._place_all(nodes, {n.name for n in changed})
            if len(graph_def.library.function):
                self._add_library(graph_def.library)
            if changed:
                self._plans.clear()
                self.plans_version += 1
            self.graph_version += 1
            return self.graph_version

    def _add_library(self, library) -> None:
        known = {f.signature.name for f in self.library.function}
        self.library.function.extend(f for f in library.function if f.signature.name not in known)
        known_grads = {g.function_name for g in self.library.gradient}
        self.library.gradient.extend(
            g for g in library.gradient if g.function_name not in known_grads
        )

    def _place_all(self, nodes: dict, changed: set) -> dict:
        """Places the whole graph, keeping the devices of nodes placed by earlier Extends."""
        pinned = [
            self.placed[name] if name in self.placed and name not in changed else n
            for name, n in nodes.items()
        ]
        config = self.config
        opts = PlacementOptions(
            self.devices,
            config.allow_soft_placement,
            config.log_device_placement,
            self.cost_model if config.experimental.cost_model_placement else None,
        )
        return {n.name: n for n in place(pinned, opts, lenient=True)}

    def _measures(self) -> bool:
        """Whether this step's costs go to the cost model untraced by the caller: the steps
        `build_cost_model_after` to `build_cost_model_after + build_cost_model` (TF's options)."""
        if self.cost_model is None:
            return False
        opts = self.config.graph_options
        with self._lock:
            k = self._steps_run
            self._steps_run += 1
        return (
            opts.build_cost_model > 0
            and 0 <= k - opts.build_cost_model_after < opts.build_cost_model
        )

    def _learn(self, step_stats) -> None:
        """Folds a traced step's measured costs into the cost model, then places again the
        nodes that may move (no state in their colocation group: a variable never moves); the
        signatures are planned again if any node moved."""
        with self._lock:
            if not self.cost_model.record(step_stats):
                return
            if not self.config.experimental.cost_model_placement:
                return  # Recv scheduling only: plans made from now on use the measurements
            placed = self._place_all(self.nodes, movable(list(self.nodes.values())))
            if any(n.device != self.placed[name].device for name, n in placed.items()):
                self.placed = placed
                self._plans.clear()
                self.plans_version += 1

    # -- Run ---------------------------------------------------------------------------------
    def plan(self, sig: Signature, partial: bool = False, timeout_ms: int = 0) -> StepPlan:
        """The plan of `sig`, made (its graphs registered, within `timeout_ms` if > 0, the
        step's deadline) the first time. A registration that fails because a task restarted
        reports the restart; one a health check ended reports the check's verdict."""
        key = (sig, True) if partial else sig
        plan = self._plans.get(key)
        if plan is None:
            try:
                with self._lock:
                    plan = self._plans.get(key)
                    if plan is None:
                        plan = self._plans[key] = StepPlan(self, sig, partial, timeout_ms)
            except errors.AbortedError as e:  # a task does not know this session: restarted?
                error = self._restart_error(self.tasks, e)
                if error is e:
                    raise
                raise error from e
            except errors.OpError as e:  # a hung task's calls were ended (health.py)?
                error = self._verdict(e)
                if error is e:
                    raise
                raise error from e
        if self._restarts:
            self._report_restart(plan.tasks)
        return plan

    def step_timeout_ms(self, options=None) -> int:
        """A step's deadline in ms (0: none): RunOptions.timeout_in_ms, else the config's."""
        if options is None:
            return self._timeout
        return options.timeout_in_ms or self._timeout

    def local_run(self, sig: Signature, options=None) -> LocalRun:
        """Runs `sig` in the caller's thread when it is one RunGraph of an in-process worker
        without peers (local_run.py)."""
        return LocalRun(self, sig, options)

    def run(self, sig: Signature, feed_values, options=None):
        """Runs one step: (fetched values in `sig.fetches` order, RunMetadata or None)."""
        if self.closed:
            raise RuntimeError("Attempted to use a closed Session.")
        if options is None:
            timeout, traced = self._timeout, False
        else:
            timeout = options.timeout_in_ms or self._timeout
            traced = options.trace_level > 0
        plan = self.plan(sig, timeout_ms=timeout)
        step_id = next(self._step_ids)
        learn = self.cost_model is not None and self._measures()
        exec_opts = (
            m.ExecutorOpts(record_timeline=traced, record_costs=learn) if traced or learn else None
        )
        calls = plan.calls
        wait_ms = timeout + RUN_GRAPH_MARGIN_MS if timeout > 0 else 0
        step = RunningStep(plan.tasks, [CallOptions(wait_ms) for _ in calls])
        args = (step_id, feed_values, exec_opts, timeout)
        try:
            if not calls:  # nothing to run (a fetch of no tensors)
                responses = []
            elif len(calls) == 1:
                responses = [self._run_one(calls[0], step, *args)]
            else:
                responses = self._run_many(calls, step, *args)
        except errors.OpError as e:
            error = self._step_error(plan, step, e)
            if error is e:
                raise
            raise error from e
        finally:
            cleanup = m.CleanupGraphRequest(step_id=step_id)
            for call in calls:  # a self-contained graph's worker ended the step itself
                if call.cleanup:
                    call.worker.cleanup_graph(cleanup)
        out = [responses[c].recv[k][1] for c, k in plan.fetch_slots]
        stats = None
        if traced or learn:
            stats = StepStats()
            for resp in responses:
                if resp.step_stats is not None:
                    stats.dev_stats.extend(resp.step_stats.dev_stats)
        if stats is not None and self.cost_model is not None:
            self._learn(stats)
        metadata = None
        if traced or (options is not None and options.output_partition_graphs):
            metadata = RunMetadata()
            if traced:
                metadata.step_stats.CopyFrom(stats)
            if options.output_partition_graphs:
                for nodes in plan.graphs.values():
                    metadata.partition_graphs.add().CopyFrom(rt_nodes.to_graph_def(nodes))
        return out, metadata

    def _request(
        self, call: WorkerCall, step_id, feed_values, exec_opts, timeout_ms, partial=(False, False)
    ):
        """RunGraph's request (positional: the per-run path): `timeout_ms` is the step's
        deadline, which the worker enforces; `partial` is (is_partial, is_last_partial_run)
        for a partial run's call."""
        send = [(key, feed_values[i]) for key, i in call.feeds] if call.feeds else []
        return m.RunGraphRequest(
            self.handle,
            True,
            call.graph_handle,
            step_id,
            exec_opts,
            send,
            call.fetch_keys,
            *partial,
            timeout_ms,
        )

    def _run_one(self, call, step, *args) -> m.RunGraphResponse:
        """`args`: _request's after the call (step id, feed values, exec opts, timeout)."""
        self.running.add(step)  # set.add/discard are atomic: no lock on the per-run path
        try:
            return call.worker.run_graph(self._request(call, *args), step.opts[0])
        finally:
            self.running.discard(step)

    def _run_many(self, calls, step, *args) -> list:
        """One RunGraph per worker, concurrently; the first failure cancels the others (a
        worker blocked on a Recv from the failed one would wait forever), and it is the error
        raised, not the cancellations it caused. A call that reports a cancellation cancels
        nothing: a peer's failure cancelled it, and that peer's call reports the failure."""
        opts = step.opts
        step.aborted = Future()
        self.running.add(step)
        try:
            futures = []
            for call, call_opts in zip(calls[1:], opts[1:]):
                req = self._request(call, *args)
                future = self._submit(call.worker.run_graph, req, call_opts, opts)
                future.add_done_callback(lambda f: _cancel_on_error(f, opts))
                futures.append(future)
            results: list = [None] * len(calls)
            first_error = None
            try:
                results[0] = calls[0].worker.run_graph(self._request(calls[0], *args), opts[0])
            except Exception as e:  # noqa: BLE001  (reported below)
                first_error = e
                _cancel_on(opts, e)
            remaining = set(futures)
            while remaining and not step.aborted.done():
                done, _ = wait(remaining | {step.aborted}, return_when=FIRST_COMPLETED)
                remaining -= done
            if step.error is not None:
                raise step.error  # the calls left may never end (a hung peer's)
            for i, f in enumerate(futures, 1):
                try:
                    results[i] = f.result()
                except Exception as e:  # noqa: BLE001  (reported below)
                    if first_error is None or isinstance(first_error, errors.CancelledError):
                        first_error = e
                    _cancel_on(opts, e)
            if first_error is not None:
                raise first_error
            return results
        finally:
            self.running.discard(step)

    def _submit(self, fn, req, call_opts, step_opts: list):
        """Runs one RunGraph on the master's pool; once the session is closed (the pool shut
        down), the step's calls are cancelled and CancelledError is raised."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(8, thread_name_prefix="master")
            pool = self._pool
        try:
            return pool.submit(fn, req, call_opts)
        except RuntimeError:  # the pool was shut down: close() ran during this step
            error = errors.CancelledError(None, None, "Session has been closed.")
            _cancel_all(step_opts, error)
            raise error from None

    # -- partial runs ------------------------------------------------------------------------
    def partial_run(self, state, feeds, feed_values, fetches) -> list:
        """Feeds some of a partial run's feeds, returns some of its fetches (master.py checks
        that each is given once). The first call starts the step on every worker. Each call's
        waits are bounded by the session's operation_timeout_in_ms, as TF bounds PRun's (not
        the time between calls, which is the client's)."""
        plan = state.plan
        if not plan.calls:  # nothing to run: every fetch was pruned away (none were asked)
            return []
        first = not state.started
        state.started = True
        last = state.finished()
        client = plan.calls[0]
        sends = [(state.feed_keys[n], v) for n, v in zip(feeds, feed_values)]
        recv_keys = [state.fetch_keys[n] for n in fetches]
        others = plan.calls[1:] if (first or last) else []
        futures = []
        if others:
            for call in others:
                req = self._request(call, state.step_id, [], None, self._timeout, (True, last))
                futures.append(
                    self._submit(call.worker.run_graph, req, state.call_opts, [state.call_opts])
                )
        req = m.RunGraphRequest(
            session_handle=self.handle,
            graph_handle=client.graph_handle,
            step_id=state.step_id,
            send=sends,
            recv_key=recv_keys,
            is_partial=True,
            is_last_partial_run=last,
            timeout_in_ms=self._timeout,  # bounds this call's waits (worker._run_partial)
        )
        try:
            resp = client.worker.run_graph(req, state.call_opts)
        except Exception as e:
            _cancel_all([state.call_opts], e)
            raise
        for f in futures:
            f.result()
        return [value for _, value in resp.recv]

    def end_step(self, step_id: int) -> None:
        """CleanupGraph on every worker that holds a graph of this session."""
        for worker in self._workers.values():
            worker.cleanup_graph(m.CleanupGraphRequest(step_id=step_id))

    def _drop(self, sig: Signature) -> None:
        """Forgets the plan of `sig` and deregisters its graphs (needs `_lock`)."""
        plan = self._plans.pop(sig)
        self.plans_version += 1
        for worker, handle in plan.handles:
            worker.deregister_graph(
                m.DeregisterGraphRequest(session_handle=self.handle, graph_handle=handle)
            )

    # -- Close -------------------------------------------------------------------------------
    def close(self) -> None:
        self.closed = True
        error = errors.CancelledError(None, None, "Session has been closed.")
        running = self.running.copy()
        with self._lock:
            plans, self._plans = list(self._plans.values()), {}
            self.plans_version += 1
        for step in running:  # a step blocked in a kernel (a queue, a Recv) fails, not hangs
            step.abort(error)
        for plan in plans:
            for worker, handle in plan.handles:
                worker.deregister_graph(
                    m.DeregisterGraphRequest(session_handle=self.handle, graph_handle=handle)
                )
        for worker in self._workers.values():
            worker.delete_worker_session(m.DeleteWorkerSessionRequest(session_handle=self.handle))
        if self._pool is not None:
            self._pool.shutdown(wait=False)


def _cancel_on_error(future, opts: list) -> None:
    error = future.exception()
    if error is not None:
        _cancel_on(opts, error)


def _cancel_on(opts: list, error: Exception) -> None:
    """Cancels a step's calls for a call's `error`, unless it is a cancellation (see
    MasterSession._run_many)."""
    if not isinstance(error, errors.CancelledError):
        _cancel_all(opts, error)


def _cancel_all(opts: list, error: Exception) -> None:
    cancel = errors.CancelledError(None, None, f"Step was cancelled: {short(error)}")
    for call_opts in opts:
        if call_opts is not None:
            call_opts.start_cancel(cancel)


def _check_inputs(nodes: dict, added: list):
    for n in added:
        for src, port in n.inputs:
            if src not in nodes:
                raise errors.InvalidArgumentError(
                    None, None, f"Node '{n.name}': unknown input node '{src}'"
                )
            if port >= len(nodes[src].output_types):
                raise errors.InvalidArgumentError(
                    None,
                    None,
                    f"Node '{n.name}': input '{src}:{port}' but '{src}' has "
                    f"{len(nodes[src].output_types)} outputs",
                )
        for c in n.control:
            if c not in nodes:
                raise errors.InvalidArgumentError(
                    None, None, f"Node '{n.name}': unknown control input '{c}'"
                )

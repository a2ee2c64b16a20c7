"""The single-process runtime behind a local Session (whitepaper §3.1, §4.2): it receives the
graph as GraphDefs (Extend) and runs steps over the devices of this process.

Per (feeds, fetches, targets) signature it caches everything that does not depend on the feed
values: the pruned graph with feed/fetch nodes, the placement, the partitions and one executor
plan per partition. A step then only puts the feeds in a fresh rendezvous, runs the executors
and takes the fetched values out.
"""

from __future__ import annotations

import functools
import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

import flowgraph.kernels.cpu
import flowgraph.opdefs  # noqa: F401  (registers the op library)
from flowgraph.core import errors
from flowgraph.core.protos import ConfigProto, GraphDef, RunMetadata, RunOptions
from flowgraph.runtime import blas
from flowgraph.runtime import device as device_lib
from flowgraph.runtime import graph as rt_graph
from flowgraph.runtime.cost_model import CostModel
from flowgraph.runtime.executor import ExecutorPlan, Step, execute
from flowgraph.runtime.function import FunctionLibrary
from flowgraph.runtime.partition import PartitionOptions, partition
from flowgraph.runtime.passes.pipeline import optimize
from flowgraph.runtime.placement import PlacementOptions, movable, place
from flowgraph.runtime.rendezvous import RendezvousMgr
from flowgraph.runtime.subgraph import Signature, feed_key, rewrite
from flowgraph.runtime.tracing import StepStatsCollector


class RunPlan:
    """Everything a signature needs, built once: executor plans per device, rendezvous keys."""

    def __init__(self, runtime: DirectRuntime, sig: Signature):
        client = runtime.client_device.name
        incarnation = runtime.client_device.incarnation
        nodes = rewrite(runtime.placed, sig, client, incarnation)
        keep = frozenset(rt_graph.parse_input(t)[0] for t in sig.targets)
        nodes = optimize(nodes, runtime.config, keep)
        nodes = place(
            nodes, PlacementOptions(tuple(runtime.devices), runtime.config.allow_soft_placement)
        )
        incarnations = {d.name: d.incarnation for d in runtime.devices}
        compress = runtime.config.graph_options.enable_bfloat16_sendrecv
        parts = partition(nodes, PartitionOptions(incarnations, compress_float32=compress))
        self.partitions = {
            name: ExecutorPlan(part, runtime.device_by_name[name]) for name, part in parts.items()
        }
        self.graphs = parts
        self.feed_keys = [feed_key(client, incarnation, _canonical(n)) for n in sig.feeds]
        self.fetch_keys = [feed_key(client, incarnation, _canonical(n)) for n in sig.fetches]


def _canonical(name: str) -> str:
    src, port = rt_graph.parse_input(name)
    return f"{src}:{port}"


class DirectRuntime:
    """Holds the graph (as NodeDefs received so far), the devices and the signature cache."""

    def __init__(self, config: ConfigProto | None = None):
        self.config = config if config is not None else ConfigProto()
        blas.single_threaded()  # intra-op parallelism is the devices' pools' (threadpool.py)
        self.devices = device_lib.make_devices(
            "localhost",
            0,
            dict(self.config.device_count),
            self.config.inter_op_parallelism_threads,
            self.config.intra_op_parallelism_threads,
        )
        self.device_by_name = {d.name: d for d in self.devices}
        self.functions = FunctionLibrary()  # GraphDef.library, shared by the devices
        for d in self.devices:
            d.functions = self.functions
        self.client_device = next(d for d in self.devices if d.device_type == "CPU")
        self.nodes: dict[str, rt_graph.Node] = {}
        self.placed: dict[str, rt_graph.Node] = {}  # the nodes with their stable device (§3.2.1)
        self._plans: dict[Signature, RunPlan] = {}
        self._lock = threading.Lock()  # guards nodes, _plans and _partition_pool
        self._step_ids = itertools.count(1)
        self.rendezvous_mgr = RendezvousMgr()  # one rendezvous per running step, by step id
        self._closed = False
        self._partition_pool = None
        self._partial_runs: dict[str, _PartialRun] = {}  # guarded by _lock
        self._running: set[Step] = set()  # steps in progress, cancelled by close(); _lock
        experimental = self.config.experimental
        self.cost_model = (  # §3.2.1: placement by simulated execution, when asked for
            CostModel(dict(experimental.device_speeds))
            if experimental.cost_model_placement
            else None
        )
        self._steps_run = 0  # for graph_options.build_cost_model(_after); guarded by _lock

    # -- Session.Extend ---------------------------------------------------------------------
    def extend(self, graph_def: GraphDef, replace: GraphDef | None = None):
        """Adds the nodes of `graph_def`; nodes in `replace` supersede same-named ones."""
        new = [rt_graph.from_node_def(nd) for nd in graph_def.node]
        changed = [rt_graph.from_node_def(nd) for nd in replace.node] if replace is not None else []
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
            if changed:
                self._plans.clear()

    def _place_all(self, nodes: dict, changed: set) -> dict:
        """Places the whole graph, keeping the devices of nodes placed by earlier Extends."""
        pinned = [
            self.placed[name] if name in self.placed and name not in changed else n
            for name, n in nodes.items()
        ]
        config = self.config
        opts = PlacementOptions(
            tuple(self.devices),
            config.allow_soft_placement,
            config.log_device_placement,
            self.cost_model,
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

    def _learn(self, step_stats):
        """Folds a traced step's measured costs into the cost model, then places again the
        nodes that may move (no state in their colocation group: a variable never moves); the
        signatures are planned again if any node moved."""
        with self._lock:
            if not self.cost_model.record(step_stats):
                return
            placed = self._place_all(self.nodes, movable(list(self.nodes.values())))
            if any(n.device != self.placed[name].device for name, n in placed.items()):
                self.placed = placed
                self._plans.clear()

    # -- Session.Run ------------------------------------------------------------------------
    def plan(self, sig: Signature) -> RunPlan:
        plan = self._plans.get(sig)
        if plan is None:
            with self._lock:
                plan = self._plans.get(sig)
                if plan is None:
                    plan = self._plans[sig] = RunPlan(self, sig)
        return plan

    def run(
        self,
        sig: Signature,
        feed_values: list,
        options: RunOptions | None = None,
        run_metadata: RunMetadata | None = None,
    ) -> list:
        """Runs one step; returns the fetched values in the order of `sig.fetches`."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        plan = self.plan(sig)
        step_id = next(self._step_ids)
        rendezvous = self.rendezvous_mgr.find(step_id)
        for key, value in zip(plan.feed_keys, feed_values):
            rendezvous.send(key, value)
        trace = options is not None and options.trace_level > 0
        learn = self._measures()
        stats = StepStatsCollector(self.devices) if trace or learn else None
        timeout = (
            options.timeout_in_ms if options is not None else 0
        ) or self.config.operation_timeout_in_ms
        step = Step(step_id, rendezvous, stats, timeout)
        parts = list(plan.partitions.values())
        with self._lock:
            self._running.add(step)
        try:
            try:
                if len(parts) == 1:
                    execute(parts[0], step)
                else:
                    self._run_partitions(parts, step)
            except BaseException as e:
                if not isinstance(e, Exception):  # Ctrl-C while waiting: stop the step's work
                    step.cancel(errors.CancelledError(None, None, "Step was interrupted"))
                raise
            finally:
                with self._lock:
                    self._running.discard(step)
            out = [_fetched(rendezvous, k, n) for k, n in zip(plan.fetch_keys, sig.fetches)]
        finally:
            self.rendezvous_mgr.cleanup(step_id)
        if stats is not None and self.cost_model is not None:
            self._learn(stats.finish())
        if run_metadata is not None:
            if stats is not None and trace:
                run_metadata.step_stats.CopyFrom(stats.finish())
            if options is not None and options.output_partition_graphs:
                for nodes in plan.graphs.values():
                    run_metadata.partition_graphs.add().CopyFrom(rt_graph.to_graph_def(nodes))
        return out

    # -- partial runs: one step fed and fetched piece by piece -------------------------------
    def partial_run_setup(self, sig: Signature) -> str:
        """Starts a step that waits for its feeds in the rendezvous; returns its handle."""
        plan = self.plan(sig)
        step_id = next(self._step_ids)
        step = Step(step_id, self.rendezvous_mgr.find(step_id))
        handle = f"partial_run_{step.step_id}"
        state = _PartialRun(plan, sig, step)
        with self._lock:
            self._partial_runs[handle] = state
        parts = list(plan.partitions.values())
        runner = (
            (lambda: execute(parts[0], step))
            if len(parts) == 1
            else (lambda: self._run_partitions(parts, step))
        )
        cleanup = functools.partial(self.rendezvous_mgr.cleanup, step_id)
        threading.Thread(target=state.run, args=(runner, cleanup), name=handle, daemon=True).start()
        return handle

    def partial_run(
        self, handle: str, feeds: list, feed_values: list, fetches: list, timeout=None
    ) -> list:
        """Feeds some of the step's feeds and waits for some of its fetches."""
        with self._lock:
            state = self._partial_runs.get(handle)
        if state is None:
            raise errors.InvalidArgumentError(
                None, None, f"Must run 'setup' before performing partial runs! (handle {handle!r})"
            )
        state.feed(feeds, feed_values)
        out = state.fetch(fetches, timeout)
        if state.finished():
            with self._lock:
                self._partial_runs.pop(handle, None)
            if state.done.is_set():  # else the step's thread cleans up when it ends
                self.rendezvous_mgr.cleanup(state.step.step_id)
        return out

    def _run_partitions(self, parts, step):
        with self._lock:
            if self._partition_pool is None:
                self._partition_pool = ThreadPoolExecutor(
                    max(4, len(self.devices)), thread_name_prefix="partition"
                )
        futures = [self._partition_pool.submit(execute, p, step) for p in parts]
        first_error = None
        for f in futures:
            try:
                f.result()
            except errors.OpError as e:
                if first_error is None or isinstance(first_error, errors.CancelledError):
                    first_error = e
        if first_error is not None:
            raise first_error

    def reset_container(self, container: str):
        for d in self.devices:
            d.resource_mgr.cleanup(container)

    def close(self):
        self._closed = True
        with self._lock:
            pending, self._partial_runs = list(self._partial_runs.values()), {}
            running = list(self._running)
        for step in running:  # a step blocked in a kernel (a queue, a Recv) fails, not hangs
            step.cancel(errors.CancelledError(None, None, "Session has been closed."))
        for state in pending:
            state.step.cancel(
                errors.CancelledError(None, None, "Session was closed during a partial run")
            )
        self.rendezvous_mgr.cleanup_all(
            errors.CancelledError(None, None, "Session has been closed.")
        )
        for d in self.devices:
            d.close()
        if self._partition_pool is not None:
            self._partition_pool.shutdown(wait=False)


def _fetched(rendezvous, key: str, name: str):
    """The value of fetch `name`, which the step left in its rendezvous."""
    got = rendezvous.try_take(key)
    if got is None:
        raise errors.InternalError(None, None, f"Fetch '{name}' was not produced by the step")
    value, is_dead = got
    if is_dead:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Fetch '{name}' has no value: it is dead (computed only on an untaken branch "
            "of a cond)",
        )
    return value


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


class _PartialRun:
    """The state of one partial run: which feeds and fetches are still owed, and its step's
    outcome. The step runs on its own thread; each feed and fetch may be given once."""

    def __init__(self, plan: RunPlan, sig: Signature, step: Step):
        self.step = step
        self.feed_keys = dict(zip(sig.feeds, plan.feed_keys))
        self.fetch_keys = dict(zip(sig.fetches, plan.fetch_keys))
        self.fed: set[str] = set()
        self.fetched: set[str] = set()
        self.error = None
        self.done = threading.Event()

    def run(self, runner, cleanup):
        try:
            runner()
        except errors.OpError as e:
            self.error = e
            self.step.cancel(e)
        finally:
            self.done.set()
        if self.finished():  # else fetches may still take values: close() cleans it up
            cleanup()

    def feed(self, names, values):
        for name, value in zip(names, values):
            if name not in self.feed_keys:
                raise errors.InvalidArgumentError(
                    None, None, f"The feed {name} was not specified in partial_run_setup."
                )
            if name in self.fed:
                raise errors.InvalidArgumentError(
                    None, None, f"The feed {name} has already been fed."
                )
            self.fed.add(name)
            self.step.rendezvous.send(self.feed_keys[name], value)

    def fetch(self, names, timeout):
        out = []
        for name in names:
            if name not in self.fetch_keys:
                raise errors.InvalidArgumentError(
                    None, None, f"The fetch {name} was not specified in partial_run_setup."
                )
            if name in self.fetched:
                raise errors.InvalidArgumentError(
                    None, None, f"The fetch {name} has already been fetched."
                )
            try:
                value, is_dead = self.step.rendezvous.recv(self.fetch_keys[name], timeout)
            except errors.OpError:
                self.done.wait(timeout)
                if self.error is not None:
                    raise self.error from None
                raise
            if is_dead:
                raise errors.InvalidArgumentError(
                    None, None, f"Fetch '{name}' has no value: it is dead"
                )
            self.fetched.add(name)
            out.append(value)
        return out

    def finished(self) -> bool:
        return len(self.fetched) == len(self.fetch_keys) and len(self.fed) == len(self.feed_keys)

"""The plan of one signature (whitepaper §3.3, §4.2), built once per (feeds, fetches, targets)
by a MasterSession: its placed graph pruned to the signature with feed/fetch nodes on the client
device, optimized, placed, partitioned per device, and each task's partitions registered with
its worker; a step is then one RunGraph per worker (WorkerCall), fed and fetched by rendezvous
key (direct_terminals.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowgraph.core.protos import GraphDef
from flowgraph.distributed import direct_terminals
from flowgraph.distributed import messages as m
from flowgraph.distributed.worker import sends_to_other_task
from flowgraph.distributed.worker_cache import DeviceInfo, task_of
from flowgraph.runtime import nodes as rt_nodes
from flowgraph.runtime.partial_execution import Signature, feed_key, rewrite
from flowgraph.runtime.partition import PartitionOptions, partition
from flowgraph.runtime.passes.pipeline import optimize
from flowgraph.runtime.passes.recv_scheduling import schedule_recvs
from flowgraph.runtime.passes.static_shapes import placeholder_shapes
from flowgraph.runtime.placement import PlacementOptions, place

if TYPE_CHECKING:
    from flowgraph.distributed.master_session import MasterSession


class WorkerCall:
    """One worker's share of a StepPlan: its graph handle, the rendezvous keys it is fed under
    with the feeds' positions in the signature, and the keys it is fetched under."""

    __slots__ = ("cleanup", "feeds", "fetch_keys", "graph_handle", "task", "worker")

    def __init__(self, worker, task, graph_handle, cleanup: bool):
        self.worker = worker
        self.task = task
        self.graph_handle = graph_handle
        self.cleanup = cleanup  # its graph sends to another task: CleanupGraph ends its step
        self.feeds: list[tuple[str, int]] = []  # (key, index into the step's feed values)
        self.fetch_keys: list[str] = []


class StepPlan:
    """Everything a signature needs, built once: partitions registered with their workers
    (`tasks`), until one of them restarts (MasterSession.observe drops the plan then).
    `fetch_slots[i]` is (call index, position in its RunGraphResponse.recv) of fetch i. With
    `partial`, every feed and fetch stays on the client device (a partial run feeds and
    fetches through one worker, call by call). `timeout_ms` (> 0) bounds the registrations,
    made for the step that needs the plan."""

    def __init__(
        self, session: MasterSession, sig: Signature, partial: bool = False, timeout_ms: int = 0
    ):
        client = session.client_device
        nodes = rewrite(session.placed, sig, client.name, client.incarnation)
        keep = frozenset(rt_nodes.parse_input(t)[0] for t in sig.targets)
        feed_shapes = placeholder_shapes(session.placed, sig.feeds)
        nodes = optimize(nodes, session.config, keep, feed_shapes)
        nodes = place(nodes, PlacementOptions(session.devices, session.config.allow_soft_placement))
        incarnations = {d.name: d.incarnation for d in session.devices}
        if not partial:
            cpus = {d.name for d in session.devices if d.device_type == "CPU"}
            nodes = direct_terminals.colocate(nodes, client.name, incarnations, cpus.__contains__)
        compress = session.config.graph_options.enable_bfloat16_sendrecv
        self.graphs = partition(nodes, PartitionOptions(incarnations, compress_float32=compress))
        if session.config.graph_options.enable_recv_scheduling and len(self.graphs) > 1:
            self.graphs = schedule_recvs(nodes, self.graphs, session.cost_model)
        feed_devices = direct_terminals.terminal_devices(nodes, "_Recv")
        fetch_devices = direct_terminals.terminal_devices(nodes, "_Send")
        feeds = [_keyed(n, feed_devices, client, incarnations) for n in sig.feeds]
        fetches = [_keyed(n, fetch_devices, client, incarnations) for n in sig.fetches]
        self.feed_keys = [key for key, _ in feeds]
        self.fetch_keys = [key for key, _ in fetches]
        by_task: dict[str, list] = {}
        for device, part in self.graphs.items():
            by_task.setdefault(task_of(device), []).extend(part)
        client_task = task_of(client.name)
        self.tasks = frozenset(by_task)
        self.calls: list[WorkerCall] = []
        self.handles: list[tuple] = []  # (worker, graph handle), for deregistering
        for task, part in by_task.items():
            gd = GraphDef()
            gd.library.CopyFrom(session.library)
            worker = session.worker(task)
            resp = worker.register_graph(
                m.RegisterGraphRequest(
                    session_handle=session.handle,
                    graph_def=gd,
                    graph_options=session.config.graph_options,
                    nodes=part,
                ),
                timeout_ms / 1000 if timeout_ms > 0 else None,
            )
            cleanup = any(sends_to_other_task(n, task) for n in part)
            call = WorkerCall(worker, task, resp.graph_handle, cleanup)
            if task == client_task:
                self.calls.insert(0, call)  # the client's worker runs in the caller's thread
            else:
                self.calls.append(call)
            self.handles.append((worker, resp.graph_handle))
        index = {call.task: i for i, call in enumerate(self.calls)}
        for i, (key, task) in enumerate(feeds):
            if task in index:  # else nothing uses the feed (pruned away)
                self.calls[index[task]].feeds.append((key, i))
        self.fetch_slots = []
        for key, task in fetches:
            call = self.calls[index[task]]
            self.fetch_slots.append((index[task], len(call.fetch_keys)))
            call.fetch_keys.append(key)


def _canonical(name: str) -> str:
    src, port = rt_nodes.parse_input(name)
    return f"{src}:{port}"


def _keyed(name: str, devices: dict, client: DeviceInfo, incarnations: dict) -> tuple[str, str]:
    """(rendezvous key, task) of a feed or fetch: on the device of its terminal node, else
    (pruned away) the client's."""
    tensor = _canonical(name)
    device = devices.get(tensor, client.name)
    return feed_key(device, incarnations.get(device, client.incarnation), tensor), task_of(device)

"""The cost model (whitepaper §3.2.1): how long each node runs on each device, and how many bytes
each of its outputs holds, for the placement simulation and the scheduling of Recv nodes (§5.2).

"The cost model contains estimates of the sizes (in bytes) of the input and output tensors for
each graph node, along with estimates of the computation time required for each node when
presented with its input tensors. This cost model is either statically estimated based on
heuristics associated with different operation types, or is measured based on an actual set of
placement decisions for earlier executions of the graph."

Static estimates come from the shapes the runtime can infer (passes/static_shapes.py: the OpDefs'
shape functions; unknown dimensions count as 1): a node's time is a fixed dispatch cost plus the
larger of its FLOPs over the device's FLOP rate and its bytes touched over its memory bandwidth.
Measured costs come from the StepStats of traced steps: once a node has run, its mean measured
time (scaled by the speed of the device it ran on) and its outputs' real sizes replace the
estimates. Devices differ only by a declared relative speed; moving a tensor between two devices
costs a latency plus its bytes over the link bandwidth.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Sequence

from flowgraph.core import dtypes
from flowgraph.core.device_spec import parse
from flowgraph.core.shapes import TensorShape
from flowgraph.runtime.nodes import Node
from flowgraph.runtime.passes.static_shapes import StaticShapes

_CONST_OPS = frozenset({"Const", "HostConst"})


@dataclasses.dataclass(frozen=True)
class CostParams:
    """The machine the static estimates assume; each device's rates are these times its speed."""

    flops_per_us: float = 1e4  # 10 GFLOP/s: single-threaded BLAS on one core
    bytes_per_us: float = 4e3  # 4 GB/s of memory traffic for element-wise kernels
    overhead_us: float = 5.0  # dispatching one kernel from Python
    link_bytes_per_us: float = 1e3  # 1 GB/s between two devices
    link_latency_us: float = 20.0  # one Send/Recv pair


def _num_elements(shape: TensorShape) -> int:
    """Elements of a shape, counting each unknown dimension as 1 (and an unknown rank as a
    scalar): the estimate before a step has measured the real size."""
    if shape.ndims is None:
        return 1
    n = 1
    for d in shape.as_list():
        n *= d if d is not None else 1
    return n


def _dims(shape: TensorShape, rank: int) -> list:
    dims = shape.as_list() if shape.ndims == rank else [None] * rank
    return [1 if d is None else d for d in dims]


def _flops(node: Node, ins: list, outs: list) -> float:
    """Floating-point operations of one execution: exact for MatMul and convolutions, one per
    element touched for everything else."""
    op = node.op
    if op == "MatMul" and len(ins) == 2:
        a, b = _dims(ins[0], 2), _dims(ins[1], 2)
        m, k = (a[1], a[0]) if node.attrs.get("transpose_a") else (a[0], a[1])
        n = b[0] if node.attrs.get("transpose_b") else b[1]
        return 2.0 * m * k * n
    if op in ("BatchMatMul", "BatchMatMulV2") and outs and ins[0].ndims:
        k = _dims(ins[0], ins[0].ndims)[-2 if node.attrs.get("adj_x") else -1]
        return 2.0 * _num_elements(outs[0]) * k
    if op in ("Conv2D", "DepthwiseConv2dNative") and len(ins) == 2 and outs:
        kh, kw, cin, _ = _dims(ins[1], 4)
        per_output = kh * kw * (cin if op == "Conv2D" else 1)
        return 2.0 * _num_elements(outs[0]) * per_output
    if op in ("Conv2DBackpropInput", "Conv2DBackpropFilter") and len(ins) == 3:
        return 2.0 * _num_elements(ins[2]) * _num_elements(ins[1 if op.endswith("Input") else 0])
    return float(max([_num_elements(s) for s in ins + outs] or [1]))


class CostModel:
    """Estimated and measured costs of the nodes of one runtime's graph, by node name.

    `speeds` maps device specs to relative speeds (see `speed`). Static shapes are inferred for
    the graph being simulated (`analyze`); `record` folds a traced step's StepStats into the
    measurements."""

    def __init__(self, speeds: dict | None = None, params: CostParams | None = None):
        self.params = params if params is not None else CostParams()
        self._speeds = [(parse(k), float(v)) for k, v in (speeds or {}).items()]
        for spec, v in self._speeds:
            if not v > 0:
                raise ValueError(f"device speed must be positive, got {v} for '{spec}'")
        self._speed_of: dict[str, float] = {}
        self._props: StaticShapes | None = None  # shapes of the nodes last analyzed
        self._nodes: dict[str, Node] = {}  # those nodes, by name
        self._work: dict[str, list] = {}  # node name -> [sum of time x speed, count], measured
        self._bytes: dict[tuple, int] = {}  # (node name, port) -> measured bytes

    # -- devices ----------------------------------------------------------------------------
    def speed(self, device: str) -> float:
        """The speed declared for the most specific spec matching `device` (1.0 if none)."""
        got = self._speed_of.get(device)
        if got is None:
            spec = parse(device)
            best, got = -1, 1.0
            for key, value in self._speeds:
                if key.is_compatible_with(spec):
                    fields = sum(f is not None for f in dataclasses.astuple(key))
                    if fields > best:
                        best, got = fields, value
            self._speed_of[device] = got
        return got

    def transfer_us(self, nbytes: float, src: str, dst: str) -> float:
        """Time to move `nbytes` from device `src` to `dst` by a Send/Recv pair (0 on one)."""
        if src == dst:
            return 0.0
        return self.params.link_latency_us + nbytes / self.params.link_bytes_per_us

    # -- static estimates ---------------------------------------------------------------------
    def analyze(self, nodes: list[Node]) -> None:
        """Infers the static shapes of `nodes` (runtime/passes/static_shapes.py: the OpDefs'
        shape functions over constants and declared placeholder and variable shapes), which
        the estimates read until the next call. Measurements are kept by node name."""
        by_name = {n.name: n for n in nodes}
        consts = {n.name: (n.attrs["value"],) for n in nodes if n.op in _CONST_OPS}
        props = StaticShapes(by_name, consts, {})
        for n in _topological(nodes, by_name):
            props.record(n)
        self._nodes, self._props = by_name, props

    def _shape(self, name: str, port: int) -> TensorShape:
        if self._props is None or name not in self._nodes:
            return TensorShape(None)
        return self._props.shape(name, port)

    def output_bytes(self, name: str, port: int) -> float:
        """Bytes of output `port` of node `name`: measured if it ran, else from its shape."""
        got = self._bytes.get((name, port))
        if got is not None:
            return float(got)
        node = self._nodes.get(name)
        if node is None or port >= len(node.output_types):
            return 0.0
        dtype = node.output_types[port].base_dtype
        size = dtype.size if dtype not in (dtypes.string, dtypes.resource, dtypes.variant) else 8
        return float(_num_elements(self._shape(name, port)) * size)

    def static_us(self, node: Node) -> float:
        """The estimate on a device of speed 1, before any measurement."""
        ins = [self._shape(src, port) for src, port in node.inputs]
        outs = [self._shape(node.name, p) for p in range(len(node.output_types))]
        touched = sum(self.output_bytes(src, port) for src, port in node.inputs)
        touched += sum(self.output_bytes(node.name, p) for p in range(len(node.output_types)))
        p = self.params
        return p.overhead_us + max(
            _flops(node, ins, outs) / p.flops_per_us, touched / p.bytes_per_us
        )

    def compute_us(self, node: Node, device: str) -> float:
        """Time of one execution of `node` on `device`: measured if it ran, else estimated."""
        measured = self._work.get(node.name)
        work = measured[0] / measured[1] if measured is not None else self.static_us(node)
        return work / self.speed(device)

    # -- measured costs -----------------------------------------------------------------------
    def record(self, step_stats) -> int:
        """Adds a traced step's node times (scaled to a device of speed 1) and output sizes;
        returns how many nodes of the analyzed graph it measured. A fed tensor's size is read
        from the feed's _Recv, whose label names the tensor ("... @x:0")."""
        count = 0
        for dev in step_stats.dev_stats:
            speed = self.speed(dev.device)
            for ns in dev.node_stats:
                if ns.node_name not in self._nodes:
                    self._record_feed(ns)
                    continue
                count += 1
                micros = (ns.op_end_rel_nanos - ns.op_start_rel_nanos) / 1000.0
                entry = self._work.setdefault(ns.node_name, [0.0, 0])
                entry[0] += micros * speed
                entry[1] += 1
                for out in ns.output:
                    desc = out.tensor_description.allocation_description
                    self._bytes[(ns.node_name, out.slot)] = desc.requested_bytes
        return count

    def _record_feed(self, ns) -> None:
        _, at, tensor = ns.timeline_label.rpartition(" @")
        src, colon, port = tensor.rpartition(":")
        if at and colon and port.isdigit() and src in self._nodes and ns.output:
            desc = ns.output[0].tensor_description.allocation_description
            self._bytes[(src, int(port))] = desc.requested_bytes

    def measured(self, name: str) -> bool:
        return name in self._work


_BACK_EDGE_OPS = frozenset({"NextIteration", "RefNextIteration"})


def _edges(nodes: list[Node]) -> tuple[dict, dict]:
    """(consumers by name, count of producers by name) among `nodes`, over data and control
    edges, loop back edges (out of NextIteration) left out so that the rest is acyclic."""
    by_name = {n.name: n for n in nodes}
    consumers: dict[str, list[str]] = {n.name: [] for n in nodes}
    pending = {}
    for n in nodes:
        preds = {s for s, _ in n.inputs} | set(n.control)
        preds = {p for p in preds if p in by_name and by_name[p].op not in _BACK_EDGE_OPS}
        pending[n.name] = len(preds)
        for p in preds:
            consumers[p].append(n.name)
    return consumers, pending


def _topological(nodes: list[Node], by_name: dict) -> list[Node]:
    """`nodes` with each after its producers among them; nodes left over (only a malformed
    cycle) follow in their given order."""
    consumers, pending = _edges(nodes)
    order = [n for n in nodes if pending[n.name] == 0]
    for n in order:  # grows while iterating
        for c in consumers[n.name]:
            pending[c] -= 1
            if pending[c] == 0:
                order.append(by_name[c])
    if len(order) < len(nodes):
        seen = {n.name for n in order}
        order += [n for n in nodes if n.name not in seen]
    return order


@dataclasses.dataclass
class Schedule:
    """A simulated execution: each node's device and its start and finish times (us)."""

    device: dict
    start: dict
    finish: dict
    consumers: dict  # node name -> names of its consumers (data and control)

    @property
    def makespan(self) -> float:
        return max(self.finish.values(), default=0.0)


def simulate(
    nodes: list[Node],
    model: CostModel,
    candidates: Callable[[Node], Sequence[str]] = lambda n: (n.device,),
    placed: Callable[[Node, str, list], None] | None = None,
) -> Schedule:
    """Simulates one step: nodes run in the order they become ready (ties by graph order), each
    device one node at a time, an input from another device arriving after its transfer. A node
    goes to the device of `candidates(node)` where it would finish soonest (the first on a tie);
    `placed(node, device, [(finish, device), ...])` hears each decision as it is made."""
    model.analyze(nodes)
    by_name = {n.name: n for n in nodes}
    consumers, pending = _edges(nodes)
    order = {n.name: i for i, n in enumerate(nodes)}
    ready = [(0.0, order[n.name], n.name) for n in nodes if pending[n.name] == 0]
    heapq.heapify(ready)
    sched = Schedule({}, {}, {}, consumers)
    free: dict[str, float] = {}  # device -> when it finishes its last simulated node
    while ready:
        _, _, name = heapq.heappop(ready)
        node = by_name[name]
        ends = [(_start_time(node, d, model, sched, free), d) for d in candidates(node)]
        ends = [(start + model.compute_us(node, d), d, start) for start, d in ends]
        end, device, start = min(ends, key=lambda e: e[0])
        if placed is not None:
            placed(node, device, [(t, d) for t, d, _ in ends])
        sched.device[name], sched.start[name], sched.finish[name] = device, start, end
        free[device] = end
        for c in consumers[name]:
            pending[c] -= 1
            if pending[c] == 0:
                heapq.heappush(ready, (end, order[c], c))
    return sched


def _start_time(node: Node, device: str, model: CostModel, sched: Schedule, free: dict) -> float:
    """When `node` could start on `device`: once the device is free and its inputs arrived."""
    start = free.get(device, 0.0)
    for src, port in node.inputs:
        if src in sched.finish:
            moved = model.transfer_us(model.output_bytes(src, port), sched.device[src], device)
            start = max(start, sched.finish[src] + moved)
    for c in node.control:
        if c in sched.finish:
            start = max(start, sched.finish[c] + model.transfer_us(0, sched.device[c], device))
    return start

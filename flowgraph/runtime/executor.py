"""The executor (whitepaper §3.1): runs one device's graph by pending counts and a ready queue.

Each node keeps the count of its inputs (data and control) not yet produced; nodes whose count
is zero wait in the ready queue, a heap ordered by construction order, so ties break the way the
graph was written and forward temporaries die early (§4.1). Cheap kernels run inline in the
scheduling thread; an expensive kernel goes to the device's inter-op thread pool when other work
is ready or in flight, so independent kernels overlap (NumPy releases the GIL in large kernels).
BLAS kernels are parallel inside (intra-op) and run inline, one at a time (kernels/base.py).
Asynchronous kernels (Recv) receive a continuation and never park a thread (§5.3).

Every output lives in a slot until its last consumer has read it, then the slot is cleared so
NumPy can free the buffer. Everything here is built once per (feeds, fetches, targets)
signature; a step allocates only the pending counts, the slots and its rendezvous.

Graphs with control flow (Switch/Merge/Enter/Exit/NextIteration) run on the tagged-frame loop
in `frames.py`, which shares this module's plan.
"""

from __future__ import annotations

import heapq
import queue
import threading
import time

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import KernelContext, bind, find_kernel
from flowgraph.runtime.graph import Node
from flowgraph.runtime.rendezvous import DEAD

INLINE, EXPENSIVE, ASYNC = 0, 1, 2
CONTROL_FLOW_OPS = frozenset(
    {
        "Switch",
        "RefSwitch",
        "Merge",
        "RefMerge",
        "Enter",
        "RefEnter",
        "Exit",
        "RefExit",
        "NextIteration",
        "RefNextIteration",
        "LoopCond",
        "ControlTrigger",
    }
)


class NodeItem:
    """The static facts the executor needs about one node."""

    __slots__ = (
        "id",
        "node",
        "compute",
        "inputs",
        "base",
        "num_outputs",
        "out_edges",
        "kind",
        "step_arg",
        "ctx",
    )

    def __init__(self, nid: int, node: Node):
        self.id = nid
        self.node = node
        self.compute = None  # kernel with its context bound
        self.inputs: list[int] = []  # slot of each data input
        self.base = 0  # slot of output 0
        self.num_outputs = len(node.output_types)
        self.out_edges: list[int] = []  # consumer node ids, one per data or control edge
        self.kind = INLINE
        self.step_arg = False  # kernel wants the Step as first argument
        self.ctx = None


def _deref(compute, positions, step_arg):
    """Wraps a kernel so reference inputs at `positions` are read (FailedPrecondition if unset)."""
    offset = 1 if step_arg else 0

    def run(*args):
        args = list(args)
        for p in positions:
            if args[p + offset] is not DEAD:  # a dead _Send still runs, to pass the deadness on
                args[p + offset] = args[p + offset].read()
        return compute(*args)

    return run


class ExecutorPlan:
    """One device's nodes, compiled: kernels bound, slots assigned, edges and pending counts."""

    def __init__(self, nodes: list[Node], device):
        self.device = device
        self.items = [NodeItem(i, n) for i, n in enumerate(nodes)]
        index = {n.name: i for i, n in enumerate(nodes)}
        slot = 0
        for item in self.items:
            item.base = slot
            slot += item.num_outputs
        self.num_slots = slot
        self.reads = [0] * slot  # data reads per slot: the slot is cleared after the last one
        self.pending = [0] * len(nodes)
        self.has_control_flow = False
        for item in self.items:
            node = item.node
            deref = []
            for pos, ((src, port), want) in enumerate(zip(node.inputs, node.input_types)):
                producer = self.items[index[src]]
                s = producer.base + port
                item.inputs.append(s)
                self.reads[s] += 1
                producer.out_edges.append(item.id)
                if producer.node.output_types[port].is_ref_dtype and not want.is_ref_dtype:
                    deref.append(pos)
            for c in node.control:
                self.items[index[c]].out_edges.append(item.id)
            self.pending[item.id] = len(node.inputs) + len(node.control)
            if node.op in CONTROL_FLOW_OPS:
                self.has_control_flow = True
            self._bind(item, deref)
        self.roots = [i.id for i in self.items if self.pending[i.id] == 0]

    def _bind(self, item: NodeItem, deref: list[int]):
        node = item.node
        try:
            kdef = find_kernel(node.op, self.device.device_type, node.attrs)
        except errors.NotFoundError as e:
            raise errors.NotFoundError(
                None, None, f"{e.message}\n\t [[node {node.name} on {self.device.name}]]"
            ) from None
        item.ctx = KernelContext(
            node.name, node.op, node.attrs, self.device, node.input_types, node.output_types
        )
        item.compute = bind(kdef, item.ctx)
        item.step_arg = kdef.step or kdef.async_
        item.kind = ASYNC if kdef.async_ else EXPENSIVE if kdef.expensive else INLINE
        if deref:
            item.compute = _deref(item.compute, deref, item.step_arg)


class Step:
    """The per-step state kernels may see: its id, rendezvous, step-local resources, stats."""

    __slots__ = (
        "step_id",
        "rendezvous",
        "resources",
        "stats",
        "frame_iter",
        "cancelled",
        "deadline",
    )

    def __init__(self, step_id, rendezvous, stats=None, timeout_ms: int = 0):
        self.step_id = step_id
        self.rendezvous = rendezvous
        self.resources = {}  # step-local containers (stacks, tensor arrays): dropped with the step
        self.stats = stats
        self.frame_iter = (0, 0)
        self.cancelled = False
        self.deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None

    def wait(self, completions):
        """The next completion; DeadlineExceededError once the step's deadline has passed."""
        if self.deadline is None:
            return completions.get()
        try:
            return completions.get(timeout=max(0.0, self.deadline - time.monotonic()))
        except queue.Empty:
            error = errors.DeadlineExceededError(
                None, None, "Timed out waiting for the step to finish"
            )
            self.rendezvous.abort(error)
            raise error from None


def node_error(item: NodeItem, device_name: str, e: BaseException) -> BaseException:
    """The TF error class for a kernel failure, naming the node, its op and its device.

    KeyboardInterrupt and SystemExit (Ctrl-C or sys.exit inside a kernel) are not kernel
    failures: they are returned unchanged, so the step is cancelled and the caller gets them."""
    if not isinstance(e, Exception):
        return e
    if isinstance(e, errors.OpError):
        cls, msg = type(e), e.message
    elif isinstance(
        e,
        (
            ValueError,
            TypeError,
            IndexError,
            ZeroDivisionError,
            FloatingPointError,
            np.linalg.LinAlgError,
        ),
    ):
        cls, msg = errors.InvalidArgumentError, str(e)
    elif isinstance(e, MemoryError):
        cls, msg = errors.ResourceExhaustedError, f"OOM when running the kernel: {e}"
    else:
        cls, msg = errors.UnknownError, f"{type(e).__name__}: {e}"
    err = cls(
        None, None, f"{msg}\n\t [[node {item.node.name} (op: {item.node.op}) on {device_name}]]"
    )
    err.node_name = item.node.name
    err.__cause__ = e
    return err


def _run_pooled(item, args, completions):
    t0 = time.perf_counter()
    try:
        with np.errstate(all="ignore"):
            out = item.compute(*args)
    except BaseException as e:  # handed to the scheduling thread, which raises it
        completions.put((item, None, e, t0, time.perf_counter()))
        return
    completions.put((item, out, None, t0, time.perf_counter()))


def execute(plan: ExecutorPlan, step: Step) -> None:
    """Runs one step of `plan` to completion; raises the first kernel failure.

    Floating-point exceptions follow IEEE (log(0) is -inf, 0/0 is nan) without NumPy warnings,
    as in TensorFlow; CheckNumerics is the op that turns them into errors."""
    with np.errstate(all="ignore"):
        _execute(plan, step)


def _execute(plan: ExecutorPlan, step: Step) -> None:
    if plan.has_control_flow:
        from flowgraph.runtime.frames import execute_frames

        return execute_frames(plan, step)
    items = plan.items
    pending = plan.pending[:]
    reads = plan.reads[:]
    vals = [None] * plan.num_slots
    ready = plan.roots[:]  # already sorted, hence a valid heap
    pool = plan.device.thread_pool
    completions = queue.SimpleQueue()
    inflight = 0
    error = None
    stats = step.stats
    mem = stats.memory(plan.device.name) if stats is not None else None
    released = []  # inputs whose last reader is running (memory accounting only)
    deferred = {}  # node id -> its released inputs, while it runs on the pool
    pop, push = heapq.heappop, heapq.heappush

    def finish(item, out):
        n = item.num_outputs
        if n == 1:
            vals[item.base] = out
        elif n:
            vals[item.base : item.base + n] = out
        if mem is not None:
            for s in range(item.base, item.base + n):
                mem.allocate(vals[s])
                if not reads[s]:
                    mem.free(vals[s])
        for c in item.out_edges:
            pending[c] -= 1
            if not pending[c]:
                push(ready, c)

    while True:
        while ready and error is None:
            item = items[pop(ready)]
            args = [vals[s] for s in item.inputs]
            for s in item.inputs:
                reads[s] -= 1
                if not reads[s]:
                    if mem is not None:  # inputs stay live while the kernel runs
                        released.append(vals[s])
                    vals[s] = None
            if item.step_arg:
                args.insert(0, step)
            if item.kind:
                if item.kind == ASYNC:
                    inflight += 1
                    args.insert(1, _completion(item, completions))
                    try:
                        item.compute(*args)
                    except BaseException as e:
                        completions.put((item, None, e, 0.0, 0.0))
                    continue
                if pool is not None and (ready or inflight):
                    inflight += 1
                    if mem is not None:
                        deferred[item.id], released = released, []
                    pool.submit(_run_pooled, item, args, completions)
                    continue
            t0 = time.perf_counter() if stats is not None else 0.0
            try:
                out = item.compute(*args)
            except BaseException as e:
                error = node_error(item, plan.device.name, e)
                step.cancelled = True  # now: an async kernel in flight (a dequeue) must not
                step.rendezvous.abort(  # keep the step waiting for it
                    errors.CancelledError(
                        None, None, "Step was cancelled by an error in another node"
                    )
                )
                break
            finish(item, out)
            if stats is not None:
                for value in released:
                    mem.free(value)
                released.clear()
                stats.record(
                    plan.device.name, item, t0, time.perf_counter(), out, threading.get_ident()
                )
        if not inflight:
            break
        item, out, exc, t0, t1 = step.wait(completions)
        inflight -= 1
        if exc is not None:
            if error is None:
                error = node_error(item, plan.device.name, exc)
                step.cancelled = True
                step.rendezvous.abort(
                    errors.CancelledError(
                        None, None, "Step was cancelled by an error in another node"
                    )
                )
        elif error is None:
            finish(item, out)
            if stats is not None:
                for value in deferred.pop(item.id, ()):
                    mem.free(value)
                stats.record(
                    plan.device.name,
                    item,
                    t0 or t1,
                    t1 or time.perf_counter(),
                    out,
                    threading.get_ident(),
                )
    if error is not None:
        step.rendezvous.abort(
            errors.CancelledError(None, None, "Step was cancelled by an error in another node")
        )
        raise error


def _completion(item, completions):
    t0 = time.perf_counter()

    def done(out=None, error=None):
        completions.put((item, out, error, t0, time.perf_counter()))

    return done
